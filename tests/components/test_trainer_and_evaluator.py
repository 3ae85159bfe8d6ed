"""The trainer's run_fn and the RankingEvaluator on sequences built by the SequenceBuilder."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

import tfseqrec
from components import ranking_evaluator, trainer_module
from components.artifacts import ItemVocabulary
from components.ranking_evaluator import RankingEvaluator
from components.sequence_builder import SequenceBuilder
from tests.components.conftest import make_artifact, run_executor, write_event_examples
from tfseqrec import evaluation, export, kinds, serving
from tfseqrec.data import EventVocabulary, tfrecord
from tfseqrec.models import SASRec

CONFIG = {
    "model": "sasrec",
    "epochs": 6,
    "hidden_dim": 16,
    "max_sequence_length": 10,
    "batch_size": 16,
    "learning_rate": 0.01,
    "serving_k": 4,
}


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    """80 users walking through 20 items in order, each from its own start: a learnable pattern."""
    root = tmp_path_factory.mktemp("sequences")
    rng = np.random.default_rng(0)
    rows = []
    for user in range(80):
        start = int(rng.integers(20))
        for t in range(int(rng.integers(5, 12))):
            rows.append({"user_id": f"u{user}", "item_id": f"i{(start + t) % 20}", "timestamp": t})
    examples = write_event_examples(root / "events", {"train": rows})
    out = make_artifact(standard_artifacts.Examples, root / "sequences")
    vocabulary = make_artifact(ItemVocabulary, root / "vocabulary")
    run_executor(
        SequenceBuilder,
        {"examples": [examples]},
        {"sequences": [out], "vocabulary": [vocabulary]},
        {},
        beam=True,
        tmp_dir=str(root / "tmp"),
    )
    return out


def _fn_args(sequences, root, config, train_steps=None):
    """The ``FnArgs`` the standard Trainer's executor gives ``run_fn`` (its data accessor included)."""
    from tfx.components.trainer import fn_args_utils

    fn_args = fn_args_utils.get_common_fn_args(
        {"examples": [sequences]},
        {
            "train_args": json.dumps({"splits": ["train"], "num_steps": train_steps or 0}),
            "eval_args": json.dumps({"splits": ["eval"]}),
            "custom_config": json.dumps(config),
        },
    )
    fn_args.model_run_dir = str(root / "model_run")
    fn_args.serving_model_dir = str(root / "model" / "Format-Serving")
    return fn_args


@pytest.fixture(scope="module")
def trained(sequences, tmp_path_factory):
    root = tmp_path_factory.mktemp("trainer")
    trainer_module.run_fn(_fn_args(sequences, root, CONFIG))
    return root


def test_run_fn_trains_logs_and_exports(trained):
    assert glob.glob(str(trained / "model_run" / "train" / "events.out.tfevents.*"))  # TensorBoard
    with open(trained / "model_run" / "train_config.json") as f:
        assert json.load(f)["config"]["model_options"]["hidden_dim"] == 16  # from custom_config
    predictor = serving.SavedModelPredictor(trained / "model" / "Format-Serving")
    assert set(predictor.signatures) >= {"serving_default", "recommend_top_k", "predict_examples"}
    out = predictor.run("serving_default", {"history": serving.pad_histories([["i3", "i4", "i5"]])})
    assert out["item_ids"].shape == (1, 4)  # serving_k
    assert out["item_ids"][0, 0] == b"i6"  # it learned the walk


def test_run_fn_warm_starts_from_a_base_model(sequences, trained, tmp_path):
    assert (trained / "model" / trainer_module.MODEL_DIR / "model.keras").exists()  # beside Format-Serving
    fn_args = _fn_args(sequences, tmp_path, CONFIG, train_steps=1)
    fn_args.base_model = str(trained / "model" / "Format-Serving")
    trainer_module.run_fn(fn_args)
    with open(tmp_path / "model_run" / "train_config.json") as f:
        data = json.load(f)
    assert data["base_model"] == fn_args.base_model and data["warm_start"]["items"] == 0
    # One step from the trained weights: it still knows the walk (a new model would not, after one step).
    predictor = serving.SavedModelPredictor(tmp_path / "model" / "Format-Serving")
    out = predictor.run("serving_default", {"history": serving.pad_histories([["i3", "i4", "i5"]])})
    assert out["item_ids"][0, 0] == b"i6"


def test_data_accessor_reads_the_records_as_written(sequences, tmp_path):
    fn_args = _fn_args(sequences, tmp_path, CONFIG)
    cases = trainer_module.read_split(fn_args.data_accessor, fn_args.eval_files)
    # The oracle: every record parsed by protobuf, one at a time.
    expected = {}
    for path in glob.glob(os.path.join(sequences.uri, "Split-eval", "*")):
        for record in tf.data.TFRecordDataset(path, compression_type="GZIP"):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            expected[feature["user_id"].bytes_list.value[0].decode()] = (
                list(feature["item_ids"].int64_list.value),
                feature["target_id"].int64_list.value[0],
            )
    got = {
        cases.histories.users[u]: (cases.histories[u].tolist(), int(cases.targets[u]))
        for u in range(len(cases))
    }
    assert got == expected and len(got) == 80


def test_run_fn_train_steps_caps_training(sequences, tmp_path):
    trainer_module.run_fn(_fn_args(sequences, tmp_path, {**CONFIG, "epochs": 50}, train_steps=3))
    with open(tmp_path / "model_run" / "history.csv") as f:
        assert len(f.read().strip().splitlines()) == 2  # header and the one epoch the 3 steps fall in


def test_run_fn_rejects_unknown_options(sequences, tmp_path):
    with pytest.raises(ValueError, match="unknown training options"):
        trainer_module.run_fn(_fn_args(sequences, tmp_path, {"hiden_dim": 3}))


def test_run_fn_trains_and_exports_hstu_with_the_records_times(sequences, tmp_path):
    trainer_module.run_fn(
        _fn_args(sequences, tmp_path, {**CONFIG, "model": "hstu", "num_layers": 2, "epochs": 2})
    )
    with open(tmp_path / "model_run" / "train_config.json") as f:
        config = json.load(f)["config"]
    assert (config["model"], config["model_options"]["hidden_dim"], config["loss"]) == ("hstu", 16, "softmax")
    # The SequenceBuilder's records carry the events' times.
    assert config["model_options"]["num_time_buckets"] == 128
    predictor = serving.SavedModelPredictor(tmp_path / "model" / "Format-Serving")
    out = predictor.run(
        "serving_default",
        {"history": serving.pad_histories([["i3", "i4"]]), "timestamps": serving.pad_timestamps([[3, 4]])},
    )
    assert out["item_ids"].shape == (1, 4) and not {b"i3", b"i4"} & set(out["item_ids"][0])


def test_run_fn_trains_and_exports_unisrec_over_item_text(sequences, tmp_path):
    text = tmp_path / "Walk.item.json"  # the name tells the reader the format
    text.write_text(
        json.dumps(
            {
                f"i{i}": {"title": f"step {i} of the walk", "brand": "acme", "categories": "Walks"}
                for i in range(20)
            }
        )
    )
    config = {**CONFIG, "model": "unisrec", "item_text": str(text), "max_attribute_tokens": 6}
    trainer_module.run_fn(_fn_args(sequences, tmp_path, config))
    with open(tmp_path / "model_run" / "train_config.json") as f:
        assert json.load(f)["config"]["attributes"] == ["title", "brand", "categories"]
    predictor = serving.SavedModelPredictor(tmp_path / "model" / "Format-Serving")
    assert {"recommend_texts", "encode_items", "serving_default"} <= set(predictor.signatures)
    out = predictor.run("serving_default", {"history": serving.pad_histories([["i3", "i4"]])})
    assert out["item_ids"].shape == (1, 4) and not {b"i3", b"i4"} & set(out["item_ids"][0])
    with pytest.raises(ValueError, match=r"custom_config=\{'item_text': PATH\}"):
        trainer_module.run_fn(_fn_args(sequences, tmp_path / "again", {**CONFIG, "model": "unisrec"}))


def _evaluate(tmp_path, sequences, model_root, baseline_root=None, **parameters):
    model = make_artifact(standard_artifacts.Model, model_root / "model", artifact_id=7)
    inputs = {"examples": [sequences], "model": [model]}
    if baseline_root is not None:
        inputs["baseline_model"] = [
            make_artifact(standard_artifacts.Model, baseline_root / "model", artifact_id=3)
        ]
    evaluation_artifact = make_artifact(standard_artifacts.ModelEvaluation, tmp_path / "evaluation")
    blessing = make_artifact(standard_artifacts.ModelBlessing, tmp_path / "blessing")
    run_executor(
        RankingEvaluator, inputs, {"evaluation": [evaluation_artifact], "blessing": [blessing]}, parameters
    )
    with open(os.path.join(evaluation_artifact.uri, "metrics.json")) as f:
        return json.load(f), evaluation_artifact, blessing


def test_component_contract():
    spec = RankingEvaluator.SPEC_CLASS
    assert spec.INPUTS["model"].type == standard_artifacts.Model
    assert spec.INPUTS["baseline_model"].optional
    assert spec.OUTPUTS["blessing"].type == standard_artifacts.ModelBlessing
    assert {"metric", "threshold", "min_improvement", "split"} <= set(spec.PARAMETERS)


def test_metrics_equal_the_library_evaluation(sequences, trained, tmp_path):
    report, evaluation_artifact, blessing = _evaluate(tmp_path, sequences, trained, threshold=0.05)
    model, _, _ = tfseqrec.load(trained / "model_run")
    cases = tfrecord.read_examples(
        glob.glob(os.path.join(sequences.uri, "Split-test", "*")), compression="GZIP"
    )
    expected = evaluation.evaluate(model, cases, exclude_seen=True, progress=False)
    for key in ("ndcg@10", "hr@10", "ndcg@1", "hr@20", "mrr"):
        assert report["candidate"][key] == pytest.approx(expected[key], abs=1e-6)
    assert report["candidate"]["num_users"] == len(cases.targets)
    assert evaluation_artifact.get_float_custom_property("ndcg@10") == pytest.approx(expected["ndcg@10"])
    assert report["blessed"] and blessing.get_int_custom_property("blessed") == 1
    assert blessing.get_int_custom_property("current_model_id") == 7
    assert os.path.exists(os.path.join(blessing.uri, "BLESSED"))


def test_threshold_and_baseline_decide_the_blessing(sequences, trained, tmp_path):
    report, _, blessing = _evaluate(tmp_path / "a", sequences, trained, threshold=1.01)
    assert not report["blessed"] and "below the threshold" in report["reasons"][0]
    assert blessing.get_int_custom_property("blessed") == 0
    assert os.path.exists(os.path.join(blessing.uri, "NOT_BLESSED"))
    # The same model as its own baseline does not beat it.
    report, _, blessing = _evaluate(tmp_path / "b", sequences, trained, baseline_root=trained)
    assert not report["blessed"] and "does not beat the last blessed model" in report["reasons"][0]
    assert blessing.get_int_custom_property("baseline_model_id") == 3
    # An untrained baseline is beaten.
    untrained = tmp_path / "untrained"
    vocabulary = trainer_module.read_vocabulary([os.path.join(sequences.uri, "Split-train", "*")])
    export.save(
        kinds.get("sasrec"),
        SASRec(num_items=vocabulary.num_items, max_sequence_length=10, hidden_dim=16),
        vocabulary,
        untrained / "model" / "Format-Serving",
    )
    report, _, _ = _evaluate(tmp_path / "c", sequences, trained, baseline_root=untrained)
    assert report["blessed"] and report["baseline"]["ndcg@10"] < report["candidate"]["ndcg@10"]


def test_run_fn_trains_an_id_model_with_item_attributes(sequences, tmp_path):
    features = tmp_path / "walk.csv"  # each item's parity and its place on the walk
    features.write_text("item_id,parity,step\n" + "".join(f"i{i},{i % 2},{i}\n" for i in range(20)))
    trainer_module.run_fn(
        _fn_args(sequences, tmp_path, {**CONFIG, "epochs": 2, "item_features": str(features)})
    )
    with open(tmp_path / "model_run" / "item_features.json") as f:
        assert json.load(f)["kinds"] == {"parity": "numeric", "step": "numeric"}
    model, _, _ = tfseqrec.load(str(tmp_path / "model_run"))
    assert model.backbone.feature_embedding is not None
    predictor = serving.SavedModelPredictor(tmp_path / "model" / "Format-Serving")
    out = predictor.run("serving_default", {"history": serving.pad_histories([["i3", "i4", "i5"]])})
    assert out["item_ids"].shape == (1, 4)


def test_run_fn_and_the_evaluator_read_event_context(tmp_path):
    rng = np.random.default_rng(1)
    rows = []
    for user in range(40):
        start = int(rng.integers(20))
        for t in range(int(rng.integers(5, 10))):
            kind = ("view", "buy", "view")[t % 3]
            rows.append(
                {"user_id": f"u{user}", "item_id": f"i{(start + t) % 20}", "timestamp": t, "kind": kind}
            )
    examples = write_event_examples(tmp_path / "events", {"train": rows})
    sequences = make_artifact(standard_artifacts.Examples, tmp_path / "sequences")
    run_executor(
        SequenceBuilder,
        {"examples": [examples]},
        {"sequences": [sequences], "vocabulary": [make_artifact(ItemVocabulary, tmp_path / "vocabulary")]},
        {"event_columns": "kind"},
        beam=True,
        tmp_dir=str(tmp_path / "tmp"),
    )
    trainer_module.run_fn(_fn_args(sequences, tmp_path, {**CONFIG, "epochs": 2, "event_features": ["kind"]}))
    model, _, _ = tfseqrec.load(str(tmp_path / "model_run"))
    assert model.event_features == {
        "kind": ["view", "buy"]
    }  # the training split's values, most frequent first
    assert ranking_evaluator.event_columns(str(tmp_path / "model" / "Format-Serving")) == ["kind"]
    report, _, _ = _evaluate(tmp_path / "evaluation", sequences, tmp_path)
    # The oracle: the in-memory model on the test records, their values mapped by the model's vocabulary.
    cases = tfrecord.read_examples(
        glob.glob(os.path.join(sequences.uri, "Split-test", "*")), compression="GZIP", event_columns=["kind"]
    )
    cases = tfrecord.encode_events(cases, EventVocabulary.of_model(model))
    expected = evaluation.evaluate(model, cases, exclude_seen=True, progress=False)
    assert report["candidate"]["ndcg@10"] == pytest.approx(expected["ndcg@10"], abs=1e-6)
    assert report["candidate"]["num_users"] == len(cases.targets) > 0
    # Without the records' values, the export's context cannot be asked.
    with pytest.raises(
        ValueError, match=r"reads event context \['kind'\], but the evaluation records carry no"
    ):
        ranking_evaluator.rank_cases(str(tmp_path / "model" / "Format-Serving"), [[b"i1"]], [b"i2"])


def test_bulk_inferrer_writes_every_users_recommendations_by_predict_examples(sequences, trained, tmp_path):
    from google.protobuf import json_format
    from tensorflow_serving.apis import prediction_log_pb2
    from tfx.components import BulkInferrer
    from tfx.proto import bulk_inferrer_pb2

    model = make_artifact(standard_artifacts.Model, trained / "model")
    blessing = make_artifact(standard_artifacts.ModelBlessing, tmp_path / "blessing")
    blessing.set_int_custom_property("blessed", 1)
    result = make_artifact(standard_artifacts.InferenceResult, tmp_path / "inference")
    specs = {
        "data_spec": bulk_inferrer_pb2.DataSpec(example_splits=["full"]),
        "model_spec": bulk_inferrer_pb2.ModelSpec(model_signature_name=["predict_examples"]),
    }
    run_executor(
        BulkInferrer,
        {"examples": [sequences], "model": [model], "model_blessing": [blessing]},
        {"inference_result": [result]},
        {name: json_format.MessageToJson(spec) for name, spec in specs.items()},
        beam=True,
        tmp_dir=str(tmp_path / "tmp"),
    )
    answers = {}
    for path in glob.glob(str(tmp_path / "inference" / "*.gz")):
        for record in tf.data.TFRecordDataset(path, compression_type="GZIP"):
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log
            outputs = {k: tf.make_ndarray(v) for k, v in log.response.outputs.items()}
            for user, items in zip(outputs["user_id"][:, 0], outputs["item_ids"]):
                answers[user.decode()] = [i.decode() for i in items]
    # The oracle: the in-memory model's top items of each user's whole sequence.
    keras_model, vocabulary, _ = tfseqrec.load(trained / "model_run")
    full = tfrecord.read_examples(
        glob.glob(os.path.join(sequences.uri, "Split-full", "*")), compression="GZIP"
    )
    top, _ = keras_model.recommend([full[u].tolist() for u in range(len(full))], k=CONFIG["serving_k"])
    assert (
        answers == {user: vocabulary.to_raw(row) for user, row in zip(full.users, top)} and len(answers) == 80
    )
