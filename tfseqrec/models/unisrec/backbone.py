"""UniSRec's backbone: frozen item-text vectors through a mixture-of-experts adaptor into SASRec's encoder."""

import keras
import numpy as np
from keras import ops

from tfseqrec.checks import check_number
from tfseqrec.data import vocab
from tfseqrec.layers import MoEAdaptor
from tfseqrec.models.base import l2_normalize
from tfseqrec.models.sasrec.backbone import SASRecBackbone


@keras.saving.register_keras_serializable(package="tfseqrec")
class UniSRecBackbone(SASRecBackbone):
    """UniSRec's network: item text in, SASRec's encoder on top (no loss; ``UniSRec`` trains it).

    The item vectors are the ``MoEAdaptor``'s of the frozen text vectors (plus id
    embeddings with ``use_id_embeddings``); ``SASRecBackbone``'s encoder follows. The
    arguments and the call are ``UniSRec``'s (``loss`` excepted).

    Example:

    >>> backbone = UniSRecBackbone(num_items=20, text_dim=6, max_sequence_length=5, hidden_dim=8)
    >>> backbone(keras.ops.convert_to_tensor([[0, 0, 3, 4, 5]])).shape
    TensorShape([1, 5, 8])
    """

    def __init__(
        self,
        num_items,
        text_dim=384,
        num_experts=8,
        adaptor_dropout=0.2,
        use_id_embeddings=False,
        id_dropout=0.0,
        temperature=0.07,
        text_encoder=None,
        text_embeddings=None,
        **kwargs,
    ):
        if kwargs.get("item_features"):
            raise ValueError("UniSRec reads its items' text; item_features are for sasrec, bert4rec and hstu")
        if not 0 <= id_dropout < 1:
            raise ValueError(f"id_dropout must be in [0, 1), got {id_dropout}")
        check_number("num_experts", num_experts, minimum=1, integer=True)
        check_number("adaptor_dropout", adaptor_dropout, minimum=0, maximum=1, exclusive_maximum=True)
        check_number("temperature", temperature, minimum=0, exclusive_minimum=True, optional=True)
        # === Config === (read by make_item_layers, which SASRec's constructor calls)
        self.text_dim = text_dim
        self.num_experts = num_experts
        self.adaptor_dropout = adaptor_dropout
        self.use_id_embeddings = use_id_embeddings
        self.id_dropout = id_dropout
        self.temperature = temperature
        self.text_encoder = dict(text_encoder) if text_encoder is not None else None
        super().__init__(num_items, use_id_embeddings=use_id_embeddings, **kwargs)
        if text_embeddings is not None:
            self.set_text_embeddings(text_embeddings)

    reads_item_inputs = True  # its items' text vectors

    def make_item_layers(self, init):
        # === Layers ===
        self.feature_embedding = None
        self.text_embedding = keras.layers.Embedding(
            vocab.NUM_RESERVED + self.num_items,
            self.text_dim,
            embeddings_initializer="zeros",
            trainable=False,
            name="text_embedding",
        )
        self.adaptor = MoEAdaptor(
            self.hidden_dim,
            self.num_experts,
            self.adaptor_dropout,
            kernel_initializer=init(self.initializer_range or 0.02),
            name="adaptor",
        )
        self.item_embedding = self.id_known = None
        if self.use_id_embeddings:
            self.item_embedding = keras.layers.Embedding(
                vocab.NUM_RESERVED + self.num_items,
                self.hidden_dim,
                embeddings_initializer=init(self.initializer_range or 0.02),
                name="item_embedding",
            )
            # 1 where an item's id embedding is used, 0 where the item is read by its text alone.
            self.id_known = keras.layers.Embedding(
                vocab.NUM_RESERVED + self.num_items,
                1,
                embeddings_initializer="ones",
                trainable=False,
                name="id_known",
            )
            self.id_seed_generator = keras.random.SeedGenerator()
        self.make_event_embedding(init(self.initializer_range or 0.02))

    def set_text_embeddings(self, vectors):
        """Sets the text vectors ``[num_items, text_dim]`` of ids ``NUM_RESERVED ..``."""
        vectors = np.asarray(vectors, np.float32)
        if vectors.shape != (self.num_items, self.text_dim):
            raise ValueError(
                f"text vectors of shape {vectors.shape}; the model wants ({self.num_items}, "
                f"{self.text_dim}), one row per item"
            )
        if not np.all(np.isfinite(vectors)):
            bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
            raise ValueError(f"{len(bad)} text vectors are not finite (rows {bad[:5].tolist()} ...)")
        reserved = np.zeros((vocab.NUM_RESERVED, self.text_dim), np.float32)
        self.text_embedding.embeddings.assign(np.concatenate([reserved, vectors]))

    # The items' strings when known (``set_item_text``); the export's warm-up reads them.
    item_text = None

    def set_item_text(self, texts):
        """Keeps the items' strings, by vocabulary id (``data.text.item_texts``), beside the model.

        They are not weights and are not saved in the ``.keras`` file (the model
        directory keeps them as ``item_text.json``); the export's warm-up requests read
        them. ``None`` forgets them.
        """
        # Held outside Keras's attribute tracking: a list of strings is no layer state.
        object.__setattr__(self, "item_text", None if texts is None else list(texts))

    def set_trained_items(self, counts):
        """Uses the id embeddings of the items with a positive training count only.

        Args:
            counts: int ``[NUM_RESERVED + num_items]``, each id's occurrences in the
                training sequences (``np.bincount`` of them). An item never seen in
                training has an id embedding trained only as a negative; it is
                scored by its text alone instead, as an item added by its text.
        """
        if self.id_known is None:
            return
        counts = self.checked_item_counts(counts)
        self.id_known.embeddings.assign((counts > 0).astype(np.float32)[:, None])

    def set_item_counts(self, counts):
        """As ``set_trained_items``: UniSRec reads its items' training counts for that only."""
        self.set_trained_items(counts)

    def item_vectors(self, ids, training=None):
        """Adapted text vectors (plus id embeddings) of item ids: ``[..., hidden_dim]``."""
        x = self.adaptor(self.text_embedding(ids), training=training)
        if self.item_embedding is not None:
            x += self.id_vectors(ids, training)
        return x

    def id_vectors(self, ids, training=None):
        """The id embeddings of ``ids`` that are used: zero for items read by their text alone.

        Those are the items never seen in training (``set_trained_items``) and, in
        training, each occurrence with probability ``id_dropout``.
        """
        known = self.id_known(ids)
        if training and self.id_dropout:
            shape = (*ops.shape(ids), 1)
            keep = keras.random.uniform(shape, seed=self.id_seed_generator) >= self.id_dropout
            known *= ops.cast(keep, known.dtype)
        return self.item_embedding(ids) * known

    def embed_items(self, ids, training=None):
        return self.item_vectors(ids, training)

    def encode(self, x, mask, training=None, return_attention_scores=False):
        out = super().encode(x, mask, training=training, return_attention_scores=return_attention_scores)
        hidden, attention = out if return_attention_scores else (out, None)
        if self.temperature is not None:
            hidden = l2_normalize(hidden) / self.temperature
        return (hidden, attention) if return_attention_scores else hidden

    def score_text_vectors(self, vectors, mask):
        """Scores ``[batch, num_items]`` of histories given as text vectors.

        Args:
            vectors: float ``[batch, length, text_dim]``, newest last (the text path of
                the export: items known by their text only, so no id embedding).
            mask: bool ``[batch, length]``, false for padding.
        """
        mask = ops.cast(mask, "bool")
        hidden = self.encode(self.adaptor(vectors), mask)
        return self.scores_from_hidden(hidden[:, -1])

    def text_item_vectors(self, vectors):
        """Output-space vectors ``[n, hidden_dim]`` of items given by text vectors ``[n, text_dim]``."""
        x = self.adaptor(vectors)
        return l2_normalize(x) if self.temperature is not None else x

    def resized(self, num_items, text_embeddings):
        """A copy over ``num_items`` items: the first ones keep their weights.

        Args:
            num_items: the new catalogue size (at least the current one).
            text_embeddings: float ``[num_items - self.num_items, text_dim]``, the text
                vectors of the added items (their id embeddings start at zero: they
                are scored by their text).
        """
        if num_items < self.num_items:
            raise ValueError(f"cannot shrink a UniSRec from {self.num_items} to {num_items} items")
        config = {**self.get_config(), "num_items": num_items}
        config.pop("name", None)
        grown = type(self).from_config(config)
        for mine, theirs in zip(grown.weights, self.weights):
            value = np.asarray(theirs)
            if tuple(mine.shape) != value.shape:  # a table of item rows: new rows start at zero
                value = np.concatenate(
                    [value, np.zeros((num_items - self.num_items, value.shape[1]), value.dtype)]
                )
            mine.assign(value)
        known = np.asarray(self.text_embedding.embeddings)[vocab.NUM_RESERVED :]
        grown.set_text_embeddings(
            np.concatenate([known, np.asarray(text_embeddings, np.float32).reshape(-1, self.text_dim)])
        )
        return grown

    def output_table(self, training=False):
        ids = ops.arange(vocab.NUM_RESERVED, vocab.NUM_RESERVED + self.num_items, dtype="int32")
        table = self.item_vectors(ids, training=training)
        if self.temperature is not None:
            table = l2_normalize(table)
        return table, None

    def for_catalogue(self, text_embeddings, text_encoder=None):
        """This model over another catalogue, known by its items' text alone.

        The adaptor, positions and encoder keep their weights; the new model's items
        are the rows of ``text_embeddings`` (made by the same kind of sentence
        encoder) and it has no id embeddings. The paper's inductive transfer: a
        model trained on one dataset ranks the items of another, never trained on.

        Args:
            text_embeddings: float ``[num_items, text_dim]`` of the new catalogue.
            text_encoder: how those vectors were made (default: as this model's).
        """
        vectors = np.asarray(text_embeddings, np.float32)
        config = {
            **self.get_config(),
            "num_items": len(vectors),
            "use_id_embeddings": False,
            "text_encoder": text_encoder if text_encoder is not None else self.text_encoder,
        }
        config.pop("name", None)
        other = type(self).from_config(config)
        other.load_shared_weights(self)
        other.set_text_embeddings(vectors)
        return other

    def load_shared_weights(self, other):
        """Copies every weight of ``other`` (a UniSRec) but the item tables; returns how many.

        The adaptor, positions, blocks and final norm are what a catalogue does not
        change: what pre-training on other datasets passes on (``tfseqrec train
        --init-from``). Raises ``ValueError`` naming a weight whose shape differs.
        """
        tables = {"text_embedding/embeddings", "item_embedding/embeddings", "id_known/embeddings"}
        theirs = {_local_path(w): w for w in other.weights}
        copied = 0
        for weight in self.weights:
            path = _local_path(weight)
            if path in tables:
                continue
            if path not in theirs or tuple(theirs[path].shape) != tuple(weight.shape):
                found = tuple(theirs[path].shape) if path in theirs else "nothing"
                raise ValueError(
                    f"the pre-trained UniSRec has {found} for {path}, this one {tuple(weight.shape)}: "
                    "use the pre-training's sizes (hidden_dim, num_layers, num_heads, "
                    "max_sequence_length, num_experts, text encoder)"
                )
            weight.assign(theirs[path])
            copied += 1
        return copied

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "text_dim": self.text_dim,
                "num_experts": self.num_experts,
                "adaptor_dropout": self.adaptor_dropout,
                "use_id_embeddings": self.use_id_embeddings,
                "id_dropout": self.id_dropout,
                "temperature": self.temperature,
                "text_encoder": self.text_encoder,
            }
        )
        return config


def _local_path(weight):
    """A weight's path inside its model (without the model's own name)."""
    return weight.path.split("/", 1)[1]
