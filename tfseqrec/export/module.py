"""The serving modules: the signatures of an export, and the warm-up request of each.

``Recommender`` serves SASRec, BERT4Rec and HSTU, ``TimedRecommender`` a model that reads
event times (HSTU with a time bias: every history signature also takes ``timestamps``),
``ContextRecommender`` one that reads event context (every history signature also takes
``event_<column>``, and ``timestamps`` when the model reads them),
``TextRecommender`` a Recformer and ``UniSRecTextRecommender`` a UniSRec (the id signatures
plus text in); ``tfseqrec.kinds`` picks one for a model. The signatures and their rules
are listed in ``tfseqrec.export``.

Recommendations hold only items that can be recommended (never one of the history, never
one the model scored NaN or ``-inf``). Their shape is fixed (``[batch, k]``), so when fewer
items than ``k`` remain (a history of nearly the whole catalogue, a ``recommend_top_k`` k
past it) the last slots are padding: item id ``PAD_RAW_ID`` (``""``; ``PAD_INT_ID``, -1,
in ``recommend_ids``) and score ``-inf``, an id no item has and a score no item gets. Every signature ``NAME`` has a
``_warmup_NAME`` method beside it: the request the server replays for it before
answering its first request (``tfseqrec.export.warmup``).
"""

import re

import tensorflow as tf

from tfseqrec import block_ranking, ranking, serving
from tfseqrec.data import events as events_lib
from tfseqrec.data import features as features_lib
from tfseqrec.data import tfrecord
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.models.base import SequentialRecommender
from tfseqrec.models.recformer.recommender import pack_inputs

SIGNATURES = ("serving_default", "recommend_ids", "recommend_top_k", "predict_examples", "rank_targets")
TEXT_SIGNATURES = ("recommend_texts", "encode_items")
# Raw ids a recommend_ids export can carry as int64: non-negative, canonical (no
# leading zeros: "007" would come back as 7) and below 2**63. Negative ids are padding.
_INTEGER = re.compile(r"(0|[1-9][0-9]{0,18})\Z")


# The item id of a slot that holds no item (fewer recommendable items than k): its
# score is -inf. PAD_RAW_ID in the string signatures, PAD_INT_ID in recommend_ids.
PAD_RAW_ID = ""
PAD_INT_ID = -1


def _integer_id(raw):
    return bool(_INTEGER.match(raw)) and int(raw) < 2**63


def signature(*specs):
    """Marks a method as a signature taking ``specs`` (``tf.TensorSpec``s, in order).

    The method stays a plain method (eager when called directly); ``signatures()`` traces
    it once. A ``tf.function`` attribute would be traced twice per export: ``tf.saved_model.save``
    traces every function it finds on the module again in its own context.
    """

    def mark(method):
        method.input_signature = list(specs)
        return method

    return mark


class Recommender(tf.Module):
    """A scoring model and its vocabulary as a TF Serving module.

    The model needs ``score(window) -> [batch, num_items]`` over vocabulary ids (id
    ``j + NUM_RESERVED`` is column ``j``), ``num_items`` and ``max_sequence_length``:
    ``tfseqrec.models.SASRec``, ``BERT4Rec`` and ``HSTU`` (``TimedRecommender`` serves one that
    reads event times).

    Args:
        model: the trained model.
        vocabulary: its ``ItemVocabulary``.
        vocabulary_path: where ``vocabulary`` is saved (becomes the SavedModel asset).
        k: the number of items ``serving_default`` returns.

    Example:

    >>> from tfseqrec.models import SASRec
    >>> from tfseqrec.data import ItemVocabulary
    >>> vocabulary = ItemVocabulary(["a", "b", "c", "d"], [4, 3, 2, 1])
    >>> import tempfile
    >>> path = vocabulary.save(tempfile.mkdtemp())
    >>> module = Recommender(SASRec(num_items=4, max_sequence_length=5, hidden_dim=8), vocabulary, path, k=2)
    >>> out = module.serving_default(tf.constant([["a", "x", ""]]))
    >>> items = [i.decode() for i in out["item_ids"][0].numpy()]
    >>> len(items), "a" in items  # "a" was seen; "x" is unknown and ignored
    (2, False)
    """

    def __init__(self, model, vocabulary, vocabulary_path, k=10):
        super().__init__(name="tfseqrec_recommender")
        if model.num_items != vocabulary.num_items:
            raise ValueError(
                f"the model scores {model.num_items} items but the vocabulary holds {vocabulary.num_items}"
            )
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        # The Keras model is not a tracked child: its variables are saved through
        # `self.model_variables` below, the tf.Variables the signatures read (what
        # keras.export.ExportArchive does; ExportArchive itself cannot carry the
        # tf.lookup tables and the popularity prior this module adds).
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "vocabulary", vocabulary)  # for warm-up requests; not saved
        self.k = min(int(k), vocabulary.num_items)
        self.max_sequence_length = int(model.max_sequence_length)
        self.integer_ids = all(_integer_id(item) for item in vocabulary.items)
        self.to_id = vocabulary.lookup_table(vocabulary_path)
        self.to_raw = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                vocabulary_path,
                key_dtype=tf.int64,
                key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
                value_dtype=tf.string,
                value_index=0,
                delimiter="\t",
            ),
            default_value="",
        )
        self.popularity = tf.Variable(vocabulary.popularity(), trainable=False, name="popularity")
        # Models that score by a query vector and an output table are served a block of
        # the catalogue at a time (memory bounded by block_ranking.BLOCK_ENTRIES, whatever the batch).
        object.__setattr__(self, "by_blocks", isinstance(model, SequentialRecommender))

    # --- the computation every signature shares --------------------------------------

    def window(self, ids, times=None):
        """``(window, history, empty)`` for vocabulary ids ``[batch, None]``.

        ``history`` holds each row's known ids (unknown ids and padding moved left as
        0); ``window``, the model's input, its newest ``max_sequence_length`` of them;
        ``empty`` marks a row with no known item (scored by popularity). ``times``:
        int64 seconds shaped as ``ids`` (one per slot), for a model that reads them;
        they move with their items (0 where padded) and reach the model as
        ``{"item_ids", "timestamps"}``.
        """
        ids = tf.cast(ids, tf.int64)
        # One padding column in front: an empty request still gives a [batch, 1] window.
        ids = tf.pad(ids, [[0, 0], [1, 0]])
        known = ids >= vocab_lib.NUM_RESERVED
        # A stable sort moves unknown ids and padding left, keeping the history's order.
        order = tf.argsort(tf.cast(known, tf.int32), axis=1, stable=True)
        packed_known = tf.gather(known, order, batch_dims=1)
        packed = tf.where(packed_known, tf.gather(ids, order, batch_dims=1), 0)
        count = tf.reduce_sum(tf.cast(known, tf.int32), axis=1)
        width = tf.clip_by_value(_max_or_zero(count), 1, self.max_sequence_length)
        start = tf.shape(packed)[1] - width
        window = packed[:, start:]
        if times is not None:
            # Inputs beside the ids (times, or a dict of them: ContextRecommender's) move with them.
            side = times if isinstance(times, dict) else {"timestamps": times}
            window = {"item_ids": window}
            for name, value in side.items():
                value = tf.pad(tf.cast(value, tf.int64), [[0, 0], [1, 0]])
                packed_value = tf.where(packed_known, tf.gather(value, order, batch_dims=1), 0)
                window[name] = packed_value[:, start:]
        return window, packed, count == 0

    def scores(self, ids, times=None):
        """``(scores [batch, num_items], history)`` for vocabulary ids ``[batch, None]`` (see ``window``)."""
        window, history, empty = self.window(ids, times)
        scores = tf.cast(self.model.score(window), tf.float32)
        return tf.where(empty[:, None], self.popularity[None, :], scores), history

    def blocks(self, ids, times=None):
        """The scores of ``scores``, a block of columns at a time (a model that scores by
        ``query`` and ``output_table``): ``(block_scores, target_scores, history, width)``
        for ``block_ranking.top_k_in_blocks`` and ``rank_targets_in_blocks``, ``width``
        columns a block (``block_ranking.block_width``)."""
        window, history, empty = self.window(ids, times)
        table, bias = self.model.output_table()
        block_scores, target_scores = block_ranking.query_blocks(self.model.query(window), table, bias)

        def prior_blocks(start, stop):
            return tf.where(empty[:, None], self.popularity[None, start:stop], block_scores(start, stop))

        def prior_targets(columns):
            return tf.where(empty, tf.gather(self.popularity, columns), target_scores(columns))

        return prior_blocks, prior_targets, history, block_ranking.block_width(tf.shape(history)[0])

    def top_k(self, ids, k, times=None):
        """Top-``k`` ``(scores, columns)`` of vocabulary ids ``[batch, None]``; the history is excluded."""
        if not self.by_blocks:
            scores, history = self.scores(ids, times)
            return ranking.top_k(scores, k, exclude=history)
        block_scores, _, history, width = self.blocks(ids, times)
        return block_ranking.top_k_in_blocks(
            block_scores, self.model.num_items, tf.shape(history)[0], k, exclude=history, chunk_items=width
        )

    def rank(self, ids, targets, times=None):
        """``tfseqrec.ranking.rank_targets`` of target ids ``[batch]`` given histories ``[batch, None]``."""
        if not self.by_blocks:
            scores, history = self.scores(ids, times)
            return ranking.rank_targets(scores, targets, history)
        block_scores, target_scores, history, width = self.blocks(ids, times)
        return block_ranking.rank_targets_in_blocks(
            block_scores, target_scores, self.model.num_items, targets, history, chunk_items=width
        )

    def _recommend_raw(self, history, k, times=None):
        ids = self.to_id.lookup(_batch_of_rows(history))
        scores, columns = self.top_k(ids, k, times)
        # A padding slot (ranking.PAD_COLUMN, no item left) looks up to the table's default: "".
        return {"item_ids": self.to_raw.lookup(tf.cast(columns, tf.int64)), "scores": scores}

    def _recommend_ints(self, history, times=None):
        ids = self.to_id.lookup(tf.strings.as_string(_batch_of_rows(history)))
        scores, columns = self.top_k(ids, self.k, times)
        # Every raw id is an integer (checked at export); a padding slot is PAD_INT_ID.
        raw = tf.strings.to_number(self.to_raw.lookup(tf.cast(tf.maximum(columns, 0), tf.int64)), tf.int64)
        padding = tf.equal(columns, ranking.PAD_COLUMN)
        return {"item_ids": tf.where(padding, tf.constant(PAD_INT_ID, tf.int64), raw), "scores": scores}

    def _rank_raw(self, history, target, times=None):
        target_ids = self.to_id.lookup(tf.ensure_shape(target, [None]))
        return {
            "rank": self.rank(self.to_id.lookup(_batch_of_rows(history)), target_ids, times),
            "known": ranking.known_targets(target_ids, self.model.num_items),
        }

    # --- signatures ------------------------------------------------------------------

    @signature(tf.TensorSpec([None, None], tf.string, name="history"))
    def serving_default(self, history):
        return self._recommend_raw(history, self.k)

    @signature(
        tf.TensorSpec([None, None], tf.string, name="history"),
        tf.TensorSpec([None], tf.int32, name="k"),
    )
    def recommend_top_k(self, history, k):
        return self._recommend_raw(history, _max_or_zero(k))

    @signature(tf.TensorSpec([None, None], tf.int64, name="history"))
    def recommend_ids(self, history):
        return self._recommend_ints(history)

    @signature(tf.TensorSpec([None], tf.string, name="examples"))
    def predict_examples(self, examples):
        features = tf.io.parse_example(
            examples, {key: tfrecord.FEATURE_SPEC[key] for key in ("user_id", "items")}
        )
        out = self._recommend_raw(features["items"].to_tensor(default_value=""), self.k)
        return {"user_id": features["user_id"][:, None], **out}

    @signature(
        tf.TensorSpec([None, None], tf.string, name="history"),
        tf.TensorSpec([None], tf.string, name="target"),
    )
    def rank_targets(self, history, target):
        return self._rank_raw(history, target)

    def signature_names(self):
        """The signatures this export has (``recommend_ids`` only over integer raw ids)."""
        return [name for name in SIGNATURES if name != "recommend_ids" or self.integer_ids]

    def signatures(self):
        """The concrete functions to save, by signature name: each method traced once, here."""
        functions = {}
        for name in self.signature_names():
            method = getattr(self, name)
            functions[name] = tf.function(
                method, input_signature=method.input_signature
            ).get_concrete_function()
        return self._collect(functions)

    def _collect(self, functions):
        # The variables the signatures read, saved as this module's own.
        tracked = {id(v) for v in (self.popularity,)}
        variables = []
        for fn in functions.values():
            for v in fn.variables:
                if id(v) not in tracked:
                    tracked.add(id(v))
                    variables.append(v)
        self.model_variables = variables
        return functions

    # --- warm-up: each signature's request on raw-id histories -------------------------

    def warmup_request(self, name, histories, model_name):
        """The ``PredictRequest`` that warms signature ``name`` up, on lists of raw ids."""
        return getattr(self, f"_warmup_{name}")(histories, model_name)

    def _warmup_serving_default(self, histories, model_name):
        return serving.predict_request(histories, model_name, signature_name="serving_default")

    def _warmup_recommend_top_k(self, histories, model_name):
        return serving.predict_request(
            histories, model_name, signature_name="recommend_top_k", k=[10] * len(histories)
        )

    def _warmup_recommend_ids(self, histories, model_name):
        return serving.predict_request(
            [[int(i) for i in h] for h in histories], model_name, signature_name="recommend_ids"
        )

    def _warmup_predict_examples(self, histories, model_name):
        examples = [
            tfrecord.make_example(f"warmup-{i}", self.vocabulary.lookup(h), h).SerializeToString()
            for i, h in enumerate(histories)
        ]
        return serving.examples_request(examples, model_name, signature_name="predict_examples")

    def _warmup_rank_targets(self, histories, model_name):
        targets = [h[-1] if h else self.vocabulary.items[0] for h in histories]
        return serving.predict_request(histories, model_name, signature_name="rank_targets", targets=targets)


class TimedRecommender(Recommender):
    """A ``Recommender`` for a model that reads event times (``model.uses_timestamps``).

    Every history signature takes one more input, ``timestamps``: int64
    ``[batch, None]``, the time in seconds of each history slot (the same shape as
    ``history``; padding slots' values are ignored). The times go with their items
    where unknown ids and padding are dropped, and reach the model as
    ``{"item_ids", "timestamps"}``. A ``timestamps`` shaped unlike ``history`` fails
    the request (``InvalidArgumentError``). ``predict_examples`` reads the records'
    ``timestamps`` feature (one per item). Signature names and outputs are
    ``Recommender``'s.

    Args:
        model, vocabulary, vocabulary_path, k: as ``Recommender``; ``model`` an HSTU
            with a time bias (``num_time_buckets > 0``).

    Example:

    >>> from tfseqrec.models import HSTU
    >>> from tfseqrec.data import ItemVocabulary
    >>> vocabulary = ItemVocabulary(["a", "b", "c", "d"], [4, 3, 2, 1])
    >>> import tempfile
    >>> path = vocabulary.save(tempfile.mkdtemp())
    >>> model = HSTU(num_items=4, max_sequence_length=5, hidden_dim=8, num_heads=1, num_time_buckets=8)
    >>> module = TimedRecommender(model, vocabulary, path, k=2)
    >>> out = module.serving_default(tf.constant([["a", "x", ""]]), tf.constant([[100, 200, 0]], tf.int64))
    >>> items = [i.decode() for i in out["item_ids"][0].numpy()]
    >>> len(items), "a" in items
    (2, False)
    """

    def __init__(self, model, vocabulary, vocabulary_path, k=10):
        if not model.uses_timestamps:
            raise ValueError(f"{type(model).__name__} does not read timestamps: export it with Recommender")
        super().__init__(model, vocabulary, vocabulary_path, k=k)

    @staticmethod
    def _checked_times(history, timestamps):
        """``timestamps``, once it is shaped as ``history`` (else the request fails, saying so)."""
        check = tf.debugging.assert_equal(
            tf.shape(timestamps),
            tf.shape(history),
            message="timestamps must have the shape of history: one time (seconds) per history slot",
        )
        with tf.control_dependencies([check]):
            return tf.identity(_batch_of_rows(timestamps))

    @signature(
        tf.TensorSpec([None, None], tf.string, name="history"),
        tf.TensorSpec([None, None], tf.int64, name="timestamps"),
    )
    def serving_default(self, history, timestamps):
        return self._recommend_raw(history, self.k, self._checked_times(history, timestamps))

    @signature(
        tf.TensorSpec([None, None], tf.string, name="history"),
        tf.TensorSpec([None, None], tf.int64, name="timestamps"),
        tf.TensorSpec([None], tf.int32, name="k"),
    )
    def recommend_top_k(self, history, timestamps, k):
        return self._recommend_raw(history, _max_or_zero(k), self._checked_times(history, timestamps))

    @signature(
        tf.TensorSpec([None, None], tf.int64, name="history"),
        tf.TensorSpec([None, None], tf.int64, name="timestamps"),
    )
    def recommend_ids(self, history, timestamps):
        return self._recommend_ints(history, self._checked_times(history, timestamps))

    @signature(tf.TensorSpec([None], tf.string, name="examples"))
    def predict_examples(self, examples):
        spec = {key: tfrecord.FEATURE_SPEC[key] for key in ("user_id", "items", "timestamps")}
        features = tf.io.parse_example(examples, spec)
        items, times = features["items"], features["timestamps"]
        check = tf.debugging.assert_equal(
            times.row_lengths(),
            items.row_lengths(),
            message="predict_examples: each record needs a 'timestamps' feature with one time per item",
        )
        with tf.control_dependencies([check]):
            history = items.to_tensor(default_value="")
        times = times.to_tensor(default_value=0, shape=tf.shape(history, out_type=tf.int64))
        return {"user_id": features["user_id"][:, None], **self._recommend_raw(history, self.k, times)}

    @signature(
        tf.TensorSpec([None, None], tf.string, name="history"),
        tf.TensorSpec([None, None], tf.int64, name="timestamps"),
        tf.TensorSpec([None], tf.string, name="target"),
    )
    def rank_targets(self, history, timestamps, target):
        return self._rank_raw(history, target, self._checked_times(history, timestamps))

    # --- warm-up: the same requests, with times a day apart ----------------------------

    def _warmup_serving_default(self, histories, model_name):
        return serving.predict_request(
            histories, model_name, signature_name="serving_default", timestamps=_warmup_times(histories)
        )

    def _warmup_recommend_top_k(self, histories, model_name):
        return serving.predict_request(
            histories,
            model_name,
            signature_name="recommend_top_k",
            k=[10] * len(histories),
            timestamps=_warmup_times(histories),
        )

    def _warmup_recommend_ids(self, histories, model_name):
        return serving.predict_request(
            [[int(i) for i in h] for h in histories],
            model_name,
            signature_name="recommend_ids",
            timestamps=_warmup_times(histories),
        )

    def _warmup_predict_examples(self, histories, model_name):
        times = _warmup_times(histories)
        examples = [
            tfrecord.make_example(f"warmup-{i}", self.vocabulary.lookup(h), h, timestamps=t)
            for i, (h, t) in enumerate(zip(histories, times))
        ]
        return serving.examples_request(examples, model_name, signature_name="predict_examples")

    def _warmup_rank_targets(self, histories, model_name):
        targets = [h[-1] if h else self.vocabulary.items[0] for h in histories]
        return serving.predict_request(
            histories,
            model_name,
            signature_name="rank_targets",
            targets=targets,
            timestamps=_warmup_times(histories),
        )


class ContextRecommender(Recommender):
    """A ``Recommender`` for a model that reads event context (``model.event_features``).

    Every history signature takes, after ``history``, ``timestamps`` when the model reads
    event times (as ``TimedRecommender``'s), then one string input ``event_<column>`` per
    column of the model's ``event_features``, in their order: each history slot's raw value
    (``""`` for none), shaped as ``history``; ``predict_examples`` reads them from the
    records' ``event_<column>`` features (``tfrecord.feature_spec``). A value the model was not trained with reads as
    unknown; the values go with their items where unknown ids and padding are dropped. An
    input shaped unlike ``history`` fails the request. Signature names and outputs are
    ``Recommender``'s.

    Args:
        model, vocabulary, vocabulary_path, k: as ``Recommender``; ``model`` built with
            ``event_features={column: [values]}``.

    Example:

    >>> from tfseqrec.models import SASRec
    >>> from tfseqrec.data import ItemVocabulary
    >>> vocabulary = ItemVocabulary(["a", "b", "c", "d"], [4, 3, 2, 1])
    >>> import tempfile
    >>> path = vocabulary.save(tempfile.mkdtemp())
    >>> model = SASRec(num_items=4, max_sequence_length=5, hidden_dim=8, event_features={"type": ["view", "buy"]})
    >>> module = ContextRecommender(model, vocabulary, path, k=2)
    >>> out = module.serving_default(tf.constant([["a", "b"]]), tf.constant([["view", "buy"]]))
    >>> sorted(i.decode() for i in out["item_ids"][0].numpy())
    ['c', 'd']
    """

    def __init__(self, model, vocabulary, vocabulary_path, k=10):
        context = events_lib.EventVocabulary.of_model(model)
        if context is None:
            raise ValueError(f"{type(model).__name__} reads no event context: export it with Recommender")
        super().__init__(model, vocabulary, vocabulary_path, k=k)
        object.__setattr__(self, "context", context)  # for warm-up requests; not saved
        self.columns = list(context.columns)
        self.timed = bool(model.uses_timestamps)
        self.slot_tables = {
            column: tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(["", *values]),
                    tf.constant(
                        [
                            features_lib.MISSING_SLOT,
                            *range(features_lib.FIRST_VALUE, features_lib.FIRST_VALUE + len(values)),
                        ],
                        tf.int64,
                    ),
                ),
                default_value=features_lib.UNKNOWN_SLOT,
            )
            for column, values in context.values.items()
        }

    def side_specs(self):
        """The inputs every history signature takes after ``history``."""
        specs = [tf.TensorSpec([None, None], tf.int64, name="timestamps")] if self.timed else []
        return specs + [
            tf.TensorSpec([None, None], tf.string, name=events_lib.input_name(c)) for c in self.columns
        ]

    def _side(self, history, side):
        """``{"timestamps"?, "event_<column>": slots}`` of the side inputs, each checked to be shaped as ``history``."""
        names = [spec.name for spec in self.side_specs()]
        if len(side) != len(names):
            raise ValueError(f"expected the inputs {names} after history, got {len(side)}")
        out = {}
        for name, value in zip(names, side):
            check = tf.debugging.assert_equal(
                tf.shape(value),
                tf.shape(history),
                message=f"{name} must have the shape of history: one value per history slot",
            )
            with tf.control_dependencies([check]):
                value = tf.identity(_batch_of_rows(value))
            if name != "timestamps":
                value = self.slot_tables[name[len(events_lib.PREFIX) :]].lookup(value)
            out[name] = value
        return out

    def serving_default(self, history, *side):
        return self._recommend_raw(history, self.k, self._side(history, side))

    def recommend_top_k(self, history, *rest):
        *side, k = rest
        return self._recommend_raw(history, _max_or_zero(k), self._side(history, side))

    def recommend_ids(self, history, *side):
        return self._recommend_ints(history, self._side(history, side))

    def rank_targets(self, history, *rest):
        *side, target = rest
        return self._rank_raw(history, target, self._side(history, side))

    def predict_examples(self, examples):
        """``Recommender.predict_examples`` over records that carry the events' context (``event_<column>``,
        one raw value per item, as the SequenceBuilder writes them) and, when the model reads them, times."""
        names = [spec.name for spec in self.side_specs()]
        spec = tfrecord.feature_spec(self.columns)
        features = tf.io.parse_example(examples, {key: spec[key] for key in ["user_id", "items", *names]})
        items = features["items"]
        checks = [
            tf.debugging.assert_equal(
                features[name].row_lengths(),
                items.row_lengths(),
                message=f"predict_examples: each record needs a '{name}' feature with one value per item",
            )
            for name in names
        ]
        with tf.control_dependencies(checks):
            history = items.to_tensor(default_value="")
        shape = tf.shape(history, out_type=tf.int64)
        side = [
            features[n].to_tensor(default_value=0 if n == "timestamps" else "", shape=shape) for n in names
        ]
        return {
            "user_id": features["user_id"][:, None],
            **self._recommend_raw(history, self.k, self._side(history, side)),
        }

    def signatures(self):
        history = tf.TensorSpec([None, None], tf.string, name="history")
        specs = {
            "predict_examples": [tf.TensorSpec([None], tf.string, name="examples")],
            "serving_default": [history, *self.side_specs()],
            "recommend_top_k": [history, *self.side_specs(), tf.TensorSpec([None], tf.int32, name="k")],
            "recommend_ids": [tf.TensorSpec([None, None], tf.int64, name="history"), *self.side_specs()],
            "rank_targets": [history, *self.side_specs(), tf.TensorSpec([None], tf.string, name="target")],
        }
        functions = {
            name: tf.function(getattr(self, name), input_signature=specs[name]).get_concrete_function()
            for name in self.signature_names()
        }
        return self._collect(functions)

    def warmup_request(self, name, histories, model_name):
        """The ``PredictRequest`` that warms signature ``name`` up: each slot's context the
        column's most frequent value."""
        if name == "predict_examples":
            times = _warmup_times(histories) if self.timed else [None] * len(histories)
            examples = [
                tfrecord.make_example(
                    f"warmup-{i}",
                    self.vocabulary.lookup(h),
                    h,
                    timestamps=t,
                    events={c: [values[0]] * len(h) for c, values in self.context.values.items()},
                ).SerializeToString()
                for i, (h, t) in enumerate(zip(histories, times))
            ]
            return serving.examples_request(examples, model_name, signature_name="predict_examples")
        options = {
            "serving_default": {},
            "recommend_top_k": {"k": [10] * len(histories)},
            "recommend_ids": {},
            "rank_targets": {"targets": [h[-1] if h else self.vocabulary.items[0] for h in histories]},
        }[name]
        if name == "recommend_ids":
            histories = [[int(i) for i in h] for h in histories]
        return serving.predict_request(
            histories,
            model_name,
            signature_name=name,
            timestamps=_warmup_times(histories) if self.timed else None,
            events={
                c: [[values[0]] * len(h) for h in histories] for c, values in self.context.values.items()
            },
            **options,
        )


def _warmup_times(histories, start=1_000_000_000, step=86_400):
    """Increasing times (seconds, a day apart) for the items of each warm-up history."""
    return [[start + step * i for i in range(len(h))] for h in histories]


class TextRecommender(Recommender):
    """A Recformer export: the id signatures of ``Recommender`` plus text in, vectors out.

    The item text table lives in the graph (tokenized), so ``serving_default`` takes
    raw item ids like an id model's export. Two more signatures read text, tokenized
    in the graph by tensorflow-text's ``BertTokenizer`` (ops the ``tensorflow/serving``
    model server links):

    ==================  =============================================  ==================================
    signature           inputs                                         outputs
    ==================  =============================================  ==================================
    ``recommend_texts`` ``history_text`` string ``[batch, items,``     ``item_ids`` string ``[batch, k]``,
                        ``attributes]``, oldest item first; an item    ``scores`` float32
                        whose attributes are all ``""`` is padding
    ``encode_items``    ``item_text`` string ``[n, attributes]``       ``embeddings`` float32
                                                                       ``[n, hidden_dim]``
    ==================  =============================================  ==================================

    Attributes are in the order of ``attributes`` (saved with the model; Amazon:
    title, brand, categories); missing trailing columns read as ``""``. New items
    join the served index by ``tfseqrec.training.recformer.add_items`` and a new
    export version, without retraining the encoder.

    Args:
        recommender: a ``RecformerRecommender``.
        vocabulary, vocabulary_path, k: as ``Recommender``.
        tokenizer: the ``ItemTextTokenizer`` the item table was made with.
    """

    def __init__(self, recommender, vocabulary, vocabulary_path, tokenizer, k=10):
        super().__init__(recommender, vocabulary, vocabulary_path, k=k)
        object.__setattr__(self, "text_tokenizer", tokenizer)
        # The tf-text tokenizer (a tf.Module) and its WordPiece table go into the SavedModel.
        self.wordpiece = tokenizer.tokenizer
        self.num_attributes = len(tokenizer.attributes)

    def _item_inputs(self, text, max_tokens):
        """Packed inputs of text ``[batch, items, attributes]``; empty items dropped."""
        text = _fit_attributes(text, self.num_attributes)
        shape = tf.shape(text, out_type=tf.int64)
        flat = tf.reshape(text, [-1, self.num_attributes])
        tokens, types = self.text_tokenizer.tokenize(flat)
        present = tokens.row_lengths() > 0
        nested = [
            tf.ragged.boolean_mask(
                tf.RaggedTensor.from_uniform_row_length(part, shape[1]),
                tf.RaggedTensor.from_uniform_row_length(present, shape[1]),
            )
            for part in (tokens, types)
        ]
        packed = pack_inputs(self.model.model.backbone, nested[0], nested[1], self.model.cls_id, max_tokens)
        return packed, nested[0]

    @signature(tf.TensorSpec([None, None, None], tf.string, name="history_text"))
    def recommend_texts(self, history_text):
        model = self.model.model
        inputs, items = self._item_inputs(history_text, model.max_tokens)
        scores = tf.cast(model.scores(model(inputs, training=False)), tf.float32)
        empty = items.row_lengths() == 0
        scores = tf.where(empty[:, None], self.popularity[None, :], scores)
        top = ranking.top_k(scores, self.k)
        return {"item_ids": self.to_raw.lookup(tf.cast(top.indices, tf.int64)), "scores": top.values}

    @signature(tf.TensorSpec([None, None], tf.string, name="item_text"))
    def encode_items(self, item_text):
        model = self.model.model
        inputs, _ = self._item_inputs(item_text[:, None, :], model.max_tokens)
        return {"embeddings": tf.cast(model(inputs, training=False), tf.float32)}

    def signature_names(self):
        return super().signature_names() + list(TEXT_SIGNATURES)

    def _texts(self, histories):
        return [[list(self.model.item_text[i]) for i in self.vocabulary.lookup(h)] for h in histories]

    def _warmup_recommend_texts(self, histories, model_name):
        return serving.text_request(
            self._texts(histories), model_name, self.num_attributes, signature_name="recommend_texts"
        )

    def _warmup_encode_items(self, histories, model_name):
        items = [item for h in self._texts(histories) for item in h][:8] or [[""]]
        return serving.text_request(items, model_name, self.num_attributes, signature_name="encode_items")


class UniSRecTextRecommender(Recommender):
    """A UniSRec export: the id signatures of ``Recommender`` plus the text signatures.

    ``recommend_texts`` and ``encode_items`` take the same inputs as a Recformer
    export's (see ``TextRecommender``). Item text becomes a vector by the frozen
    sentence encoder the model was trained over (inside the SavedModel, tokenizer
    included), then the model's adaptor: an item is known by its text alone, so
    these paths use no id embedding (of a model trained with them, the id
    signatures are the more accurate for known items).

    Args:
        model: a ``UniSRec``.
        vocabulary, vocabulary_path, k: as ``Recommender``.
        encoder: the ``SentenceEncoder`` of ``model.text_encoder``.
    """

    def __init__(self, model, vocabulary, vocabulary_path, encoder, k=10):
        super().__init__(model, vocabulary, vocabulary_path, k=k)
        self.encoder = encoder
        self.num_attributes = len(encoder.attributes)

    def _history_vectors(self, history_text):
        """``(vectors [batch, length, text_dim], present [batch, length])``, newest last, padding left."""
        text = _fit_attributes(history_text, self.num_attributes)
        shape = tf.shape(text)
        flat = tf.reshape(text, [-1, self.num_attributes])
        present = tf.reduce_any(tf.not_equal(flat, ""), axis=1)
        where = tf.where(present)
        encoded = self.encoder.encode_text(tf.gather_nd(flat, where))  # padding items are not encoded
        vectors = tf.scatter_nd(where, encoded, [tf.shape(flat)[0], self.encoder.dim])
        vectors = tf.reshape(vectors, [shape[0], shape[1], self.encoder.dim])
        present = tf.reshape(present, shape[:2])
        # A stable sort moves padding items left, keeping the history's order.
        order = tf.argsort(tf.cast(present, tf.int32), axis=1, stable=True)
        vectors, present = tf.gather(vectors, order, batch_dims=1), tf.gather(present, order, batch_dims=1)
        width = tf.minimum(shape[1], self.max_sequence_length)
        return vectors[:, shape[1] - width :], present[:, shape[1] - width :]

    @signature(tf.TensorSpec([None, None, None], tf.string, name="history_text"))
    def recommend_texts(self, history_text):
        vectors, present = self._history_vectors(history_text)
        empty = tf.logical_not(tf.reduce_any(present, axis=1))
        if tf.shape(vectors)[1] > 0:
            scores = tf.cast(self.model.backbone.score_text_vectors(vectors, present), tf.float32)
        else:  # no item at all: every row is scored by popularity
            scores = tf.zeros([tf.shape(vectors)[0], self.model.num_items])
        scores = tf.where(empty[:, None], self.popularity[None, :], scores)
        top = ranking.top_k(scores, self.k)
        return {"item_ids": self.to_raw.lookup(tf.cast(top.indices, tf.int64)), "scores": top.values}

    @signature(tf.TensorSpec([None, None], tf.string, name="item_text"))
    def encode_items(self, item_text):
        vectors = self.encoder.encode_text(_fit_attributes(item_text[:, None, :], self.num_attributes)[:, 0])
        return {"embeddings": tf.cast(self.model.backbone.text_item_vectors(vectors), tf.float32)}

    def signature_names(self):
        return super().signature_names() + list(TEXT_SIGNATURES)

    def _texts(self, histories):
        table = self.model.backbone.item_text
        if table is None:  # the model came without its text: the raw ids stand in for titles
            return [[[raw] for raw in h] for h in histories]
        return [[list(table[i]) for i in self.vocabulary.lookup(h)] for h in histories]

    _warmup_recommend_texts = TextRecommender._warmup_recommend_texts
    _warmup_encode_items = TextRecommender._warmup_encode_items


def _fit_attributes(text, num_attributes):
    """String ``[batch, items, attributes]`` with exactly ``num_attributes`` columns (``""`` added)."""
    text = tf.pad(text, [[0, 0], [0, 0], [0, tf.maximum(num_attributes - tf.shape(text)[2], 0)]])
    return text[:, :, :num_attributes]


def _batch_of_rows(tensor):
    """``tensor``, once it is ``[batch, None]`` (one row per user; a single user is ``[[...]]``).

    Else the request fails naming the input and the shape expected ("Shape of tensor
    history [2] is not compatible with expected shape [?,?]"), not at an op inside.
    EnsureShape, not an assert on the rank: the graph knows the signature's rank, so
    an assert would be folded away and never run.
    """
    return tf.ensure_shape(tensor, [None, None])


def _max_or_zero(values):
    """``reduce_max`` that gives 0 for an empty batch."""
    return tf.reduce_max(tf.concat([values, tf.zeros([1], values.dtype)], axis=0))
