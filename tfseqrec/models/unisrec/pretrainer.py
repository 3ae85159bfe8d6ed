"""UniSRec's pre-training: sequence-item and sequence-sequence contrast over a UniSRec."""

import keras
from keras import ops

from tfseqrec import losses
from tfseqrec.data import vocab
from tfseqrec.models.base import l2_normalize


@keras.saving.register_keras_serializable(package="tfseqrec")
class UniSRecPretrainer(keras.Model):
    """UniSRec's pre-training: sequence-item plus sequence-sequence contrast (Eq. 7-9).

    ``fit`` takes ``x = {"item_ids": [batch, length]}`` histories (newest last, left
    padded) and ``y`` the next item ``[batch]``, over a catalogue that may join several
    datasets (their items side by side, each known by its text). With ``s`` the
    normalised sequence vector and ``v`` the normalised adapted text vector:

    - sequence-item: ``-log softmax(s_j . v_j / t)`` against the batch's other next
      items (in-batch negatives, so a batch mixing datasets contrasts across them);
    - sequence-sequence: the same history with each item dropped with probability
      ``item_drop`` (the newest always kept) is the positive of ``s``, the batch's
      other augmented histories the negatives; weight ``seq_seq_weight`` (the
      paper's lambda, 1e-3).

    A negative whose next item equals the row's own is left out of both (the official
    code's ``same_pos_id``).

    Args:
        model: a ``UniSRec`` (text only) over the pre-training catalogue; it is trained
            in place.
        seq_seq_weight: weight of the sequence-sequence loss.
        item_drop: drop probability of the augmentation.
        seed: seed of the augmentation.

    Reference:
        Hou et al., "Towards Universal Sequence Representation Learning for
        Recommender Systems", KDD 2022.
    """

    def __init__(self, model, seq_seq_weight=1e-3, item_drop=0.2, seed=None, **kwargs):
        super().__init__(**kwargs)
        if model.backbone.temperature is None:
            raise ValueError("UniSRec pre-training contrasts cosines: the model needs a temperature")
        self.model = model
        self.seq_seq_weight = seq_seq_weight
        self.item_drop = item_drop
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, inputs, training=None):
        return self.model(inputs, training=training)

    def augment(self, ids):
        """``ids`` with each item dropped at ``item_drop`` (the newest kept), the rest moved right."""
        ids = ops.convert_to_tensor(ids)
        real = ids >= vocab.NUM_RESERVED
        drop = keras.random.uniform(ops.shape(ids), seed=self.seed_generator) < self.item_drop
        length = ops.shape(ids)[1]
        positions = ops.arange(length, dtype="int32")[None]
        keep = ops.logical_and(real, ops.logical_or(ops.logical_not(drop), positions == length - 1))
        # Dropped items first, then the kept ones, each in their order: a stable sort of
        # `keep`, by keys that never tie.
        order = ops.argsort(ops.cast(keep, "int32") * length + positions, axis=1)
        return ops.where(
            ops.take_along_axis(keep, order, axis=1),
            ops.take_along_axis(ids, order, axis=1),
            ops.zeros_like(ids),
        )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        t = self.model.backbone.temperature
        y = ops.reshape(ops.cast(y, "int32"), [-1])
        sequence = y_pred[:, -1] * t  # the model returns normalised vectors over t
        items = l2_normalize(self.model.backbone.item_vectors(y, training=training))
        ids = x["item_ids"] if isinstance(x, dict) else x
        augmented = self.model(self.augment(ids), training=training)[:, -1] * t
        n = ops.shape(y)[0]
        same = ops.logical_and(ops.equal(y[:, None], y[None, :]), ops.logical_not(ops.eye(n, dtype="bool")))
        labels = ops.arange(n, dtype="int32")

        def contrast(a, b):
            logits = ops.where(same, -1e9, losses.dot_rows(a, b) / t)
            return ops.mean(ops.sparse_categorical_crossentropy(labels, logits, from_logits=True))

        loss = contrast(sequence, items) + self.seq_seq_weight * contrast(sequence, augmented)
        return loss + sum(self.losses[1:], self.losses[0]) if self.losses else loss

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "model": keras.layers.serialize(self.model),
                "seq_seq_weight": self.seq_seq_weight,
                "item_drop": self.item_drop,
                "seed": self.seed,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["model"] = keras.layers.deserialize(config["model"])
        return cls(**config)
