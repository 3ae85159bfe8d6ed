"""UniSRec's pre-training: sequence-item and sequence-sequence contrast over a UniSRec."""

import keras
import tensorflow as tf

from tfseqrec.data import vocab


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
        if model.temperature is None:
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
        ids = tf.convert_to_tensor(ids)
        real = ids >= vocab.NUM_RESERVED
        drop = keras.random.uniform(tf.shape(ids), seed=self.seed_generator) < self.item_drop
        newest = tf.one_hot(tf.shape(ids)[1] - 1, tf.shape(ids)[1], on_value=True, off_value=False)[None]
        keep = real & (~drop | newest)
        order = tf.argsort(tf.cast(keep, tf.int32), axis=1, stable=True)
        return tf.where(
            tf.gather(keep, order, batch_dims=1), tf.gather(ids, order, batch_dims=1), tf.zeros_like(ids)
        )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        t = self.model.temperature
        y = tf.reshape(tf.cast(y, "int32"), [-1])
        sequence = y_pred[:, -1] * t  # the model returns normalised vectors over t
        items = tf.math.l2_normalize(self.model.item_vectors(y, training=training), axis=-1)
        ids = x["item_ids"] if isinstance(x, dict) else x
        augmented = self.model(self.augment(ids), training=training)[:, -1] * t
        same = tf.equal(y[:, None], y[None, :]) & ~tf.eye(tf.shape(y)[0], dtype="bool")
        labels = tf.range(tf.shape(y)[0])

        def contrast(a, b):
            logits = tf.where(same, -1e9, tf.matmul(a, b, transpose_b=True) / t)
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

        loss = contrast(sequence, items) + self.seq_seq_weight * contrast(sequence, augmented)
        return loss + tf.add_n(self.losses) if self.losses else loss

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
