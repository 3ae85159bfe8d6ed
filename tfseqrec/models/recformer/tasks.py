"""Recformer tasks: a ``RecformerBackbone`` plus one objective each (keras-hub's split).

- ``Recformer``: the recommender. The ``[CLS]`` vector of a history against an item
  table (each item encoded as a one-item input), cosine over a temperature;
  fine-tuning is cross-entropy over the table.
- ``RecformerPretrainer``: masked language modelling on the history's tokens plus
  the item-item contrastive loss between each history and its next item.
- ``RecformerAligner``: contrastive alignment of ``[CLS]`` with the mean of the
  other output tokens, on item text alone.

Tasks built on the same backbone object share its weights: aligning, then
fine-tuning, trains one encoder.
"""

import keras
from keras import ops

from tfseqrec import losses
from tfseqrec.data.masking import ClozeMasking
from tfseqrec.models.recformer.backbone import RecformerBackbone


class RecformerTask(keras.Model):
    """A backbone and a temperature; the input's vector is its ``[CLS]`` state.

    Args:
        backbone: a ``RecformerBackbone``.
        temperature: the cosine-similarity temperature.
        pooling: ``"cls"``: an input's vector is its ``[CLS]`` state (the paper);
            ``"mean"``: the mean of its tokens' states, padding excluded (the official
            code's ``avg`` pooler, and how all-MiniLM-L6-v2 was trained).

    Call arguments:
        inputs: packed inputs (``tfseqrec.data.text.pack_histories``).

    Returns:
        The inputs' vectors ``[batch, hidden_dim]``.
    """

    def __init__(self, backbone, temperature=0.05, pooling="cls", **kwargs):
        super().__init__(**kwargs)
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        self.backbone = backbone
        self.temperature = temperature
        self.pooling = pooling
        self.contrastive = losses.ContrastiveLoss()

    def call(self, inputs, training=None):
        states = self.backbone(inputs, training=training)
        if self.pooling == "cls":
            return states[:, 0]
        weight = ops.cast(inputs["padding_mask"], states.dtype)[..., None]
        return ops.sum(states * weight, axis=1) / ops.maximum(ops.sum(weight, axis=1), 1.0)

    def scores(self, sequence, items):
        """``cos(sequence, item) / temperature`` ``[batch, num_candidates]``."""
        return losses.cosine_logits(sequence, items, self.temperature)

    @property
    def max_sequence_length(self):
        return self.backbone.max_sequence_length

    @property
    def max_tokens(self):
        return self.backbone.max_tokens

    @property
    def hidden_dim(self):
        return self.backbone.hidden_dim

    # The weights do not depend on input shapes: a loaded task builds as a new one does.
    def get_build_config(self):
        return {"input_shape": None}

    def build_from_config(self, config):
        self.build()

    def _with_regularization(self, loss):
        return loss + ops.sum(self.losses) if self.losses else loss

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "backbone": keras.layers.serialize(self.backbone),
                "temperature": self.temperature,
                "pooling": self.pooling,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="tfseqrec")
class Recformer(RecformerTask):
    """Text Is All You Need: items are their text, users the text of their history.

    Scores are ``cos(history [CLS], item [CLS]) / temperature`` against the item table
    (``set_item_embeddings``: each item encoded as a one-item input by the same
    backbone), so a new item only needs its text encoded. ``fit`` takes ``x`` packed
    histories and ``y`` the index of the next item in the table: ``ContrastiveLoss``
    over the whole table. Two-stage fine-tuning re-encodes the table from the
    backbone after each epoch (stage 1), then keeps it frozen (stage 2); the table is
    never a trainable weight.

    Args:
        backbone: a ``RecformerBackbone``.
        temperature: the cosine-similarity temperature.
        num_items: size of the item table (0 before one is set).

    Example:

    >>> backbone = RecformerBackbone(vocabulary_size=30, hidden_dim=8, num_layers=1, num_heads=2,
    ...                              intermediate_dim=16, max_tokens=12, max_sequence_length=3, attention_window=4)
    >>> model = Recformer(backbone, num_items=5)
    >>> ids = keras.ops.ones((2, 12), "int32")
    >>> inputs = {"token_ids": ids, "token_type_ids": ids, "item_position_ids": ids, "padding_mask": ids > 0}
    >>> model.set_item_embeddings(keras.random.normal((5, 8), seed=0))
    >>> tuple(model.scores(model(inputs)).shape)
    (2, 5)

    Reference:
        Li et al., "Text Is All You Need: Learning Language Representations for
        Sequential Recommendation", KDD 2023.
    """

    def __init__(self, backbone, temperature=0.05, num_items=0, pooling="cls", **kwargs):
        super().__init__(backbone, temperature, pooling, **kwargs)
        self.num_items = num_items

    def build(self, input_shape=None):
        if not self.backbone.built:
            self.backbone.build()
        self.item_embeddings = self.add_weight(
            shape=(self.num_items, self.backbone.hidden_dim),
            initializer="zeros",
            trainable=False,
            name="item_embeddings",
        )
        self.built = True

    def scores(self, sequence, items=None):
        """``cos(sequence, item) / temperature`` against ``items`` (default: the item table)."""
        return super().scores(sequence, self.item_embeddings if items is None else items)

    def set_item_embeddings(self, embeddings):
        """Fills the item table with ``[num_items, hidden_dim]`` vectors (see ``resized``)."""
        if not self.built:
            self.build()
        shape = tuple(ops.shape(embeddings))
        if shape != tuple(self.item_embeddings.shape):
            raise ValueError(
                f"the item table holds {tuple(self.item_embeddings.shape)}; got {shape} "
                "(model.resized(num_items) gives a model with another table size)"
            )
        self.item_embeddings.assign(ops.cast(embeddings, self.item_embeddings.dtype))

    def resized(self, num_items):
        """A ``Recformer`` on this backbone (shared) whose item table holds ``num_items``."""
        model = Recformer(self.backbone, self.temperature, int(num_items), self.pooling)
        model.build()
        return model

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return self._with_regularization(self.contrastive(y, self.scores(y_pred)))

    def get_config(self):
        return {**super().get_config(), "num_items": self.num_items}


@keras.saving.register_keras_serializable(package="tfseqrec")
class RecformerPretrainer(RecformerTask):
    """Recformer pre-training: masked language modelling plus item-item contrast.

    ``fit`` takes ``x`` packed histories and ``y`` the packed next item. The loss is
    ``ContrastiveLoss`` between each history and the batch's next items (its own
    next item the positive) plus ``mlm_weight`` times ``MaskedLMLoss`` on the
    history's tokens. Masking is ``ClozeMasking`` over the WordPiece ids from
    ``first_word_piece_id`` on (``[CLS]``, ``[SEP]``, padding and BERT's unused slots
    are below it), drawn fresh in every step: ``mask_prob`` of them, 80% ``[MASK]``,
    10% a random word piece, 10% kept. The MLM head is BERT's (dense + GELU, layer
    norm, the tied token embeddings plus a bias).

    Args:
        backbone: a ``RecformerBackbone``.
        temperature: the cosine-similarity temperature.
        mlm_weight: weight of the MLM loss.
        mask_prob: share of word pieces masked.
        mask_token_id: the ``[MASK]`` token (BERT uncased: 103).
        first_word_piece_id: the smallest maskable token id (BERT uncased: 999).
        seed: seed of the masking.
    """

    def __init__(
        self,
        backbone,
        temperature=0.05,
        mlm_weight=0.1,
        mask_prob=0.15,
        mask_token_id=103,
        first_word_piece_id=999,
        seed=None,
        **kwargs,
    ):
        super().__init__(backbone, temperature, **kwargs)
        # === Layers ===
        epsilon = backbone.layer_norm_epsilon
        self.mlm_transform = keras.layers.Dense(backbone.hidden_dim, activation="gelu", name="mlm_transform")
        self.mlm_norm = keras.layers.LayerNormalization(epsilon=epsilon, name="mlm_norm")
        self.masking = ClozeMasking(
            backbone.vocabulary_size - first_word_piece_id,
            mask_prob=mask_prob,
            mask_token_id=mask_token_id,
            first_item_id=first_word_piece_id,
            seed=seed,
            name="mlm_masking",
        )
        self.mlm_loss = losses.MaskedLMLoss()

        # === Config ===
        self.mlm_weight = mlm_weight
        self.mask_prob = mask_prob
        self.mask_token_id = mask_token_id
        self.first_word_piece_id = first_word_piece_id
        self.seed = seed

    def build(self, input_shape=None):
        if not self.backbone.built:
            self.backbone.build()
        self.mlm_transform.build((None, self.backbone.hidden_dim))
        self.mlm_norm.build((None, self.backbone.hidden_dim))
        self.mlm_bias = self.add_weight(
            shape=(self.backbone.vocabulary_size,), initializer="zeros", name="mlm_bias"
        )
        self.built = True

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        contrastive = self.contrastive.in_batch(y_pred, self(y, training=training), self.temperature)
        masked, labels, weights = self.masking(x["token_ids"])
        hidden = self.backbone({**x, "token_ids": masked}, training=training)
        h = self.mlm_norm(self.mlm_transform(hidden))
        logits = ops.matmul(h, ops.transpose(self.backbone.token_embeddings)) + self.mlm_bias
        mlm = self.mlm_loss(labels, logits, sample_weight=weights)
        return self._with_regularization(contrastive + self.mlm_weight * mlm)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mlm_weight": self.mlm_weight,
                "mask_prob": self.mask_prob,
                "mask_token_id": self.mask_token_id,
                "first_word_piece_id": self.first_word_piece_id,
                "seed": self.seed,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="tfseqrec")
class RecformerAligner(RecformerTask):
    """``[CLS]`` alignment: ``[CLS]`` learns the checkpoint's mean-pooled sentence vector.

    ``fit`` takes ``x`` packed inputs (items or histories; no labels, no interactions).
    ``ContrastiveLoss`` of each input's ``[CLS]`` output against the mean of its other
    output tokens (held fixed), the batch's other inputs as negatives.
    all-MiniLM-L6-v2 is a mean-pooling sentence encoder: its ``[CLS]`` state is nearly
    the same for every input (cosine 0.9999 between Scientific items), which leaves
    the cosine scores flat and fine-tuning stuck at the uniform loss. A few hundred
    steps of alignment on item text give ``[CLS]`` the sentence representation the
    checkpoint already has, without reading any interaction, so the model stays
    zero-shot.

    Args:
        backbone: a ``RecformerBackbone``.
        temperature: the cosine-similarity temperature.

    Call arguments:
        inputs: packed inputs.

    Returns:
        Every token's state ``[batch, length, hidden_dim]`` (the loss reads them all).
    """

    def build(self, input_shape=None):
        if not self.backbone.built:
            self.backbone.build()
        self.built = True

    def call(self, inputs, training=None):
        return self.backbone(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        hidden = y_pred
        weight = ops.cast(x["padding_mask"], hidden.dtype)[:, 1:, None]
        mean = ops.sum(hidden[:, 1:] * weight, axis=1) / ops.maximum(ops.sum(weight, axis=1), 1.0)
        return self._with_regularization(
            self.contrastive.in_batch(hidden[:, 0], ops.stop_gradient(mean), self.temperature)
        )


__all__ = ["Recformer", "RecformerAligner", "RecformerBackbone", "RecformerPretrainer", "RecformerTask"]
