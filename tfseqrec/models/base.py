"""What the id models' backbones share: inputs, positions, transformer blocks, scoring.

A backbone maps item ids to the sequence output ``[batch, length, hidden_dim]``; the
tasks on top of it (``tfseqrec.models.tasks``) own the loss, validation and top-k.
"""

import keras
import numpy as np
from keras import ops

from tfseqrec import losses
from tfseqrec.checks import check_number
from tfseqrec.data import events as events_lib
from tfseqrec.data import vocab
from tfseqrec.layers import EventEmbedding, ItemFeatureEmbedding, TransformerBlock
from tfseqrec.models.tasks import NextItemTask
from tfseqrec.ranking import exclude_items  # noqa: F401 (public name of this module)

# The base of every id model (a next-item or Cloze task over a backbone): the name
# ``evaluation`` and the exports test, and that ``tfseqrec`` exports.
SequentialRecommender = NextItemTask


def l2_normalize(x, epsilon=1e-12):
    """``x`` over its L2 norm along the last axis (at least ``sqrt(epsilon)``), TensorFlow's ``l2_normalize``
    arithmetic in ``keras.ops``."""
    return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=-1, keepdims=True), epsilon))


class SequentialBackbone(keras.Model):
    """Base class of the id models' backbones.

    A subclass builds its layers and implements ``call(inputs) -> hidden`` (the
    sequence output ``[batch, length, hidden_dim]`` after the output head),
    ``output_table()`` and, where inference needs another input layout,
    ``inference_inputs``; its constructor ends with ``build_weights``. A backbone
    has no loss: a task (``tfseqrec.models.tasks``) holds it as ``task.backbone``
    and trains it.
    With ``event_features`` (``{column: [values]}``, ``EventVocabulary.values``, or
    ``{column: slots}``; ``tfseqrec.data.events``) the inputs
    carry each event's context as ``event_<column>``, aligned with ``item_ids``; its
    vector (``EventEmbedding``) is added to that event's input vector, never to a scored
    item's, and left out where the slot is padding or ``[MASK]``.
    Scores address items by vocabulary id; column ``j`` of a score matrix is id
    ``j + vocab.NUM_RESERVED``, and reserved ids are never scored.
    """

    def __init__(
        self,
        num_items,
        max_sequence_length,
        hidden_dim,
        num_layers,
        num_heads,
        intermediate_dim,
        dropout,
        activation,
        normalize_first,
        position_origin="newest",
        item_features=None,
        use_id_embeddings=True,
        item_feature_tables=None,
        event_features=None,
        attribute_shrinkage=0.0,
        item_counts=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if position_origin not in ("newest", "oldest"):
            raise ValueError(f"position_origin must be 'newest' or 'oldest', got {position_origin!r}")
        # The model checks its own options (TrainConfig checks training options only).
        for name, value in (
            ("max_sequence_length", max_sequence_length),
            ("hidden_dim", hidden_dim),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
        ):
            check_number(name, value, minimum=1, integer=True)
        check_number("intermediate_dim", intermediate_dim, minimum=1, integer=True, optional=True)
        check_number("dropout", dropout, minimum=0, maximum=1, exclusive_maximum=True)
        check_number("attribute_shrinkage", attribute_shrinkage, minimum=0)
        self.position_origin = position_origin
        self.num_items = num_items
        self.max_sequence_length = max_sequence_length
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.activation = activation
        self.normalize_first = normalize_first
        self.item_features = {k: dict(v) for k, v in item_features.items()} if item_features else None
        self.use_id_embeddings = bool(use_id_embeddings)
        self.attribute_shrinkage = float(attribute_shrinkage)
        self.event_features = None
        if event_features:
            self.event_features = {
                k: list(v) if isinstance(v, (list, tuple)) else int(v) for k, v in event_features.items()
            }
        # The items' attribute values (not config: the weights carry them, as UniSRec's text vectors).
        self._feature_tables = item_feature_tables
        self._item_counts = item_counts
        if item_feature_tables is not None and not self.item_features:
            raise ValueError("item_feature_tables without item_features (the attributes' kinds and sizes)")
        if not self.use_id_embeddings and not self.item_features and not self.reads_item_inputs:
            raise ValueError(
                "use_id_embeddings=False needs item_features: without ids, items are their attributes"
            )

    # Whether the items have inputs of their own (UniSRec's text), so that they need no id.
    reads_item_inputs = False

    def make_item_embeddings(self, initializer):
        """The id embedding (``item_embedding``, unless ``use_id_embeddings`` is false) and the
        attributes' (``feature_embedding``, with ``item_features``) of every id."""
        rows = vocab.NUM_RESERVED + self.num_items
        self.item_embedding = self.feature_embedding = None
        if self.use_id_embeddings:
            self.item_embedding = keras.layers.Embedding(
                rows, self.hidden_dim, embeddings_initializer=initializer, name="item_embedding"
            )
        if self.item_features:
            self.feature_embedding = ItemFeatureEmbedding(
                rows,
                self.item_features,
                self.hidden_dim,
                # Without ids, padding and [MASK] still need a vector of their own.
                reserved_rows=0 if self.use_id_embeddings else vocab.NUM_RESERVED,
                embeddings_initializer=initializer,
                name="feature_embedding",
            )
            if self._feature_tables is not None:
                self.feature_embedding.set_tables(self._feature_tables)
        self.item_counts = None
        if (
            self.item_embedding is not None
            and self.feature_embedding is not None
            and self.attribute_shrinkage
        ):
            # Each id's training events: how far its id embedding is trusted over its attributes.
            self.item_counts = keras.layers.Embedding(
                rows, 1, embeddings_initializer="zeros", trainable=False, name="item_counts"
            )
            self.item_counts.build((None,))
            if self._item_counts is not None:
                self.set_item_counts(self._item_counts)
        self.make_event_embedding(initializer)

    def make_event_embedding(self, initializer):
        """The events' context embedding (``event_embedding``, with ``event_features``)."""
        self.event_embedding = None
        if self.event_features:
            self.event_embedding = EventEmbedding(
                events_lib.sizes(self.event_features),
                self.hidden_dim,
                embeddings_initializer=initializer,
                name="event_embedding",
            )

    def embed_events(self, inputs, ids):
        """The context vectors ``[batch, length, hidden_dim]`` of the events of ``inputs``
        (0 where ``ids`` is padding or ``[MASK]``), or ``None`` for a model without ``event_features``."""
        given = [k for k in inputs if k.startswith(events_lib.PREFIX)] if isinstance(inputs, dict) else []
        if self.event_embedding is None:
            if given:
                raise ValueError(f"inputs {given} given to a model trained without event features")
            return None
        if not isinstance(inputs, dict):
            inputs = {}
        keep = ops.logical_and(ops.not_equal(ids, vocab.PAD_ID), ops.not_equal(ids, vocab.MASK_ID))
        return self.event_embedding(inputs, keep=keep)

    def with_context(self, x, inputs, ids, scale=1.0):
        """Item vectors ``x`` plus their events' context (``embed_events``) times ``scale``."""
        context = self.embed_events(inputs, ids)
        if context is None:
            return x
        return x + ops.cast(context, x.dtype) * scale

    def lookup_items(self, ids):
        """Each id's vector ``[..., hidden_dim]``: its id embedding plus its attributes'
        (weighed by ``attribute_weights``)."""
        x = None if self.item_embedding is None else self.item_embedding(ids)
        if self.feature_embedding is not None:
            features = self.feature_embedding(ids)
            if self.item_counts is not None:
                features *= ops.cast(self.attribute_weights(self.item_counts(ids)), features.dtype)
            x = features if x is None else x + features
        return x

    def attribute_weights(self, counts):
        """The weight of an item's attributes beside its id embedding, of its training events
        ``counts``: ``k / (k + counts)``, ``k`` the ``attribute_shrinkage``.

        The attributes are a prior that an item's own events outweigh, as in a shrinkage
        estimate: an item never trained on (a new one) is its attributes, one of ``k``
        events is half its attributes, a popular one almost only its id embedding.
        SASRec's default is 10 (at full weight on every item its attributes cost it 4%
        NDCG@10 on ML-100K); BERT4Rec's and HSTU's 0, every item's attributes at full
        weight, with which they learn faster (``benchmarks/attributes.md``).
        """
        k = self.attribute_shrinkage
        return k / (k + ops.cast(counts, "float32"))

    def set_item_counts(self, counts):
        """Writes each id's occurrences in the training sequences: int ``[NUM_RESERVED +
        num_items]`` (``Sequences.item_counts``). They weigh the attributes
        (``attribute_weights``); a model without both ids and attributes needs none."""
        if self.item_counts is None:
            return
        counts = self.checked_item_counts(counts)
        self.item_counts.embeddings.assign(counts.astype(np.float32)[:, None])

    def checked_item_counts(self, counts):
        """``counts`` as an array, refused unless it holds one count per id, none negative."""
        counts = np.asarray(counts)
        rows = vocab.NUM_RESERVED + self.num_items
        if counts.shape != (rows,):
            raise ValueError(f"item counts of shape {counts.shape}; the model wants ({rows},), one per id")
        if counts.min(initial=0) < 0:
            raise ValueError("item counts must not be negative")
        return counts

    def item_table(self):
        """Every id's vector ``[NUM_RESERVED + num_items, hidden_dim]``, as ``lookup_items`` gives it.

        Without attributes this is the id embedding's variable itself, which a sampled
        loss reads by rows (its gradient stays sparse).
        """
        if self.feature_embedding is None:
            return self.item_embedding.embeddings
        table = self.feature_embedding.table()
        if self.item_embedding is None:
            return table
        if self.item_counts is not None:
            table *= ops.cast(self.attribute_weights(self.item_counts.embeddings), table.dtype)
        return self.item_embedding.embeddings + table

    def with_items(self, num_items, item_features=None, item_feature_tables=None):
        """A copy over ``num_items`` items (at least this one's): the first ones keep their weights.

        The rows of the added items start at zero (their id embedding, BERT4Rec's output
        bias): a model with attributes scores them by their attributes alone. Their
        attribute values are ``item_feature_tables`` (every row's: ``encode`` of the grown
        vocabulary), ``item_features`` the attributes' sizes for them (a multi-valued field
        may be wider).
        """
        if num_items < self.num_items:
            raise ValueError(f"cannot shrink a model from {self.num_items} to {num_items} items")
        config = {**self.get_config(), "num_items": num_items}
        config.pop("name", None)
        if item_features is not None:
            config["item_features"] = item_features
        grown = type(self).from_config(config)
        slots = set() if grown.feature_embedding is None else {id(v) for v in grown.feature_embedding.slots}
        for mine, theirs in zip(grown.weights, self.weights):
            if id(mine) in slots:
                continue  # the attributes' values: set below
            value = np.asarray(theirs)
            if tuple(mine.shape) != value.shape:  # a table of item rows: new rows start at zero
                if tuple(mine.shape[1:]) != value.shape[1:]:
                    raise ValueError(f"{mine.path}: shape {value.shape} cannot grow to {tuple(mine.shape)}")
                value = np.concatenate(
                    [value, np.zeros((mine.shape[0] - len(value), *value.shape[1:]), value.dtype)]
                )
            mine.assign(value)
        if item_feature_tables is not None:
            grown.set_item_features(item_feature_tables)
        return grown

    def set_item_features(self, tables):
        """Writes the items' attribute values (``tfseqrec.data.features.encode``'s ``tables``)."""
        if self.feature_embedding is None:
            raise ValueError("this model was built without item_features; it reads item ids only")
        self.feature_embedding.set_tables(tables)

    def make_blocks(self, causal, default_intermediate_dim, layer_norm_epsilon, **block_options):
        """The ``num_layers`` transformer blocks of this model (``block_options`` to each)."""
        return [
            TransformerBlock(
                self.num_heads,
                self.intermediate_dim or default_intermediate_dim,
                dropout=self.dropout,
                activation=self.activation,
                normalize_first=self.normalize_first,
                causal=causal,
                layer_norm_epsilon=layer_norm_epsilon,
                name=f"block_{i}",
                **block_options,
            )
            for i in range(self.num_layers)
        ]

    def run_blocks(self, x, mask, training, return_attention_scores):
        """``x`` through ``self.blocks``; with the attention maps of each when asked."""
        attention = []
        for block in self.blocks:
            if return_attention_scores:
                x, scores = block(x, padding_mask=mask, training=training, return_attention_scores=True)
                attention.append(scores)
            else:
                x = block(x, padding_mask=mask, training=training)
        return x, attention

    # --- to implement --------------------------------------------------------------

    # Whether the inputs must carry ``timestamps`` (HSTU with a time bias).
    uses_timestamps = False

    def output_table(self, training=False):
        """``(item_embeddings [num_items, d], bias [num_items] or None)``.

        ``training`` is true in the training loss (a table computed by layers with
        dropout, as UniSRec's, applies it there).
        """
        raise NotImplementedError

    def output_rows(self, training=False):
        """``output_table`` as a ``losses.ItemRows`` (read by rows, so that a sampled
        loss's gradient of it stays sparse), where the table is row-wise; else the table."""
        return self.output_table(training=training)

    def example_inputs(self):
        """A batch of one padded window, as ``call`` takes it: what builds the weights."""
        ids = ops.zeros((1, self.max_sequence_length), "int32")
        if not self.event_features:
            return ids
        return {"item_ids": ids, **{events_lib.input_name(c): ids for c in self.event_features}}

    def build_weights(self):
        """Creates every weight by a call on ``example_inputs()``."""
        self(self.example_inputs())

    def inference_inputs(self, inputs):
        """Inputs for predicting the item after the history (default: unchanged)."""
        return inputs

    # --- inputs --------------------------------------------------------------------

    @staticmethod
    def unpack_inputs(inputs):
        """``(item_ids, padding_mask)`` from a dict or a bare id tensor."""
        if isinstance(inputs, dict):
            ids = inputs["item_ids"]
            mask = inputs.get("padding_mask")
        else:
            ids, mask = inputs, None
        ids = ops.convert_to_tensor(ids)
        if mask is None:
            mask = ops.not_equal(ids, vocab.PAD_ID)
        return ids, ops.cast(mask, "bool")

    def positions(self, length):
        """Position ids: the newest item (last slot) always gets ``max_sequence_length - 1``."""
        return ops.arange(length, dtype="int32") + (self.max_sequence_length - length)

    def position_ids(self, padding_mask):
        """Int ``[batch, length]`` position of each slot (padded slots: 0).

        ``position_origin="oldest"``: 0 for the oldest item of the window, counting up
        to the newest (the reference code's right padding); ``"newest"``:
        ``max_sequence_length - 1`` for the last slot, counting down (the original
        code's left padding). Neither depends on how much padding there is.
        """
        if self.position_origin == "oldest":
            return ops.maximum(ops.cumsum(ops.cast(padding_mask, "int32"), axis=1) - 1, 0)
        shape = ops.shape(padding_mask)
        return ops.broadcast_to(self.positions(shape[1])[None], shape)

    # --- scoring -------------------------------------------------------------------

    def scores_from_hidden(self, hidden):
        """Float32 scores ``[..., num_items]`` of hidden states ``[..., d]``."""
        table, bias = self.output_table()
        scores = losses.dot_rows(ops.cast(hidden, table.dtype), table)
        if bias is not None:
            scores += bias
        return ops.cast(scores, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_items": self.num_items,
                "max_sequence_length": self.max_sequence_length,
                "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "activation": self.activation,
                "normalize_first": self.normalize_first,
                "position_origin": self.position_origin,
                "item_features": self.item_features,
                "use_id_embeddings": self.use_id_embeddings,
                "event_features": self.event_features,
                "attribute_shrinkage": self.attribute_shrinkage,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Models saved before position_origin existed counted from the newest item.
        config.setdefault("position_origin", "newest")
        if config.get("item_features"):
            # Models saved before attribute_shrinkage weighed every item's attributes fully.
            config.setdefault("attribute_shrinkage", 0.0)
        return cls(**config)
