"""The context of each event (its type, device, rating) as one vector an event."""

import keras
from keras import ops

from tfseqrec.checks import check_number
from tfseqrec.data.events import input_name


@keras.saving.register_keras_serializable(package="tfseqrec")
class EventEmbedding(keras.layers.Layer):
    """Per-event categorical columns, each embedded, summed: ``[batch, length, output_dim]``.

    Every column has its own table; slot 0 (padding) gives a zero vector, so a padded
    event, or one whose context the caller zeroes (BERT4Rec's ``[MASK]``), adds nothing.
    The backbone adds the sum to the event's input vector, never to a scored item's.

    Args:
        features: ``{column: slots}`` (``tfseqrec.data.events.EventVocabulary.sizes``:
            reserved slots plus values).
        output_dim: the vector's width (the model's ``hidden_dim``).
        embeddings_initializer: of every table.

    Call arguments:
        inputs: ``{"event_<column>": int [batch, length]}`` holding every column (other
            keys are ignored).
        keep: optional bool ``[batch, length]``: where false the context is left out.

    Example:

    >>> layer = EventEmbedding({"type": 5}, 8)
    >>> layer({"event_type": keras.ops.convert_to_tensor([[0, 3, 4]])}).shape
    TensorShape([1, 3, 8])
    """

    def __init__(self, features, output_dim, embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        if not features:
            raise ValueError("an EventEmbedding needs at least one column")
        for name, size in features.items():
            check_number(f"event feature {name!r} slots", size, minimum=2, integer=True)
        check_number("output_dim", output_dim, minimum=1, integer=True)
        # === Config ===
        self.features = {name: int(size) for name, size in sorted(features.items())}
        self.output_dim = output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

        # === Layers ===
        self.tables = {
            name: keras.layers.Embedding(
                size,
                output_dim,
                embeddings_initializer=self.embeddings_initializer,
                name=f"{input_name(name)}_embedding",
            )
            for name, size in self.features.items()
        }

    def build(self, input_shape=None):
        for table in self.tables.values():
            table.build((None,))
        self.built = True

    def call(self, inputs, keep=None):
        missing = [input_name(name) for name in self.features if input_name(name) not in inputs]
        if missing:
            raise ValueError(f"the model reads event context: inputs {missing} are missing")
        total = None
        for name, table in self.tables.items():
            slots = ops.convert_to_tensor(inputs[input_name(name)])
            present = ops.not_equal(slots, 0)
            if keep is not None:
                present = ops.logical_and(present, ops.cast(keep, "bool"))
            vectors = table(slots) * ops.cast(present, table.embeddings.dtype)[..., None]
            total = vectors if total is None else total + vectors
        return total

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "features": self.features,
                "output_dim": self.output_dim,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
