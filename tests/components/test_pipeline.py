"""The whole pipeline on MovieLens-100K, run as users run it: ``tfseqrec pipeline run``, on a log that grows."""

import glob
import json
import os

import pytest
import tensorflow as tf
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tensorflow_serving.apis import prediction_log_pb2
from tfx.orchestration import metadata

from components import trainer_module
from tests.test_cli import _tfseqrec
from tfseqrec import serving
from tfseqrec.data import vocab

GOOD = {"epochs": 8, "hidden_dim": 32, "batch_size": 32, "learning_rate": 0.005, "serving_k": 5}
COMPONENTS = {
    "EventExampleGen": "components.event_example_gen.EventExampleGen",
    "SequenceBuilder": "components.sequence_builder.SequenceBuilder",
    "Trainer": "tfx.components.trainer.component.Trainer",
    "latest_blessed_model_resolver": "tfx.dsl.components.common.resolver.Resolver",
    "RankingEvaluator": "components.ranking_evaluator.RankingEvaluator",
    "Pusher": "tfx.components.pusher.component.Pusher",
}


def _run(root, data_root, *flags, check=True):
    return _tfseqrec(
        "pipeline",
        "run",
        "--data-root",
        data_root,
        "--pipeline-root",
        root / "pipeline",
        "--metadata-path",
        root / "metadata.db",
        "--serving-model-dir",
        root / "serving",
        *flags,
        check=check,
    )


@pytest.fixture(scope="module")
def logs(data_root, tmp_path_factory):
    """ML-100K's u.data as the CSV a team would export (user_id,item_id,rating,timestamp): ``old``, the
    events before the last tenth of its time span, and ``grown``, all of them."""
    out = tmp_path_factory.mktemp("ml100k_csv")
    with open(data_root / "ml-100k" / "u.data") as f:
        rows = [line.split() for line in f]
    times = sorted(int(r[3]) for r in rows)
    cut = times[0] + 0.9 * (times[-1] - times[0])
    for name, kept in (("old", [r for r in rows if int(r[3]) < cut]), ("grown", rows)):
        (out / name).mkdir()
        with open(out / name / "ratings.csv", "w") as dst:
            dst.write("user_id,item_id,rating,timestamp\n")
            dst.writelines(",".join(r) + "\n" for r in kept)
    return out


def _summary(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_the_pipeline_warm_starts_on_a_grown_log_and_pushes_only_better_models(logs, tmp_path):
    config = ("--custom-config", json.dumps(GOOD), "--event-features", "rating")
    first = _summary(_run(tmp_path, logs / "old", *config, "--threshold", "0.01"))
    assert first["pushed"] and first["metrics"]["ndcg@10"] >= 0.01
    versions = os.listdir(tmp_path / "serving")
    assert len(versions) == 1 and first["pushed_destination"] == str(tmp_path / "serving" / versions[0])

    store = metadata_store.MetadataStore(
        metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.db"))
    )
    executions = store.get_executions()
    types = {t.id: t.name for t in store.get_execution_types()}
    for node, type_name in COMPONENTS.items():
        ran = [e for e in executions if types[e.type_id] == type_name]
        assert ran and all(e.last_known_state == metadata_store_pb2.Execution.COMPLETE for e in ran), node

    # The pushed model loads as the server loads it and answers serving_default, ratings beside the history.
    predictor = serving.SavedModelPredictor(first["pushed_destination"])
    history = [["50", "172", "133"]]
    request = serving.predict_request(history, "ml100k", events={"rating": [["5", "4", "1"]]})
    reply = serving.predict_reply(predictor.predict(request))
    assert len(reply.item_ids[0]) == 5 and not {"50", "172", "133"} & set(reply.item_ids[0])

    # The log grew: the Trainer starts from the blessed model (every known id kept), and its model,
    # better on the grown log's test cases than the blessed one, is blessed and pushed.
    second = _summary(_run(tmp_path, logs / "grown", *config, "--bulk-inference", "--report"))
    models = sorted(store.get_artifacts_by_type("Model"), key=lambda a: a.id)
    runs = sorted(store.get_artifacts_by_type("ModelRun"), key=lambda a: a.id)
    with open(os.path.join(runs[-1].uri, "train_config.json")) as f:
        record = json.load(f)
    assert record["base_model"] == os.path.join(models[0].uri, "Format-Serving")
    old_items = vocab.ItemVocabulary.load(os.path.join(models[0].uri, trainer_module.MODEL_DIR)).items
    new_items = vocab.ItemVocabulary.load(os.path.join(models[1].uri, trainer_module.MODEL_DIR)).items
    assert new_items[: len(old_items)] == old_items and record["warm_start"]["items"] == len(new_items) - len(
        old_items
    )
    assert second["pushed"] and second["metrics"]["baseline_ndcg@10"] < second["metrics"]["ndcg@10"]
    assert len(os.listdir(tmp_path / "serving")) == 2
    # Every user's recommendations, from the blessed model's predict_examples (TFX's BulkInferrer).
    users = set()
    for path in glob.glob(os.path.join(second["recommendations"], "*.gz")):
        for record in tf.data.TFRecordDataset(path, compression_type="GZIP"):
            outputs = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.response.outputs
            assert len(outputs["item_ids"].string_val) == GOOD["serving_k"]
            users.update(outputs["user_id"].string_val)
    assert len(users) == 943
    # The report page beside the evaluation: both models as their exports answer, the evaluator's figures.
    with open(os.path.join(os.path.dirname(second["report"]), "report.json")) as f:
        shown = json.load(f)
    assert shown["candidate"]["ndcg@10"] == pytest.approx(second["metrics"]["ndcg@10"], abs=1e-6)
    assert shown["last blessed"]["ndcg@10"] == pytest.approx(second["metrics"]["baseline_ndcg@10"], abs=1e-6)
    assert 0 < shown["candidate"]["coverage@10"] <= 1 and shown["candidate"]["num_users"] == 943
    with open(second["report"], encoding="utf-8") as f:
        page = f.read()
    assert "candidate" in page and "last blessed" in page and page.count("<svg") >= 3
    assert first["report"] is None

    # Trained anew for one step: worse than the blessed model, so neither blessed nor pushed.
    flags = ("--no-warm-start", "--train-steps", "1", "--bulk-inference")
    third = _summary(_run(tmp_path, logs / "grown", *config, *flags))
    assert not third["pushed"] and third["metrics"]["ndcg@10"] < second["metrics"]["ndcg@10"]
    assert third["recommendations"] is None  # nothing blessed, nothing inferred
    with open(
        os.path.join(
            max(store.get_artifacts_by_type("ModelRun"), key=lambda a: a.id).uri, "train_config.json"
        )
    ) as f:
        assert "warm_start" not in json.load(f)
    assert len(os.listdir(tmp_path / "serving")) == 2
    blessings = sorted(store.get_artifacts_by_type("ModelBlessing"), key=lambda a: a.id)
    assert [b.custom_properties["blessed"].int_value for b in blessings] == [1, 1, 0]
    assert blessings[2].custom_properties["baseline_model_id"].int_value == (
        blessings[1].custom_properties["current_model_id"].int_value
    )
    pushed = sorted(store.get_artifacts_by_type("PushedModel"), key=lambda a: a.id)
    assert [p.custom_properties["pushed"].int_value for p in pushed] == [1, 1, 0]


@pytest.mark.parametrize(
    "csv, message",
    [
        ("user_id,item_id\na,x\na,y\n", "events.csv:1: missing column(s) ['timestamp']"),
        (
            "user_id,item_id,timestamp\na,x,1\na,y,later\na,z,3\n",
            "events.csv:3: column 'timestamp': cannot parse timestamp 'later'",
        ),
    ],
)
def test_bad_csv_fails_the_pipeline_and_pushes_nothing(tmp_path, csv, message):
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "events.csv").write_text(csv)
    result = _run(tmp_path, tmp_path / "csv", check=False)
    assert result.returncode == 1
    assert message in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "serving").exists()
