"""RankingEvaluator: full-catalogue ranking metrics of the exported model, and its blessing.

It evaluates what would be pushed: the Trainer's serving SavedModel
(``Format-Serving``), run through its ``rank_targets`` signature on the raw item ids
of the ``test`` split. The signature ranks each target among all items with
``tfseqrec.ranking``, the rules of ``tfseqrec.evaluation`` and of validation in ``fit``:
the rest of the user's history is excluded as served, but a target the user saw
before stays a candidate (a top-k that excludes the whole history would rank it
last), ties count against the target, a non-finite score ranks it last, and a target
the model's vocabulary lacks is a miss (counted in ``num_unknown_targets``). Metrics:
NDCG@K and HR@K for K in 1, 5, 10, 20, and MRR, by ``ranking.metrics_from_ranks``.
An export without ``rank_targets`` (written before it existed) is refused with a
message: re-export it. The export of a model that reads event times (its
``rank_targets`` takes ``timestamps``) is asked with the records' ``timestamps``, and that of
a model that reads event context (``event_<column>`` inputs) with the records' raw values of
those columns (the SequenceBuilder's ``event_columns``); records without them are refused.

Outputs: ``evaluation`` (``ModelEvaluation``: ``metrics.json`` and the metrics as
custom properties, so they are in ML Metadata) and ``blessing`` (a standard
``ModelBlessing``, read by ``Pusher`` and ``LatestBlessedModelStrategy``). The model is
blessed when ``metric`` reaches ``threshold`` and, if a ``baseline_model`` (the last
blessed one) is given, beats its score on the same split by more than
``min_improvement``.
"""

import json
import os

import numpy as np
import tensorflow as tf
from tfx import v1 as tfx
from tfx.types import artifact_utils

from tfseqrec import serving
from tfseqrec.data import events as events_lib
from tfseqrec.data import tfrecord
from tfseqrec.ranking import DEFAULT_KS, metrics_from_ranks

BLESSED_FILE, NOT_BLESSED_FILE = "BLESSED", "NOT_BLESSED"
# What a model can be blessed by: the metrics ``metrics_from_ranks`` computes (not the counts
# beside them, such as ``num_users``).
BLESSING_METRICS = tuple(f"{name}@{k}" for name in ("ndcg", "hr") for k in DEFAULT_KS) + ("mrr",)


def check_metric(metric):
    """Refuses a blessing metric the evaluator does not compute, before any component runs."""
    if metric not in BLESSING_METRICS:
        raise ValueError(f"unknown blessing metric {metric!r}; expected one of {list(BLESSING_METRICS)}")


def serving_dir(model):
    """The serving SavedModel inside a Trainer's ``Model`` artifact."""
    path = os.path.join(model.uri, "Format-Serving")
    return path if tf.io.gfile.exists(path) else model.uri


def split_files(examples, split):
    """The record files of a split of an ``Examples`` artifact (refused when there are none)."""
    pattern = os.path.join(artifact_utils.get_split_uri([examples], split), "*")
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no records match {pattern}")
    return files


def read_cases(examples, split, event_columns=()):
    """``RawCases`` of the split's records (``tfrecord.read_raw_cases``), with ``event_columns``."""
    return tfrecord.read_raw_cases(
        split_files(examples, split), compression="GZIP", event_columns=event_columns
    )


def rank_targets(export_dir):
    """The ``rank_targets`` signature of the export at ``export_dir`` (refused when it has none)."""
    loaded = tf.saved_model.load(export_dir)
    if "rank_targets" not in loaded.signatures:
        raise ValueError(
            f"{export_dir} has no 'rank_targets' signature (signatures: {sorted(loaded.signatures)}); it was "
            "exported by an older tfseqrec: export it again to evaluate it"
        )
    return loaded.signatures["rank_targets"]


def event_columns(export_dir):
    """The event columns the export's ``rank_targets`` takes (its ``event_<column>`` inputs), in order."""
    return _columns_of(rank_targets(export_dir))


def _columns_of(fn):
    """The event columns of a loaded ``rank_targets`` signature ``fn``."""
    names = fn.structured_input_signature[1]
    return [name[len(events_lib.PREFIX) :] for name in names if name.startswith(events_lib.PREFIX)]


def rank_cases(export_dir, histories, targets, batch_size=256, timestamps=None, events=None):
    """``(ranks, known)`` of raw ``targets`` given raw ``histories``, by the export's ``rank_targets``.

    ``timestamps``: each history's item times (seconds, one per item), which the export
    of a model that reads event times needs (other exports ignore them). ``events``:
    ``{column: each history's raw values}``, which the export of a model that reads event
    context needs for its columns (other columns are ignored).
    """
    fn = rank_targets(export_dir)
    timed = "timestamps" in fn.structured_input_signature[1]
    if timed and timestamps is None:
        raise ValueError(
            f"{export_dir} reads the items' event times (its rank_targets takes 'timestamps'), "
            "but the evaluation records carry none: write them from data with a time column"
        )
    columns = _columns_of(fn)  # the export loaded once
    missing = [c for c in columns if c not in (events or {})]
    if missing:
        raise ValueError(
            f"{export_dir} reads event context {columns}, but the evaluation records carry no {missing}: "
            "build the sequences with those event_columns (tfseqrec pipeline run --event-features)"
        )
    ranks, known = [], []
    for start in range(0, len(histories), batch_size):
        rows = histories[start : start + batch_size]
        width = max(1, max(len(h) for h in rows))
        inputs = {
            "history": tf.constant(_padded(rows, width), tf.string),
            "target": tf.constant(list(targets[start : start + batch_size]), tf.string),
        }
        if timed:
            times = timestamps[start : start + batch_size]
            inputs["timestamps"] = tf.constant(serving.pad_timestamps(times, width=width), tf.int64)
        for column in columns:
            values = events[column][start : start + batch_size]
            inputs[events_lib.input_name(column)] = tf.constant(_padded(values, width), tf.string)
        out = fn(**inputs)
        ranks.append(out["rank"].numpy())
        known.append(out["known"].numpy())
    return np.concatenate(ranks).astype(np.int64), np.concatenate(known)


def _padded(rows, width):
    """Rows of raw values, each padded with ``b""`` on the right to ``width`` (as histories are)."""
    return [list(row) + [b""] * (width - len(row)) for row in rows]


def evaluate_export(export_dir, histories, targets, batch_size=256, timestamps=None, events=None):
    """Ranking metrics of an export on raw evaluation cases (``rank_cases``'s arguments)."""
    ranks, known = rank_cases(export_dir, histories, targets, batch_size, timestamps, events)
    metrics = metrics_from_ranks(ranks)
    metrics["num_users"] = len(targets)
    metrics["num_unknown_targets"] = int((~known).sum())
    return metrics


def blessing_refusals(metric, value, num_cases, threshold, baseline_value=None, min_improvement=0.0):
    """Why a model is not blessed: a list of reasons, empty when it is.

    Blessed only on a non-empty split with a finite ``value >= threshold`` that beats
    a finite ``baseline_value`` by more than ``min_improvement`` (a non-finite
    baseline counts as no baseline). A NaN compares false with everything, so each
    test is written to fail, not pass, on NaN.
    """
    reasons = []
    if num_cases == 0:
        reasons.append("the split has no cases to evaluate")
    if not np.isfinite(value):
        reasons.append(f"{metric} is {value} (not finite)")
    elif not value >= threshold:
        reasons.append(f"{metric} {value:.4f} is below the threshold {threshold:.4f}")
    if (
        baseline_value is not None
        and np.isfinite(baseline_value)
        and not value > baseline_value + min_improvement
    ):
        reasons.append(
            f"{metric} {value:.4f} does not beat the last blessed model's {baseline_value:.4f}"
            + (f" by more than {min_improvement:.4f}" if min_improvement else "")
        )
    return reasons


@tfx.dsl.components.component
def RankingEvaluator(  # noqa: N802 (TFX component names are classes)
    examples: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Examples],
    model: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Model],
    evaluation: tfx.dsl.components.OutputArtifact[tfx.types.standard_artifacts.ModelEvaluation],
    blessing: tfx.dsl.components.OutputArtifact[tfx.types.standard_artifacts.ModelBlessing],
    baseline_model: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Model] = None,
    split: tfx.dsl.components.Parameter[str] = "test",
    metric: tfx.dsl.components.Parameter[str] = "ndcg@10",
    threshold: tfx.dsl.components.Parameter[float] = 0.0,
    min_improvement: tfx.dsl.components.Parameter[float] = 0.0,
    batch_size: tfx.dsl.components.Parameter[int] = 256,
):
    """Ranks every test target among all items and blesses the model when it is good enough."""
    check_metric(metric)
    exports = [serving_dir(m) for m in (model, baseline_model) if m is not None]
    columns = list(dict.fromkeys(c for export_dir in exports for c in event_columns(export_dir)))
    cases = read_cases(examples, split, columns)
    targets = cases.targets
    candidate = evaluate_export(
        exports[0], cases.histories, targets, batch_size, cases.timestamps, cases.events
    )
    baseline = None
    if baseline_model is not None:
        baseline = evaluate_export(
            exports[1], cases.histories, targets, batch_size, cases.timestamps, cases.events
        )
    value = candidate[metric]
    reasons = blessing_refusals(
        metric,
        value,
        len(targets),
        threshold,
        None if baseline is None else baseline[metric],
        min_improvement,
    )
    blessed = not reasons
    report = {
        "split": split,
        "metric": metric,
        "threshold": threshold,
        "min_improvement": min_improvement,
        "candidate": candidate,
        "baseline": baseline,
        "blessed": blessed,
        "reasons": reasons,
    }
    with tf.io.gfile.GFile(os.path.join(evaluation.uri, "metrics.json"), "w") as f:
        json.dump(report, f, indent=2)
    for name, number in candidate.items():
        evaluation.set_float_custom_property(name, float(number))
    if baseline is not None:
        evaluation.set_float_custom_property(f"baseline_{metric}", float(baseline[metric]))

    with tf.io.gfile.GFile(
        os.path.join(blessing.uri, BLESSED_FILE if blessed else NOT_BLESSED_FILE), "w"
    ) as f:
        f.write("\n".join(reasons))
    blessing.set_int_custom_property("blessed", int(blessed))
    blessing.set_int_custom_property("current_model_id", model.id)
    blessing.set_string_custom_property("current_model", model.uri)
    blessing.set_float_custom_property(metric, float(value))
    if baseline_model is not None:
        blessing.set_int_custom_property("baseline_model_id", baseline_model.id)
        blessing.set_string_custom_property("baseline_model", baseline_model.uri)
