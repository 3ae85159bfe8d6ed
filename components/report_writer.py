"""ReportWriter: the page of ``tfseqrec report`` as a pipeline artifact, beside the evaluation.

It shows what the RankingEvaluator judged: the Trainer's serving SavedModel and, when the
pipeline has one, the last blessed model, each ranked by its own signatures
(``tfseqrec.evaluation.Exported``, as TF Serving would answer) on the SequenceBuilder's
``test`` split, the training split giving the items' popularity. The records are read in
each export's own vocabulary (an item it lacks is unknown to it, as when served); event
context goes to an export as the records' raw values. The training curves come from the
model directory the Trainer writes beside the serving model (``history.csv``).

Output: ``report`` (``tfseqrec.Report``): ``report.html`` (``tfseqrec.report.write``'s page)
and ``report.json`` (each model's ``evaluate`` result, accuracy and beyond accuracy).
"""

import dataclasses
import json
import os
import tempfile

import numpy as np
import tensorflow as tf
from tfx import v1 as tfx

from components import trainer_module
from components.artifacts import Report
from components.ranking_evaluator import serving_dir, split_files
from tfseqrec import evaluation
from tfseqrec import report as report_lib
from tfseqrec.data import events as events_lib
from tfseqrec.data import splits, tfrecord, vocab

PAGE, METRICS = "report.html", "report.json"


def read_split(examples, split, event_columns=()):
    """``Sequences`` or ``Cases`` of a split's records, in the SequenceBuilder's vocabulary,
    with the raw values of ``event_columns``."""
    files = split_files(examples, split)
    return tfrecord.read_examples(files, compression="GZIP", event_columns=event_columns)


def in_vocabulary(data, source, target):
    """``data`` (``Sequences`` or ``Cases`` of ``source``'s ids) in ``target``'s ids: an item
    ``target`` lacks becomes ``OOV_ID``, as its raw id would be looked up when served."""
    remap = np.concatenate([np.arange(vocab.NUM_RESERVED), target.lookup(np.asarray(source.items, object))])
    sequences = data.histories if isinstance(data, splits.Cases) else data
    sequences = dataclasses.replace(sequences, values=remap[sequences.values])
    if not isinstance(data, splits.Cases):
        return sequences
    return splits.Cases(sequences, remap[np.asarray(data.targets)])


def entries(examples, models, labels, split="test"):
    """``report.Entry`` of each exported model (a Trainer's ``Model`` artifact) on the records."""
    exported = [evaluation.Exported(serving_dir(m)) for m in models]
    columns = list(dict.fromkeys(c for e in exported for c in e.event_features))
    source = trainer_module.read_vocabulary(split_files(examples, "train"))
    train, cases = read_split(examples, "train", columns), read_split(examples, split, columns)
    if columns:  # slots of the training split's values, decoded back to them for each export
        context = events_lib.EventVocabulary.from_values(train.events)
        train, cases = tfrecord.encode_events(train, context), tfrecord.encode_events(cases, context)
    out = []
    for model, export, label in zip(models, exported, labels):
        if columns:
            export.event_vocabulary = context
        history = os.path.join(os.path.dirname(serving_dir(model)), trainer_module.MODEL_DIR, "history.csv")
        own_train = in_vocabulary(train, source, export.vocabulary)
        own_cases = in_vocabulary(cases, source, export.vocabulary)
        out.append(report_lib.Entry(label, export, export.vocabulary, own_cases, own_train, history))
    return out


@tfx.dsl.components.component
def ReportWriter(  # noqa: N802 (TFX component names are classes)
    examples: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Examples],
    model: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Model],
    report: tfx.dsl.components.OutputArtifact[Report],
    baseline_model: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Model] = None,
    split: tfx.dsl.components.Parameter[str] = "test",
    sample: tfx.dsl.components.Parameter[int] = 8,
    seed: tfx.dsl.components.Parameter[int] = 0,
    item_text: tfx.dsl.components.Parameter[str] = "",
    item_features: tfx.dsl.components.Parameter[str] = "",
):
    """Writes the report page of the candidate model (and the last blessed one) on ``split``."""
    models = [m for m in (model, baseline_model) if m is not None]
    labels = ["candidate", "last blessed"][: len(models)]
    with tempfile.TemporaryDirectory() as tmp:
        local = [
            trainer_module.local_copy(path, tmp) if path else None for path in (item_text, item_features)
        ]
        shown = entries(examples, models, labels, split)
        names = report_lib.item_names(*local)
        users, _ = report_lib.sample_users(shown[0].cases, None, sample, seed)
        results = report_lib.write(os.path.join(tmp, PAGE), shown, examples.uri, names, users)
        tf.io.gfile.copy(os.path.join(tmp, PAGE), os.path.join(report.uri, PAGE), overwrite=True)
    with tf.io.gfile.GFile(os.path.join(report.uri, METRICS), "w") as f:
        json.dump({label: result for label, result in zip(labels, results)}, f, indent=2)
    report.set_float_custom_property("ndcg@10", float(results[0]["ndcg@10"]))
    report.set_float_custom_property("coverage@10", float(results[0]["coverage@10"]))
