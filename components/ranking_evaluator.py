"""RankingEvaluator: full-catalogue ranking metrics of the exported model, and its blessing.

It evaluates what would be pushed: the Trainer's serving SavedModel
(``Format-Serving``), run through its ``recommend_top_k`` signature on the raw item ids
of the ``test`` split with ``k`` = the whole catalogue, so each target's rank among all
items is exact (already-seen items excluded, as served; ties count against the
target). Metrics: NDCG@K and HR@K for K in 1, 5, 10, 20, and MRR, as in
``tfseqrec.evaluation``.

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

from tfseqrec.evaluation import metrics_from_ranks

BLESSED_FILE, NOT_BLESSED_FILE = "BLESSED", "NOT_BLESSED"


def serving_dir(model):
    """The serving SavedModel inside a Trainer's ``Model`` artifact."""
    path = os.path.join(model.uri, "Format-Serving")
    return path if tf.io.gfile.exists(path) else model.uri


def read_cases(examples, split):
    """``(histories, targets)`` of raw ids from the split's ``tf.Example`` records."""
    pattern = os.path.join(artifact_utils.get_split_uri([examples], split), "*")
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no records match {pattern}")
    histories, targets = [], []
    for path in files:
        for record in tf.data.TFRecordDataset(path, compression_type="GZIP"):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            if "target" not in feature or not feature["target"].bytes_list.value:
                raise ValueError(f"{path}: a record of split {split!r} has no target; is it an evaluation split?")
            histories.append(list(feature["items"].bytes_list.value))
            targets.append(feature["target"].bytes_list.value[0])
    return histories, targets


def rank_cases(export_dir, histories, targets, batch_size=256):
    """0-based ranks of ``targets`` among all items, by the export's ``recommend_top_k``."""
    fn = tf.saved_model.load(export_dir).signatures["recommend_top_k"]
    ranks = []
    for start in range(0, len(histories), batch_size):
        rows = histories[start : start + batch_size]
        width = max(1, max(len(h) for h in rows))
        padded = tf.constant([h + [b""] * (width - len(h)) for h in rows], tf.string)
        out = fn(history=padded, k=tf.fill([len(rows)], tf.int32.max))
        items, scores = out["item_ids"].numpy(), out["scores"].numpy()
        for row, target in enumerate(targets[start : start + batch_size]):
            where = np.flatnonzero(items[row] == target)
            if len(where) == 0:  # not in the vocabulary: it cannot be recommended
                ranks.append(items.shape[1])
                continue
            # Ties against the target: every other item scoring at least as much is ahead.
            ranks.append(int(np.sum(scores[row] >= scores[row, where[0]])) - 1)
    return np.asarray(ranks)


def evaluate_export(export_dir, histories, targets, batch_size=256):
    metrics = metrics_from_ranks(rank_cases(export_dir, histories, targets, batch_size))
    metrics["num_users"] = len(targets)
    return metrics


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
    histories, targets = read_cases(examples, split)
    candidate = evaluate_export(serving_dir(model), histories, targets, batch_size)
    if metric not in candidate:
        raise ValueError(f"unknown metric {metric!r}; expected one of {sorted(candidate)}")
    baseline = None
    if baseline_model is not None:
        baseline = evaluate_export(serving_dir(baseline_model), histories, targets, batch_size)
    value = candidate[metric]
    reasons = []
    if value < threshold:
        reasons.append(f"{metric} {value:.4f} is below the threshold {threshold:.4f}")
    if baseline is not None and not value > baseline[metric] + min_improvement:
        reasons.append(
            f"{metric} {value:.4f} does not beat the last blessed model's {baseline[metric]:.4f}"
            + (f" by more than {min_improvement:.4f}" if min_improvement else "")
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

    with tf.io.gfile.GFile(os.path.join(blessing.uri, BLESSED_FILE if blessed else NOT_BLESSED_FILE), "w") as f:
        f.write("\n".join(reasons))
    blessing.set_int_custom_property("blessed", int(blessed))
    blessing.set_int_custom_property("current_model_id", model.id)
    blessing.set_string_custom_property("current_model", model.uri)
    blessing.set_float_custom_property(metric, float(value))
    if baseline_model is not None:
        blessing.set_int_custom_property("baseline_model_id", baseline_model.id)
        blessing.set_string_custom_property("baseline_model", baseline_model.uri)
