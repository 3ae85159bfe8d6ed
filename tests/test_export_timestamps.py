"""The export of a model that reads event times (HSTU with a time bias): every history signature takes
``timestamps``, and its answers equal the in-memory model's given the same times."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.test_cli import _tfseqrec
from tfseqrec import cli, export, kinds, serving
from tfseqrec.data import tfrecord
from tfseqrec.training import id_models

MAX_LEN = 12
HISTORY_SIGNATURES = ("serving_default", "recommend_ids", "recommend_top_k", "rank_targets")
HISTORIES = [["50", "172", "133"], ["1", "2", "3", "4", "5", "6", "7"], ["181"]]
# Seconds, oldest first: gaps of hours, of seconds to months, and one item.
DAY = 86_400
TIMES = [[880_000_000, 880_003_600, 880_007_200], [880_000_000 + 5**i for i in range(7)], [890_000_000]]


@pytest.fixture(scope="module")
def trained(data_root, tmp_path_factory):
    """A tiny HSTU on ml-100k, whose event times turn the time bias on: ``(model_dir, split)``."""
    model_dir = tmp_path_factory.mktemp("hstu_timed") / "model"
    config = {
        "model": "hstu",
        "epochs": 1,
        "hidden_dim": 8,
        "num_layers": 1,
        "max_sequence_length": MAX_LEN,
        "batch_size": 256,
    }
    _, _, split, _ = id_models.train(kinds.get("hstu"), data_root / "ml-100k", model_dir, config, verbose=0)
    return model_dir, split


@pytest.fixture(scope="module")
def in_memory(trained):
    """The model as the export reads it (loaded from its directory), and its vocabulary."""
    model, vocabulary, _ = kinds.load(trained[0])
    assert model.uses_timestamps and model.backbone.num_time_buckets == 128
    return model, vocabulary


@pytest.fixture(scope="module")
def exported(in_memory, tmp_path_factory):
    path, version = export.export_version(
        kinds.get("hstu"), *in_memory, tmp_path_factory.mktemp("saved_models") / "ml100k", k=5
    )
    assert version == 1
    return path


@pytest.fixture(scope="module")
def predictor(exported):
    return serving.SavedModelPredictor(exported)


def _top_k(model, vocabulary, histories, times, k=5):
    """The oracle: the in-memory model's answer for raw-id histories (unknown ids dropped, times too)."""
    ids, kept = [], []
    for history, row in zip(histories, times):
        known = [(int(i), t) for i, t in zip(vocabulary.lookup(history), row) if i >= 3]
        ids.append([i for i, _ in known])
        kept.append([t for _, t in known])
    top, scores = model.recommend(ids, k=k, timestamps=kept)
    return [vocabulary.to_raw(r) for r in top], scores


def _request(histories, times, signature_name="serving_default", **inputs):
    history = serving.pad_histories(histories, signature_name)
    return {"history": history, "timestamps": serving.pad_timestamps(times), **inputs}


def _decoded(values):
    return [[v.decode() for v in row] for row in values]


def test_every_history_signature_takes_timestamps(exported, trained, tmp_path, capsys):
    signatures = export.saved_signatures(exported)
    assert sorted(signatures) == sorted(export.SIGNATURES)
    for name in HISTORY_SIGNATURES:
        assert signatures[name]["inputs"]["timestamps"] == "int64", name
    assert signatures["serving_default"] == {
        "inputs": {"history": "string", "timestamps": "int64"},
        "outputs": {"item_ids": "string", "scores": "float32"},
    }
    timed = {"history": "string", "timestamps": "int64"}
    assert signatures["recommend_top_k"]["inputs"] == {**timed, "k": "int32"}
    assert signatures["rank_targets"]["inputs"] == {**timed, "target": "string"}
    assert signatures["predict_examples"]["inputs"] == {"examples": "string"}
    # The tool TF Serving users read signatures with.
    tool = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    text = subprocess.run(
        [tool, "show", "--all", "--dir", exported], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    default = text.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    assert "inputs['timestamps'] tensor_info:\n        dtype: DT_INT64\n        shape: (-1, -1)" in default
    # `tfseqrec export` of the model directory writes the same signatures.
    capsys.readouterr()
    assert cli.main(["export", "--model-dir", str(trained[0]), "--output", str(tmp_path), "--no-warmup"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["signatures"] == signatures


def test_answers_equal_the_in_memory_model_given_the_same_times(predictor, in_memory):
    expected_ids, expected_scores = _top_k(*in_memory, HISTORIES, TIMES)
    out = predictor.run("serving_default", _request(HISTORIES, TIMES))
    assert _decoded(out["item_ids"]) == expected_ids
    np.testing.assert_allclose(out["scores"], expected_scores, atol=1e-5, rtol=1e-5)
    ints = predictor.run("recommend_ids", _request(HISTORIES, TIMES, "recommend_ids"))
    assert ints["item_ids"].tolist() == [[int(v) for v in row] for row in expected_ids]
    np.testing.assert_allclose(ints["scores"], expected_scores, atol=1e-5, rtol=1e-5)
    # Unknown ids and padding anywhere, with times of their own: dropped together with those times.
    noisy = [["", "nope", "50", "", "172", "x", "133"]]
    noisy_times = [[0, 1, TIMES[0][0], 0, TIMES[0][1], 999_999_999, TIMES[0][2]]]
    dirty = predictor.run("serving_default", _request(noisy, noisy_times))
    assert _decoded(dirty["item_ids"]) == expected_ids[:1]
    np.testing.assert_allclose(dirty["scores"], expected_scores[:1], atol=1e-5, rtol=1e-5)
    # Longer than the model reads: the newest MAX_LEN items and their times score.
    long = [[str(i) for i in range(1, 3 * MAX_LEN)]]
    long_times = [[880_000_000 + 60 * i**3 for i in range(3 * MAX_LEN - 1)]]
    out = predictor.run("serving_default", _request(long, long_times))
    expected_long, expected_long_scores = _top_k(*in_memory, long, long_times)
    assert _decoded(out["item_ids"]) == expected_long
    np.testing.assert_allclose(out["scores"], expected_long_scores, atol=1e-5, rtol=1e-5)


def test_the_time_bias_is_live_and_reads_gaps_only(predictor, in_memory):
    history = [HISTORIES[1]] * 3
    close = [880_000_000 + i for i in range(7)]  # a second apart
    spread = [880_000_000 + i * 30 * DAY for i in range(7)]  # a month apart
    shifted = [t + 10**8 for t in spread]  # the same gaps three years later
    k = np.full(3, 50, np.int32)
    out = predictor.run("recommend_top_k", _request(history, [close, spread, shifted], k=k))
    assert not np.allclose(out["scores"][0], out["scores"][1], atol=1e-4)
    # The bias is of the gaps between items: a shift of every time changes nothing.
    assert out["item_ids"][1].tolist() == out["item_ids"][2].tolist()
    np.testing.assert_allclose(out["scores"][1], out["scores"][2], atol=1e-5)
    expected_ids, expected_scores = _top_k(*in_memory, history[:2], [close, spread], k=50)
    assert _decoded(out["item_ids"][:2]) == expected_ids
    np.testing.assert_allclose(out["scores"][:2], expected_scores, atol=1e-5, rtol=1e-5)


def _numpy_rank(scores, target, history):
    """The oracle: other unseen items scoring at least the target's score (0-based rank)."""
    scores = np.asarray(scores)[0].copy()
    keep = np.ones(len(scores), bool)
    keep[[i - 3 for i in history if i != target]] = False
    return int(np.sum(scores[keep] >= scores[target - 3])) - 1


def test_recommend_top_k_and_rank_targets(predictor, in_memory):
    model, vocabulary = in_memory
    top = predictor.run("recommend_top_k", _request(HISTORIES, TIMES, k=np.array([20, 7, 3], np.int32)))
    expected_ids, _ = _top_k(model, vocabulary, HISTORIES, TIMES, k=20)
    assert _decoded(top["item_ids"]) == expected_ids
    # An unseen target at place 3 of the served list ranks 3; a seen one ("172") is ranked as evaluation does.
    targets = np.array([row[3] for row in expected_ids] + ["172", "no-such-item"], dtype=object)
    request = _request(HISTORIES + [HISTORIES[0], HISTORIES[0]], TIMES + [TIMES[0], TIMES[0]], target=targets)
    out = predictor.run("rank_targets", request)
    assert out["rank"][:3].tolist() == [3, 3, 3]
    assert out["known"].tolist() == [True] * 4 + [False]
    assert out["rank"][4] == vocabulary.num_items
    ids = vocabulary.lookup(HISTORIES[0])
    scores = model.score({"item_ids": np.array([ids]), "timestamps": np.array([TIMES[0]], np.int64)})
    assert out["rank"][3] == _numpy_rank(scores, int(vocabulary.lookup(["172"])[0]), ids)


def test_predict_examples_reads_the_records_timestamps(predictor, in_memory):
    _, vocabulary = in_memory
    records = [
        tfrecord.make_example(f"user-{i}", vocabulary.lookup(h), h, timestamps=t).SerializeToString()
        for i, (h, t) in enumerate(zip(HISTORIES, TIMES))
    ]
    out = predictor.run("predict_examples", {"examples": np.array(records, dtype=object)})
    assert [u.decode() for u in out["user_id"][:, 0]] == ["user-0", "user-1", "user-2"]
    assert _decoded(out["item_ids"]) == _top_k(*in_memory, HISTORIES, TIMES)[0]
    untimed = [tfrecord.make_example("u", vocabulary.lookup(h), h).SerializeToString() for h in HISTORIES]
    with pytest.raises(tf.errors.InvalidArgumentError, match="one time per item"):
        predictor.run("predict_examples", {"examples": np.array(untimed, dtype=object)})


def test_requests_without_timestamps_or_shaped_unlike_the_history_fail(predictor, exported):
    history, history_times = serving.pad_histories(HISTORIES), serving.pad_timestamps(TIMES)
    with pytest.raises(ValueError, match="timestamps"):
        predictor.run("serving_default", {"history": history})
    with pytest.raises(tf.errors.InvalidArgumentError, match="timestamps must have the shape of history"):
        predictor.run("serving_default", {"history": history, "timestamps": history_times[:, :2]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="timestamps must have the shape of history"):
        predictor.run(
            "rank_targets",
            {
                "history": history,
                "timestamps": serving.pad_timestamps(TIMES[:2]),
                "target": np.array(["1", "2", "3"], dtype=object),
            },
        )
    with pytest.raises(ValueError, match="3 items but 2 timestamps"):
        serving.predict_request(HISTORIES, "m", timestamps=[TIMES[0][:2], TIMES[1], TIMES[2]])
    # A fresh process's tf.saved_model.load, as TF Serving's Python users call it.
    signature = tf.saved_model.load(exported).signatures["serving_default"]
    with pytest.raises(TypeError):
        signature(history=tf.constant(history))


def test_grpc_and_rest_requests_carry_timestamps(predictor, in_memory):
    expected_ids, expected_scores = _top_k(*in_memory, HISTORIES, TIMES)
    request = serving.predict_request(HISTORIES, "ml100k", timestamps=TIMES)
    reply = serving.predict_reply(predictor.predict(request))
    assert reply.item_ids == expected_ids
    np.testing.assert_allclose(reply.scores, expected_scores, atol=1e-5, rtol=1e-5)
    for form in ("instances", "inputs"):
        body = json.loads(json.dumps(serving.rest_request(HISTORIES, form=form, timestamps=TIMES)))
        assert serving.rest_reply(predictor.predict_json(body)).item_ids == expected_ids
    top = serving.rest_request(HISTORIES, "recommend_top_k", k=8, timestamps=TIMES)
    # Laid out as the histories: right-padded to the longest (7 items).
    assert top["instances"][0] == {
        "history": HISTORIES[0] + [""] * 4,
        "timestamps": TIMES[0] + [0] * 4,
        "k": 8,
    }
    assert [len(r) for r in serving.rest_reply(predictor.predict_json(top)).item_ids] == [8, 8, 8]


def test_warmup_records_carry_timestamps_and_are_answered(exported, predictor):
    logs = export.read_warmup_requests(exported)
    assert {log.predict_log.request.model_spec.signature_name for log in logs} == set(export.SIGNATURES)
    assert len(logs) == 2 * len(export.SIGNATURES)
    for log in logs:
        request = log.predict_log.request
        name = request.model_spec.signature_name
        if name == "predict_examples":
            records = tf.make_ndarray(request.inputs["examples"])
            features = [tf.train.Example.FromString(r).features.feature for r in records]
            times = [f["timestamps"].int64_list.value for f in features]
            assert all(list(t) == sorted(t) for t in times) and any(times)
            assert len(serving.predict_reply(predictor.predict(request)).item_ids) == len(records)
            continue
        history, times = (tf.make_ndarray(request.inputs[key]) for key in ("history", "timestamps"))
        assert times.shape == history.shape and times.dtype == np.int64
        outputs = predictor.predict(request).outputs
        answer = tf.make_ndarray(outputs["rank" if name == "rank_targets" else "scores"])
        assert answer.shape[0] == len(history)


def test_cli_recommend_takes_timestamps(trained, in_memory, monkeypatch, capsys):
    history, times = "50 172 nope 133", "880000000 880003600 1 880007200"
    out = json.loads(
        _tfseqrec(
            "recommend",
            "--model-dir",
            trained[0],
            "--history",
            history,
            "--timestamps",
            times,
            "--k",
            5,
            "--json",
        ).stdout
    )
    expected_ids, expected_scores = _top_k(*in_memory, [history.split()], [[int(t) for t in times.split()]])
    assert out["item_ids"] == expected_ids[0]
    np.testing.assert_allclose(out["scores"], expected_scores[0], atol=1e-5, rtol=1e-5)
    base = ["recommend", "--model-dir", str(trained[0]), "--history", "50 172"]
    assert cli.main(base) == 1
    assert "give --timestamps" in capsys.readouterr().err
    assert cli.main(base + ["--timestamps", "1 2 3"]) == 1
    assert "--history has 2 items but --timestamps 3 times" in capsys.readouterr().err
    # A model without a time bias refuses them.
    model, vocabulary = in_memory
    untimed = type(model)(vocabulary.num_items, max_sequence_length=MAX_LEN, hidden_dim=8, num_layers=1)
    monkeypatch.setattr(kinds, "load", lambda _: (untimed, vocabulary, {}))
    assert cli.main(base + ["--timestamps", "1 2"]) == 1
    assert "--timestamps is for models that read event times" in capsys.readouterr().err


def test_cli_plot_draws_attention_over_a_users_timed_history(trained, tmp_path, capsys):
    assert (
        cli.main(["plot", "--model-dir", str(trained[0]), "--output", str(tmp_path)]) == 0
    )  # the first user
    assert os.path.getsize(tmp_path / "attention.png") > 0
    assert (
        cli.main(["plot", "--model-dir", str(trained[0]), "--output", str(tmp_path), "--history", "50 172"])
        == 1
    )
    assert "give --timestamps" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "plot",
                "--model-dir",
                str(trained[0]),
                "--output",
                str(tmp_path),
                "--history",
                "50 172",
                "--timestamps",
                "880000000 880003600",
            ]
        )
        == 0
    )


@pytest.mark.tfx
def test_cli_evaluate_and_the_ranking_evaluator_agree(
    trained, in_memory, exported, data_root, tmp_path, capsys
):
    from components import ranking_evaluator

    assert cli.main(["evaluate", "--model-dir", str(trained[0]), "--data", str(data_root / "ml-100k")]) == 0
    library = json.loads(capsys.readouterr().out.splitlines()[-1])
    _, split = trained
    _, vocabulary = in_memory
    path = tmp_path / "test.tfrecord"
    tfrecord.write_examples(path, split.test, vocabulary)
    histories, targets, times, _ = tfrecord.read_raw_cases([path])
    assert len(times) == 943 and [len(t) for t in times] == [len(h) for h in histories]
    served = ranking_evaluator.evaluate_export(exported, histories, targets, timestamps=times)
    assert served["num_users"] == library["num_users"] == 943
    for key in ("ndcg@10", "hr@10", "mrr"):
        assert served[key] == pytest.approx(library[key], abs=1e-6), key
    with pytest.raises(ValueError, match="records carry none"):
        ranking_evaluator.rank_cases(exported, histories[:4], targets[:4])


def test_an_hstu_without_time_bias_serves_histories_alone(in_memory, tmp_path):
    from tfseqrec.models import HSTU

    _, vocabulary = in_memory
    model = HSTU(vocabulary.num_items, max_sequence_length=MAX_LEN, hidden_dim=8, num_layers=1)  # untrained
    path, _ = export.export_version(
        kinds.get("hstu"), model, vocabulary, tmp_path / "untimed", k=5, warmup=False
    )
    assert export.saved_signatures(path)["serving_default"]["inputs"] == {"history": "string"}
    out = serving.SavedModelPredictor(path).run(
        "serving_default", {"history": serving.pad_histories(HISTORIES)}
    )
    top, scores = model.recommend([[int(i) for i in vocabulary.lookup(h) if i >= 3] for h in HISTORIES], k=5)
    assert _decoded(out["item_ids"]) == [vocabulary.to_raw(row) for row in top]
    np.testing.assert_allclose(out["scores"], scores, atol=1e-5, rtol=1e-5)  # cosine / 0.05: up to 20
