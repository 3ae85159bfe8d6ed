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
    ``predict_examples````examples`` string ``[batch]``: serialized  ``user_id`` string ``[batch, 1]``
                        ``tf.Example`` in ``tfrecord.FEATURE_SPEC``  (a column: BulkInferrer splits each
                        (reads ``items``), for TFX BulkInferrer      output by record), ``item_ids``, ``scores``
    ``rank_targets``    ``history`` as ``serving_default``;          ``rank`` int32 ``[batch]``: 0-based rank
                        ``target`` string ``[batch]``: a known       of the target among all items;
                        next item (evaluation)                       ``known`` bool ``[batch]``: the target
                                                                     is in the vocabulary
    ==================  ===========================================  =========================================

The export of a model that reads event times (``model.uses_timestamps``: HSTU with a
time bias, ``TimedRecommender``) has the same signatures, names and outputs, and every
history signature takes one more input:

    ==================  ===========================================  =========================================
    signature           extra input                                  rules
    ==================  ===========================================  =========================================
    ``serving_default`` ``timestamps`` int64 ``[batch, None]``: the  a shape other than ``history``'s fails
    ``recommend_ids``   time in seconds of each ``history`` slot,    the request (``InvalidArgumentError``);
    ``recommend_top_k`` oldest first, the same shape as ``history``  a request without it is refused
    ``rank_targets``    (padding slots: any value, e.g. 0)
    ==================  ===========================================  =========================================

``predict_examples`` reads the records' ``timestamps`` feature (``tfrecord.FEATURE_SPEC``);
every record with items needs one time per item (else the request fails).
``serving.predict_request(..., timestamps=...)`` and ``serving.rest_request`` lay the
times out as the histories (``serving.pad_timestamps``). The times go with their items
wherever unknown ids and padding are dropped, so the model sees the gaps between the
known items it reads.

The export of a model that reads event context (``model.event_features``,
``ContextRecommender``) has the same signatures; each history signature takes, after
``history`` (and ``timestamps`` when the model reads event times), one string input
``event_<column>`` ``[batch, None]`` per column, shaped as ``history``: each slot's raw
value (``""``: none; a value training never saw reads as unknown); ``predict_examples``
reads them from the records' ``event_<column>`` features.
``serving.predict_request(..., events={column: values})`` lays them out
(``serving.pad_events``).

Every signature handles any well-typed request: unknown ids and padding are dropped
(wherever they are), items of the whole history are never recommended, the model
reads the newest ``max_sequence_length`` known items, and a history with no known
item gets the most popular items (scored by their share of training interactions).
``k`` is capped at the number of items. Only items that can be recommended fill a
slot; when fewer remain than ``k`` the last slots are padding: item id ``""`` (``-1``
in ``recommend_ids``) at score ``-inf``, an id no item has (``module.PAD_RAW_ID``,
``module.PAD_INT_ID``). ``history`` must be ``[batch, None]``: a 1-D history fails
naming the shape expected.

Exclusion, top-k and ranks are ``tfseqrec.ranking``'s. ``rank_targets`` is for
evaluators that know the target (the TFX ``RankingEvaluator``): it ranks the target
with the rest of the history excluded but the target itself kept as a candidate
even when the user saw it before, which a top-k that excludes the whole history
cannot tell. Ties count against the target, a non-finite target score ranks it last
(``num_items - 1``) and a target the vocabulary lacks gets ``num_items`` (a miss),
as in ``tfseqrec.evaluation``.

Modules: ``module`` (the serving modules and their signatures), ``warmup`` (the
warm-up records; a timed export's carry increasing times), ``versioning`` (``save``,
``export_version``).
"""

from tfseqrec.export.module import (
    SIGNATURES,
    TEXT_SIGNATURES,
    ContextRecommender,
    Recommender,
    TextRecommender,
    TimedRecommender,
    UniSRecTextRecommender,
)
from tfseqrec.export.versioning import export_version, next_version, save, saved_signatures
from tfseqrec.export.warmup import WARMUP_FILE, read_warmup_requests, write_warmup_requests
