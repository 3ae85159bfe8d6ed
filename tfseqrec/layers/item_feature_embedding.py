"""The items' attributes as one vector an item: categorical, multi-valued and numeric fields."""

import keras
from keras import ops

from tfseqrec.checks import check_choice, check_number

KINDS = ("categorical", "multi", "numeric")


@keras.saving.register_keras_serializable(package="tfseqrec")
class ItemFeatureEmbedding(keras.layers.Layer):
    """Each item's attributes, embedded and summed: ``[..., output_dim]`` of item ids.

    Every attribute has its own embedding table. A categorical field gives its value's
    row; a multi-valued field the mean of its values' rows; a numeric field goes
    through a dense projection of ``(standardised value, missing flag)``, initialised as
    the tables are. The vectors of the attributes are summed, as RecTools'
    ``CatFeaturesItemNet`` sums categorical features (and adds them to the id embedding,
    which the backbone does).

    Which values an item has are data, not weights to learn: ``set_tables`` writes
    them (``tfseqrec.data.features.encode`` makes them) into non-trainable
    variables, so that a saved model carries them and serves them.

    Args:
        num_rows: the vocabulary's size (reserved ids and items): the rows of the tables.
        features: ``{name: {"kind": "categorical" | "multi" | "numeric", "values": V,
            "width": W}}``; ``values``: a categorical or multi field's value slots (reserved
            ones included: 0 pads a multi-valued field, 1 is "missing", 2 "unknown"),
            ``width``: the most values an item has (1 for categorical).
        output_dim: the vector's width (the model's ``hidden_dim``).
        reserved_rows: ids below this get a learned vector of their own (a model without
            id embeddings: its padding and ``[MASK]`` tokens); 0 for none.
        embeddings_initializer: of every attribute's table.

    Example:

    >>> layer = ItemFeatureEmbedding(4, {"genre": {"kind": "multi", "values": 5, "width": 2}}, 8)
    >>> layer.set_tables({"genre": [[0, 0], [1, 0], [3, 4], [4, 0]]})
    >>> layer(keras.ops.convert_to_tensor([[2, 3]])).shape
    TensorShape([1, 2, 8])
    """

    def __init__(
        self,
        num_rows,
        features,
        output_dim,
        reserved_rows=0,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_number("num_rows", num_rows, minimum=1, integer=True)
        check_number("reserved_rows", reserved_rows, minimum=0, integer=True)
        if not features:
            raise ValueError("an ItemFeatureEmbedding needs at least one attribute")
        # === Config ===
        self.num_rows = num_rows
        self.features = {name: dict(spec) for name, spec in sorted(features.items())}
        self.output_dim = output_dim
        self.reserved_rows = reserved_rows
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

        # === Layers ===
        self.names = list(self.features)
        self.slots, self.tables = [], []
        for name, spec in self.features.items():
            check_choice(f"the kind of attribute {name!r}", spec.get("kind"), KINDS)
            if spec["kind"] == "numeric":
                # The embeddings' initializer: a projection that starts larger than the id
                # vectors it is added to would drown them (Glorot's is ~10x BERT4Rec's 0.02).
                projection = keras.layers.Dense(
                    output_dim, kernel_initializer=self.embeddings_initializer, name=f"{name}_projection"
                )
                self.tables.append(projection)
                shape, dtype = (num_rows, 2), "float32"
            else:
                check_number(f"{name} values", spec.get("values"), minimum=4, integer=True)
                check_number(f"{name} width", spec.get("width"), minimum=1, integer=True)
                self.tables.append(
                    keras.layers.Embedding(
                        spec["values"],
                        output_dim,
                        embeddings_initializer=self.embeddings_initializer,
                        name=f"{name}_embedding",
                    )
                )
                shape, dtype = (num_rows, spec["width"]), "int32"
            self.slots.append(
                self.add_weight(
                    shape=shape, dtype=dtype, initializer="zeros", trainable=False, name=f"{name}_slots"
                )
            )
        self.reserved = None
        if reserved_rows:
            self.reserved = keras.layers.Embedding(
                reserved_rows,
                output_dim,
                embeddings_initializer=self.embeddings_initializer,
                name="reserved_embedding",
            )

    def build(self, input_shape):
        for spec, table in zip(self.features.values(), self.tables):
            table.build((None, 2) if spec["kind"] == "numeric" else (None,))
        if self.reserved is not None:
            self.reserved.build((None,))

    def set_tables(self, tables):
        """Writes each attribute's values of every row: ``{name: int [num_rows, width]}`` (value
        slots) or ``float [num_rows, 2]`` (numeric: standardised value, missing flag)."""
        missing = sorted(set(self.names) - set(tables))
        if missing:
            raise ValueError(f"no values given for the attributes {missing}")
        for name, variable in zip(self.names, self.slots):
            value = ops.convert_to_tensor(tables[name], dtype=variable.dtype)
            if tuple(value.shape) != tuple(variable.shape):
                raise ValueError(
                    f"attribute {name!r}: values of shape {tuple(value.shape)}, want {variable.shape}"
                )
            variable.assign(value)

    def call(self, ids):
        ids = ops.cast(ids, "int32")
        out = None
        for spec, slots, table in zip(self.features.values(), self.slots, self.tables):
            rows = ops.take(slots, ids, axis=0)
            if spec["kind"] == "numeric":
                vector = table(rows)
            else:
                vectors = table(rows)  # [..., width, d]
                present = ops.cast(ops.not_equal(rows, 0), vectors.dtype)[..., None]
                vector = ops.sum(vectors * present, axis=-2) / ops.maximum(ops.sum(present, axis=-2), 1.0)
            out = vector if out is None else out + vector
        if self.reserved is not None:
            is_reserved = ops.cast(ops.less(ids, self.reserved_rows), out.dtype)[..., None]
            reserved = self.reserved(ops.minimum(ids, self.reserved_rows - 1))
            out = out * (1.0 - is_reserved) + reserved * is_reserved
        return out

    def table(self):
        """Every row's vector: ``[num_rows, output_dim]``."""
        return self(ops.arange(self.num_rows, dtype="int32"))

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_rows": self.num_rows,
                "features": self.features,
                "output_dim": self.output_dim,
                "reserved_rows": self.reserved_rows,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
