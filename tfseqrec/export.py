"""SavedModels for TensorFlow Serving: raw item ids in, top-k raw item ids out.

``export_version`` writes ``BASE/NAME/VERSION/``, the layout a TF Serving model base
path expects (``tensorflow_model_server --model_base_path=BASE/NAME`` serves the
newest version):

    saved_model.pb, variables/    the model and five signatures (below)
    assets/item_vocab.tsv          the vocabulary: raw id -> id lookups in the graph
    assets.extra/tf_serving_warmup_requests
                                   ``PredictionLog`` records the server replays before
                                   it answers its first request

Signatures, all of method ``tensorflow/serving/predict``; histories are oldest first:

    ==================  ===========================================  =========================================
    signature           inputs                                       outputs
    ==================  ===========================================  =========================================
    ``serving_default`` ``history`` string ``[batch, None]``         ``item_ids`` string ``[batch, k]``,
                        padded with ``""``                           ``scores`` float32 ``[batch, k]``
    ``recommend_ids``   ``history`` int64 ``[batch, None]``,         ``item_ids`` int64, ``scores``
                        padded with ``-1`` (only when every raw id
                        of the vocabulary is an integer in
                        [0, 2**63) without leading zeros)
    ``recommend_top_k`` ``history`` as ``serving_default``;          as ``serving_default``, ``[batch, K]``
                        ``k`` int32 ``[batch]`` (``K`` = the
                        batch's largest ``k``): another ``k``
                        without re-exporting
    ``predict_examples````examples`` string ``[batch]``: serialized  ``user_id`` string ``[batch]``,
                        ``tf.Example`` in ``tfrecord.FEATURE_SPEC``  ``item_ids``, ``scores``
                        (reads ``items``), for TFX BulkInferrer
    ``rank_targets``    ``history`` as ``serving_default``;          ``rank`` int32 ``[batch]``: 0-based rank
                        ``target`` string ``[batch]``: a known       of the target among all items;
                        next item (evaluation)                       ``known`` bool ``[batch]``: the target
                                                                     is in the vocabulary
    ==================  ===========================================  =========================================

Every signature handles any well-typed request: unknown ids and padding are dropped
(wherever they are), items of the whole history are never recommended, the model
reads the newest ``max_sequence_length`` known items, and a history with no known
item gets the most popular items (scored by their share of training interactions).
``k`` is capped at the number of items; when fewer unseen items remain than ``k``,
the last slots score ``-inf``.

Exclusion, top-k and ranks are ``tfseqrec.ranking``'s. ``rank_targets`` is for
evaluators that know the target (the TFX ``RankingEvaluator``): it ranks the target
with the rest of the history excluded but the target itself kept as a candidate
even when the user saw it before, which a top-k that excludes the whole history
cannot tell. Ties count against the target, a non-finite target score ranks it last
(``num_items - 1``) and a target the vocabulary lacks gets ``num_items`` (a miss),
as in ``tfseqrec.evaluation``.
"""

import os
import re
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from tfseqrec import ranking
from tfseqrec.data import vocab as vocab_lib

WARMUP_FILE = "tf_serving_warmup_requests"
SIGNATURES = ("serving_default", "recommend_ids", "recommend_top_k", "predict_examples", "rank_targets")
TEXT_SIGNATURES = ("recommend_texts", "encode_items")
# Raw ids a recommend_ids export can carry as int64: non-negative, canonical (no
# leading zeros: "007" would come back as 7) and below 2**63. Negative ids are padding.
_INTEGER = re.compile(r"(0|[1-9][0-9]{0,18})\Z")


def _integer_id(raw):
    return bool(_INTEGER.match(raw)) and int(raw) < 2**63


class Recommender(tf.Module):
    """A scoring model and its vocabulary as a TF Serving module.

    The model needs ``score(window) -> [batch, num_items]`` over vocabulary ids (id
    ``j + NUM_RESERVED`` is column ``j``), ``num_items`` and ``max_sequence_length``:
    ``tfseqrec.models.SASRec`` and ``BERT4Rec``.

    Args:
        model: the trained model.
        vocabulary: its ``ItemVocabulary``.
        vocabulary_path: where ``vocabulary`` is saved (becomes the SavedModel asset).
        k: the number of items ``serving_default`` returns.

    Example:

    >>> from tfseqrec.models import SASRec
    >>> from tfseqrec.data import ItemVocabulary
    >>> vocabulary = ItemVocabulary(["a", "b", "c", "d"], [4, 3, 2, 1])
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
        counts = vocabulary.counts.astype(np.float64)
        self.popularity = tf.Variable(
            (counts / max(counts.sum(), 1.0)).astype(np.float32), trainable=False, name="popularity"
        )

    # --- the computation every signature shares --------------------------------------

    def scores(self, ids):
        """``(scores [batch, num_items], history)`` for vocabulary ids ``[batch, None]``.

        ``history`` holds each row's known ids (unknown ids and padding moved left as
        0); the model reads its newest ``max_sequence_length`` items, and a row with
        no known item is scored by popularity.
        """
        ids = tf.cast(ids, tf.int64)
        # One padding column in front: an empty request still gives a [batch, 1] window.
        ids = tf.pad(ids, [[0, 0], [1, 0]])
        known = ids >= vocab_lib.NUM_RESERVED
        # A stable sort moves unknown ids and padding left, keeping the history's order.
        order = tf.argsort(tf.cast(known, tf.int32), axis=1, stable=True)
        packed = tf.where(tf.gather(known, order, batch_dims=1), tf.gather(ids, order, batch_dims=1), 0)
        count = tf.reduce_sum(tf.cast(known, tf.int32), axis=1)
        width = tf.clip_by_value(_max_or_zero(count), 1, self.max_sequence_length)
        window = packed[:, tf.shape(packed)[1] - width :]
        scores = tf.cast(self.model.score(window), tf.float32)
        return tf.where((count == 0)[:, None], self.popularity[None, :], scores), packed

    def top_k(self, ids, k):
        """Top-``k`` ``(scores, columns)`` of vocabulary ids ``[batch, None]``; the history is excluded."""
        scores, history = self.scores(ids)
        return ranking.top_k(scores, k, exclude=history)

    def rank(self, ids, targets):
        """``tfseqrec.ranking.rank_targets`` of target ids ``[batch]`` given histories ``[batch, None]``."""
        scores, history = self.scores(ids)
        return ranking.rank_targets(scores, targets, history)

    def _recommend_raw(self, history, k):
        ids = self.to_id.lookup(history)
        scores, columns = self.top_k(ids, k)
        return {"item_ids": self.to_raw.lookup(tf.cast(columns, tf.int64)), "scores": scores}

    # --- signatures ------------------------------------------------------------------

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="history")])
    def serving_default(self, history):
        return self._recommend_raw(history, self.k)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.string, name="history"),
            tf.TensorSpec([None], tf.int32, name="k"),
        ]
    )
    def recommend_top_k(self, history, k):
        return self._recommend_raw(history, _max_or_zero(k))

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64, name="history")])
    def recommend_ids(self, history):
        out = self._recommend_raw(tf.strings.as_string(history), self.k)
        # Every raw id is an integer (checked at export); "" marks a slot past the
        # catalogue's end, which top_k never returns.
        return {"item_ids": tf.strings.to_number(out["item_ids"], tf.int64), "scores": out["scores"]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def predict_examples(self, examples):
        features = tf.io.parse_example(
            examples,
            {
                "user_id": tf.io.FixedLenFeature([], tf.string, default_value=""),
                "items": tf.io.RaggedFeature(tf.string),
            },
        )
        out = self._recommend_raw(features["items"].to_tensor(default_value=""), self.k)
        return {"user_id": features["user_id"], **out}

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.string, name="history"),
            tf.TensorSpec([None], tf.string, name="target"),
        ]
    )
    def rank_targets(self, history, target):
        target_ids = self.to_id.lookup(target)
        return {
            "rank": self.rank(self.to_id.lookup(history), target_ids),
            "known": ranking.known_targets(target_ids, self.model.num_items),
        }

    def signatures(self):
        """The concrete functions to save, by signature name."""
        names = [name for name in SIGNATURES if name != "recommend_ids" or self.integer_ids]
        return self._collect({name: getattr(self, name).get_concrete_function() for name in names})

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
    join the served index by ``tfseqrec.recformer_training.add_items`` and a new
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

    def _item_inputs(self, text, max_items, max_tokens):
        """Packed inputs of text ``[batch, items, attributes]``; empty items dropped."""
        from tfseqrec.data import text as text_lib

        text = tf.pad(text, [[0, 0], [0, 0], [0, tf.maximum(self.num_attributes - tf.shape(text)[2], 0)]])
        text = text[:, :, : self.num_attributes]
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
        return text_lib.pack_histories(nested[0], nested[1], self.model.cls_id, max_items, max_tokens), nested[0]

    @tf.function(input_signature=[tf.TensorSpec([None, None, None], tf.string, name="history_text")])
    def recommend_texts(self, history_text):
        model = self.model.model
        inputs, items = self._item_inputs(history_text, model.max_items, model.max_sequence_length)
        scores = tf.cast(model.scores(model(inputs, training=False)), tf.float32)
        empty = items.row_lengths() == 0
        scores = tf.where(empty[:, None], self.popularity[None, :], scores)
        top = ranking.top_k(scores, self.k)
        return {"item_ids": self.to_raw.lookup(tf.cast(top.indices, tf.int64)), "scores": top.values}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="item_text")])
    def encode_items(self, item_text):
        model = self.model.model
        inputs, _ = self._item_inputs(item_text[:, None, :], 1, model.max_sequence_length)
        return {"embeddings": tf.cast(model(inputs, training=False), tf.float32)}

    def signatures(self):
        names = [name for name in SIGNATURES if name != "recommend_ids" or self.integer_ids]
        names += list(TEXT_SIGNATURES)
        return self._collect({name: getattr(self, name).get_concrete_function() for name in names})


def _max_or_zero(values):
    """``reduce_max`` that gives 0 for an empty batch."""
    return tf.reduce_max(tf.concat([values, tf.zeros([1], values.dtype)], axis=0))


def save(model, vocabulary, export_dir, k=10, warmup=True):
    """Writes ``model`` as a SavedModel at ``export_dir`` (which must not exist).

    Args:
        model: a trained ``SASRec`` / ``BERT4Rec``, or a ``RecformerRecommender``
            (exported as a ``TextRecommender``).
        vocabulary: its ``ItemVocabulary``.
        export_dir: the version directory to create (or an empty one), e.g.
            ``saved_models/ml1m/1``.
        k: items per ``serving_default`` answer.
        warmup: write ``assets.extra/tf_serving_warmup_requests``.

    Returns:
        The names of the signatures written.
    """
    export_dir = os.fspath(export_dir)
    if os.path.exists(export_dir) and os.listdir(export_dir):
        raise FileExistsError(f"{export_dir} exists already; exports never overwrite a version")
    with tempfile.TemporaryDirectory() as tmp:
        vocabulary_path = vocabulary.save(os.path.join(tmp, vocab_lib.VOCAB_FILENAME))
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is not None:  # a RecformerRecommender
            module = TextRecommender(model, vocabulary, vocabulary_path, tokenizer, k=k)
        else:
            module = Recommender(model, vocabulary, vocabulary_path, k=k)
        signatures = module.signatures()
        tf.saved_model.save(module, export_dir, signatures=signatures)
    if warmup:
        write_warmup_requests(export_dir, vocabulary, model.max_sequence_length, list(signatures),
                              item_text=getattr(model, "item_text", None))
    return list(signatures)


def export_version(model, vocabulary, base_path, version=None, k=10, warmup=True):
    """Writes the next version (or ``version``) under a TF Serving base path.

    The SavedModel is written to a hidden directory and renamed into place, so a
    server polling ``base_path`` never loads a half-written version.

    Returns:
        ``(path, version)``.
    """
    base_path = os.fspath(base_path)
    version = next_version(base_path) if version is None else int(version)
    if version < 1:
        raise ValueError(f"versions are positive integers, got {version}")
    path = os.path.join(base_path, str(version))
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists already; pick another --version or leave it out for the next one")
    os.makedirs(base_path, exist_ok=True)
    staging = os.path.join(base_path, f".{version}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        save(model, vocabulary, staging, k=k, warmup=warmup)
        os.rename(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path, version


def next_version(base_path):
    """One more than the largest numeric version directory under ``base_path`` (1 when none)."""
    if not os.path.isdir(base_path):
        return 1
    versions = [int(name) for name in os.listdir(base_path) if name.isdigit()]
    return max(versions, default=0) + 1


def write_warmup_requests(export_dir, vocabulary, max_sequence_length, signatures, model_name="tfseqrec",
                          item_text=None):
    """Writes ``assets.extra/tf_serving_warmup_requests``: ``PredictionLog`` records.

    One request of batch 1 and one of batch 4 (histories empty, of one item, of half
    the window and longer than the window) per signature, built from the most popular
    items with the client helpers of ``tfseqrec.serving``. ``item_text`` (string
    ``[vocabulary.size, attributes]``, a Recformer's) gives the text signatures the
    same histories as text.
    """
    from tensorflow_serving.apis import prediction_log_pb2

    from tfseqrec import serving

    items = vocabulary.items
    popular = [items[i % len(items)] for i in range(max_sequence_length + 5)]
    batches = [[popular[:10]], [[], popular[:1], popular[: max(1, max_sequence_length // 2)], popular]]
    path = os.path.join(export_dir, "assets.extra", WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    count = 0
    with tf.io.TFRecordWriter(path) as writer:
        for histories in batches:
            for name in signatures:
                if name in TEXT_SIGNATURES:
                    as_text = [[list(item_text[i]) for i in vocabulary.lookup(h)] for h in histories]
                    if name == "encode_items":
                        as_text = [[item for h in as_text for item in h][:8] or [[""]]]
                    request = serving.text_request(as_text[0] if name == "encode_items" else as_text, model_name,
                                                   item_text.shape[1], signature_name=name)
                elif name == "predict_examples":
                    from tfseqrec.data import tfrecord

                    examples = [
                        tfrecord.make_example(f"warmup-{i}", vocabulary.lookup(h), h).SerializeToString()
                        for i, h in enumerate(histories)
                    ]
                    request = serving.examples_request(examples, model_name, signature_name=name)
                elif name == "rank_targets":
                    targets = [h[-1] if h else items[0] for h in histories]
                    request = serving.predict_request(histories, model_name, signature_name=name,
                                                      targets=targets)
                elif name == "recommend_ids":
                    request = serving.predict_request(
                        [[int(i) for i in h] for h in histories], model_name, signature_name=name
                    )
                else:
                    k = [10] * len(histories) if name == "recommend_top_k" else None
                    request = serving.predict_request(histories, model_name, signature_name=name, k=k)
                log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())
                count += 1
    return count


def saved_signatures(export_dir):
    """``{signature: {"inputs": {name: dtype}, "outputs": {name: dtype}}}`` of a SavedModel."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    out = {}
    for name, signature in sorted(proto.meta_graphs[0].signature_def.items()):
        if name.startswith("__"):
            continue
        out[name] = {
            "inputs": {k: tf.dtypes.as_dtype(v.dtype).name for k, v in sorted(signature.inputs.items())},
            "outputs": {k: tf.dtypes.as_dtype(v.dtype).name for k, v in sorted(signature.outputs.items())},
        }
    return out


def read_warmup_requests(export_dir):
    """The ``PredictionLog`` records of an export (what the server replays)."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_dir, "assets.extra", WARMUP_FILE)
    logs = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        logs.append(prediction_log_pb2.PredictionLog.FromString(record))
    return logs
