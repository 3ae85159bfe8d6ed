"""The whole pipeline on MovieLens-100K, run as users run it: ``tfseqrec pipeline run``."""

import json
import os

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.orchestration import metadata

from components import ranking_evaluator
from tests.test_cli import _tfseqrec
from tfseqrec import serving

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
def csv_dir(data_root, tmp_path_factory):
    """ML-100K's u.data as the CSV a team would export: user_id,item_id,rating,timestamp."""
    out = tmp_path_factory.mktemp("ml100k_csv")
    with open(data_root / "ml-100k" / "u.data") as src, open(out / "ratings.csv", "w") as dst:
        dst.write("user_id,item_id,rating,timestamp\n")
        for line in src:
            dst.write(",".join(line.split()) + "\n")
    return out


@pytest.mark.e2e
def test_pipeline_pushes_a_good_model_and_not_a_worse_one(csv_dir, tmp_path):
    first = json.loads(
        _run(tmp_path, csv_dir, "--custom-config", json.dumps(GOOD), "--threshold", "0.01")
        .stdout.strip()
        .splitlines()[-1]
    )
    assert first["pushed"] and first["metrics"]["num_users"] == 943 and first["metrics"]["ndcg@10"] >= 0.01
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

    # The pushed model loads as the server loads it and answers serving_default.
    predictor = serving.SavedModelPredictor(first["pushed_destination"])
    reply = serving.predict_reply(
        predictor.predict(serving.predict_request([["50", "172", "133"]], "ml100k"))
    )
    assert len(reply.item_ids[0]) == 5 and not {"50", "172", "133"} & set(reply.item_ids[0])

    # A second run trained for one step, reading each rating as event context: worse than the blessed
    # model (which reads none; the evaluator asks each export with what it takes), so not pushed.
    flags = ("--custom-config", json.dumps(GOOD), "--train-steps", "1", "--threshold", "0.0")
    second = json.loads(
        _run(tmp_path, csv_dir, *flags, "--event-features", "rating").stdout.strip().splitlines()[-1]
    )
    assert not second["pushed"] and second["metrics"]["ndcg@10"] < first["metrics"]["ndcg@10"]
    trained = max(store.get_artifacts_by_type("Model"), key=lambda a: a.id)
    assert ranking_evaluator.event_columns(os.path.join(trained.uri, "Format-Serving")) == ["rating"]
    assert os.listdir(tmp_path / "serving") == versions
    blessings = sorted(store.get_artifacts_by_type("ModelBlessing"), key=lambda a: a.id)
    assert [b.custom_properties["blessed"].int_value for b in blessings] == [1, 0]
    assert blessings[1].custom_properties["baseline_model_id"].int_value == (
        blessings[0].custom_properties["current_model_id"].int_value
    )
    pushed = sorted(store.get_artifacts_by_type("PushedModel"), key=lambda a: a.id)
    assert [p.custom_properties["pushed"].int_value for p in pushed] == [1, 0]


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
