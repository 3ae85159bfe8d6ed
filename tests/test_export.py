"""SavedModel exports for TF Serving, loaded the ways the server and its tools load them."""

import json
import os
import subprocess
import sys
from concurrent import futures

import numpy as np
import pytest
import tensorflow as tf

import tfseqrec
from tests.test_cli import _tfseqrec
from tfseqrec import export, serving
from tfseqrec.data import tfrecord, vocab

TINY = ["--epochs", 1, "--hidden-dim", 8, "--max-sequence-length", 12, "--batch-size", 256, "--quiet"]
MAX_LEN = 12


# HSTU's exports are tested in tests/test_export_timestamps.py (with and without its time bias).
@pytest.fixture(scope="module", params=["sasrec", "bert4rec"])
def exported(request, data_root, tmp_path_factory):
    """A model trained and exported through the CLI: ``(model_dir, base, path, export JSON)``."""
    root = tmp_path_factory.mktemp(request.param)
    model_dir, base = root / "model", root / "saved_models" / "ml100k"
    _tfseqrec(
        "train", "--model", request.param, "--data", data_root / "ml-100k", "--output", model_dir, *TINY
    )
    out = json.loads(_tfseqrec("export", "--model-dir", model_dir, "--output", base, "--k", 5).stdout)
    return model_dir, base, out["path"], out


@pytest.fixture(scope="module")
def in_memory(exported):
    model, vocabulary, _ = tfseqrec.load(exported[0])
    return model, vocabulary


@pytest.fixture(scope="module")
def predictor(exported):
    return serving.SavedModelPredictor(exported[2])


def _top_k(model, vocabulary, histories, k=5):
    """The in-memory model's answer for raw-id histories (unknown ids dropped)."""
    ids = [[int(i) for i in vocabulary.lookup(h) if i >= 3] for h in histories]
    top, scores = model.recommend(ids, k=k)
    return [vocabulary.to_raw(row) for row in top], scores


HISTORIES = [["50", "172", "133"], ["1", "2", "3", "4", "5", "6", "7"], ["181"]]
# The export's mechanics (versions, tools, warm-up, transport) do not depend on the model
# kind: those tests run on SASRec's export only; the answers are checked for every kind.
ONE_KIND = pytest.mark.parametrize("exported", ["sasrec"], indirect=True)


def test_export_writes_a_tf_serving_version_directory(exported):
    _, base, path, out = exported
    assert out["version"] == 1 and path == str(base / "1")
    assert {"saved_model.pb", "variables", "assets", "assets.extra"} <= set(os.listdir(path))
    assert os.listdir(os.path.join(path, "assets")) == ["item_vocab.tsv"]
    assert out["signatures"]["serving_default"] == {
        "inputs": {"history": "string"},
        "outputs": {"item_ids": "string", "scores": "float32"},
    }
    assert out["signatures"]["recommend_ids"]["inputs"] == {"history": "int64"}
    assert out["signatures"]["recommend_ids"]["outputs"] == {"item_ids": "int64", "scores": "float32"}
    assert out["signatures"]["recommend_top_k"]["inputs"] == {"history": "string", "k": "int32"}
    assert out["signatures"]["predict_examples"]["outputs"] == {
        "item_ids": "string",
        "scores": "float32",
        "user_id": "string",
    }
    assert out["signatures"]["rank_targets"] == {
        "inputs": {"history": "string", "target": "string"},
        "outputs": {"known": "bool", "rank": "int32"},
    }


@ONE_KIND
def test_next_export_gets_the_next_version_and_never_overwrites(exported, tmp_path):
    model_dir, _, _, _ = exported
    base = tmp_path / "m"
    first = json.loads(
        _tfseqrec("export", "--model-dir", model_dir, "--output", base, "--version", 3, "--no-warmup").stdout
    )
    second = json.loads(_tfseqrec("export", "--model-dir", model_dir, "--output", base, "--no-warmup").stdout)
    assert (first["version"], second["version"]) == (3, 4)
    again = _tfseqrec("export", "--model-dir", model_dir, "--output", base, "--version", 3, check=False)
    assert again.returncode == 1 and "exists already" in again.stderr
    assert sorted(os.listdir(base)) == ["3", "4"]  # no staging directory left behind


@ONE_KIND
def test_saved_model_cli_show_lists_the_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    text = subprocess.run(
        [cli, "show", "--all", "--dir", exported[2]], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    for name in export.SIGNATURES:
        assert f"signature_def['{name}']" in text
    assert text.count("Method name is: tensorflow/serving/predict") == len(export.SIGNATURES)
    default = text.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    assert "inputs['history'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1, -1)" in default
    assert "outputs['item_ids'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1, 5)" in default
    assert "outputs['scores'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, 5)" in default


def test_saved_model_cli_run_answers(exported, in_memory):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run(
        [
            cli,
            "run",
            "--dir",
            exported[2],
            "--tag_set",
            "serve",
            "--signature_def",
            "recommend_ids",
            "--input_exprs",
            "history=[[50, 172, 133]]",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected, _ = _top_k(*in_memory, [HISTORIES[0]])
    ids = result.stdout.split("Result for output key item_ids:")[1].split("Result for output key")[0]
    assert [int(v) for v in ids.replace("[", " ").replace("]", " ").split()] == [int(v) for v in expected[0]]


@ONE_KIND
def test_fresh_process_tf_saved_model_load(exported, in_memory):
    script = (
        "import json, sys, tensorflow as tf\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['serving_default'](history=tf.constant([['50', '172', '133']]))\n"
        "print(json.dumps([v.decode() for v in out['item_ids'][0].numpy()]))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", script, exported[2]],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=120,
    )
    expected, _ = _top_k(*in_memory, [HISTORIES[0]])
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected[0]


def test_session_loader_equals_the_in_memory_model(predictor, in_memory):
    out = predictor.run("serving_default", {"history": serving.pad_histories(HISTORIES)})
    expected_ids, expected_scores = _top_k(*in_memory, HISTORIES)
    assert [[v.decode() for v in row] for row in out["item_ids"]] == expected_ids
    np.testing.assert_allclose(out["scores"], expected_scores, atol=1e-5, rtol=1e-5)
    ints = predictor.run("recommend_ids", {"history": serving.pad_histories(HISTORIES, "recommend_ids")})
    assert ints["item_ids"].tolist() == [[int(v) for v in row] for row in expected_ids]


def _numpy_top_k(model, vocabulary, history, k=5):
    """The oracle: ``model.score`` of the newest ``MAX_LEN`` known items, then every known
    item of the history excluded and the rest sorted best first, in NumPy (not through
    ``block_ranking.top_k_in_blocks``, which the export and ``recommend`` share)."""
    ids = vocabulary.lookup(history)
    ids = ids[ids >= vocab.NUM_RESERVED]  # unknown ids and padding ("") are dropped
    scores = np.asarray(model.score(ids[None, -MAX_LEN:]))[0].astype(np.float64)
    scores[ids - vocab.NUM_RESERVED] = -np.inf
    order = np.argsort(-scores, kind="stable")[:k]
    return vocabulary.to_raw(order + vocab.NUM_RESERVED), scores[order]


def test_unknown_ids_padding_and_long_histories(predictor, in_memory):
    model, vocabulary = in_memory
    noisy = ["", "nope", "50", "", "172", "x", "133"]
    # Longer than the model reads: the newest MAX_LEN items score, all of them are excluded.
    long = [str(i) for i in range(1, 3 * MAX_LEN)]
    for history in (noisy, long):
        out = predictor.run("serving_default", {"history": serving.pad_histories([history])})
        expected_ids, expected_scores = _numpy_top_k(model, vocabulary, history)
        assert [v.decode() for v in out["item_ids"][0]] == expected_ids
        np.testing.assert_allclose(out["scores"][0], expected_scores, atol=1e-5, rtol=1e-5)
    assert not set(expected_ids) & set(long)
    # The noise changes nothing: the answer for the clean history is the same.
    clean = predictor.run("serving_default", {"history": serving.pad_histories(HISTORIES[:1])})
    dirty = predictor.run("serving_default", {"history": serving.pad_histories([noisy])})
    assert dirty["item_ids"].tolist() == clean["item_ids"].tolist()
    np.testing.assert_allclose(dirty["scores"], clean["scores"], atol=1e-6)


def test_empty_histories_get_the_most_popular_items(predictor, in_memory):
    _, vocabulary = in_memory
    out = predictor.run("serving_default", {"history": np.array([[""], ["unknown"]], dtype=object)})
    popular = vocabulary.items[:5]
    assert [[v.decode() for v in row] for row in out["item_ids"]] == [popular, popular]
    np.testing.assert_allclose(out["scores"][0], vocabulary.counts[:5] / vocabulary.counts.sum(), rtol=1e-5)
    no_columns = predictor.run("serving_default", {"history": np.zeros((2, 0), dtype=object)})
    assert no_columns["item_ids"].shape == (2, 5)
    empty_batch = predictor.run("serving_default", {"history": np.zeros((0, 3), dtype=object)})
    assert empty_batch["item_ids"].shape == (0, 5)


def test_recommend_top_k_asks_for_another_k(predictor, in_memory):
    model, vocabulary = in_memory
    history = serving.pad_histories(HISTORIES[:2])
    out = predictor.run("recommend_top_k", {"history": history, "k": np.array([20, 7], np.int32)})
    expected_ids, _ = _top_k(model, vocabulary, HISTORIES[:2], k=20)
    assert out["item_ids"].shape == (2, 20)
    assert [[v.decode() for v in row] for row in out["item_ids"]] == expected_ids
    everything = predictor.run("recommend_top_k", {"history": history, "k": np.array([10**6, 1], np.int32)})
    assert everything["item_ids"].shape == (2, vocabulary.num_items)
    assert predictor.run("recommend_top_k", {"history": history, "k": np.array([0, -3], np.int32)})[
        "scores"
    ].shape == (2, 0)


def test_rank_targets_keeps_a_seen_target_and_agrees_with_the_top_k(predictor, in_memory):
    model, vocabulary = in_memory
    everything = predictor.run(
        "recommend_top_k", {"history": serving.pad_histories(HISTORIES), "k": np.full(3, 10**6, np.int32)}
    )
    listed = [[v.decode() for v in row] for row in everything["item_ids"]]
    # An unseen target: its place in the served list (random-free scores have no ties here).
    unseen = [row[3] for row in listed]
    # A seen target ("172", in history 0) is not listed by the top-k, but rank_targets ranks it.
    request = {
        "history": serving.pad_histories(HISTORIES + HISTORIES[:1] + [HISTORIES[0]]),
        "target": np.array(unseen + ["172", "no-such-item"], dtype=object),
    }
    out = predictor.run("rank_targets", request)
    assert out["rank"][:3].tolist() == [3, 3, 3]
    assert out["known"].tolist() == [True, True, True, True, False]
    assert out["rank"][4] == vocabulary.num_items  # unknown: a miss
    ids = vocabulary.lookup(HISTORIES[0])
    scores = model.score(np.array([ids[-MAX_LEN:]]))
    expected = evaluation_rank(scores, int(vocabulary.lookup(["172"])[0]), ids)
    assert out["rank"][3] == expected


def evaluation_rank(scores, target, history):
    """The oracle: other unseen items scoring at least the target's score."""
    scores = np.asarray(scores)[0].copy()
    t = target - 3
    mask = np.ones(len(scores), bool)
    mask[[i - 3 for i in history if i != target]] = False
    return int(np.sum(scores[mask] >= scores[t])) - 1


def test_predict_examples_reads_the_tfrecord_schema(predictor, in_memory):
    _, vocabulary = in_memory
    records = [
        tfrecord.make_example(f"user-{i}", vocabulary.lookup(h), h).SerializeToString()
        for i, h in enumerate(HISTORIES)
    ]
    out = predictor.run("predict_examples", {"examples": np.array(records, dtype=object)})
    assert [u.decode() for u in out["user_id"][:, 0]] == ["user-0", "user-1", "user-2"]
    default = predictor.run("serving_default", {"history": serving.pad_histories(HISTORIES)})
    assert out["item_ids"].tolist() == default["item_ids"].tolist()


@ONE_KIND
def test_warmup_records_are_prediction_logs_the_model_answers(exported, predictor):
    logs = export.read_warmup_requests(exported[2])
    signatures = {log.predict_log.request.model_spec.signature_name for log in logs}
    assert signatures == set(export.SIGNATURES)
    assert len(logs) == 2 * len(export.SIGNATURES)
    for log in logs:
        request = log.predict_log.request
        first = "history" if "history" in request.inputs else "examples"
        batch = tf.make_ndarray(request.inputs[first]).shape[0]
        if request.model_spec.signature_name == "rank_targets":
            ranks = tf.make_ndarray(predictor.predict(request).outputs["rank"])
            assert ranks.shape == (batch,)
            continue
        reply = serving.predict_reply(predictor.predict(request))
        assert len(reply.item_ids) == batch


def test_grpc_and_rest_requests_through_the_loaded_model(predictor, in_memory):
    expected_ids, expected_scores = _top_k(*in_memory, HISTORIES)
    grpc_reply = serving.predict_reply(predictor.predict(serving.predict_request(HISTORIES, "ml100k")))
    assert grpc_reply.item_ids == expected_ids
    np.testing.assert_allclose(grpc_reply.scores, expected_scores, atol=1e-5, rtol=1e-5)
    for form in ("instances", "inputs"):
        body = json.loads(json.dumps(serving.rest_request(HISTORIES, form=form)))
        reply = serving.rest_reply(json.loads(json.dumps(predictor.predict_json(body))))
        assert reply.item_ids == expected_ids
    top = serving.rest_reply(predictor.predict_json(serving.rest_request(HISTORIES, "recommend_top_k", k=8)))
    assert [len(row) for row in top.item_ids] == [8, 8, 8]
    ids = serving.rest_reply(predictor.predict_json(serving.rest_request([[50, 172, 133]], "recommend_ids")))
    assert ids.item_ids == [[int(v) for v in expected_ids[0]]]


@ONE_KIND
def test_grpc_round_trip_over_a_real_channel(predictor, in_memory):
    """The client helpers against a gRPC PredictionService backed by the session loader."""
    grpc = pytest.importorskip("grpc")
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    class Service(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):  # noqa: N802 (gRPC method name)
            return predictor.predict(request)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            reply = stub.Predict(serving.predict_request(HISTORIES, "ml100k", version=1), 30.0)
    finally:
        server.stop(None)
    assert reply.model_spec.name == "ml100k" and reply.model_spec.version.value == 1
    assert serving.predict_reply(reply).item_ids == _top_k(*in_memory, HISTORIES)[0]


@pytest.mark.parametrize("kind", ["sasrec", "bert4rec"])
def test_served_blocks_equal_the_whole_score_matrix(kind, monkeypatch, tmp_path):
    """Top-k and ranks served a few columns at a time equal those of the whole matrix:
    ties (popularity of an empty history), exclusions, a bias, unknown ids, every k."""
    import keras

    from tfseqrec import block_ranking, ranking
    from tfseqrec.data import ItemVocabulary
    from tfseqrec.export import module
    from tfseqrec.models import BERT4Rec, SASRec

    monkeypatch.setattr(block_ranking, "CHUNK_ITEMS", 3)
    monkeypatch.setattr(block_ranking, "BLOCK_ENTRIES", 8)  # 3-column blocks at batch 3, 8 for one history
    keras.utils.set_random_seed(1)
    model = (SASRec if kind == "sasrec" else BERT4Rec)(num_items=20, max_sequence_length=3, hidden_dim=8)
    vocabulary = ItemVocabulary([f"i{j}" for j in range(20)], [5, 5, 3, 3, 3] + [1] * 15)
    served = module.Recommender(model, vocabulary, vocabulary.save(str(tmp_path)), k=4)
    ids = tf.constant([[5, 9, 5, 3], [0, 2, 0, 0], [7, 7, 2, 20]], tf.int64)  # row 1: nothing known (2: OOV)
    targets = tf.constant([5, 4, 2])  # a seen target, a popular one, OOV
    scores, history = served.scores(ids)
    for k in (0, 2, 5, 20):
        values, columns = tf.function(served.top_k)(ids, tf.constant(k))
        want = ranking.top_k(scores, k, exclude=history)
        np.testing.assert_array_equal(values, want.values)
        np.testing.assert_array_equal(columns, want.indices)
        one = served.top_k(ids[:1], k)  # a single history: 8-column blocks
        np.testing.assert_array_equal(one[1], want.indices[:1])
    np.testing.assert_array_equal(
        tf.function(served.rank)(ids, targets), ranking.rank_targets(scores, targets, history)
    )


def test_an_export_traces_each_signature_once(tmp_path, monkeypatch):
    # tf.saved_model.save traces again, in its own context, every tf.function it finds on
    # the module; the signatures are plain methods, traced once by signatures().
    from tfseqrec.export import module
    from tfseqrec.models import SASRec

    traced = []
    recommend_raw = module.Recommender._recommend_raw

    def counted(self, history, k, times=None):
        traced.append(k)  # Python runs here only while a graph is traced
        return recommend_raw(self, history, k, times)

    monkeypatch.setattr(module.Recommender, "_recommend_raw", counted)
    vocabulary = vocab.ItemVocabulary(["a", "b", "c", "d"], [4, 3, 2, 1])
    model = SASRec(num_items=4, max_sequence_length=5, hidden_dim=8)
    path, _ = tfseqrec.export_model(model, vocabulary, tmp_path / "served", k=2, warmup=False)
    # serving_default, recommend_top_k and predict_examples (no recommend_ids: the ids are not integers)
    assert len(traced) == 3
    names = [name for name in export.SIGNATURES if name != "recommend_ids"]
    assert sorted(tf.saved_model.load(path).signatures) == sorted(names)


def test_an_export_evaluates_as_its_model_does(exported, in_memory, data_root):
    """``evaluation.Exported`` ranks by the export's signatures (what TF Serving runs): its
    metrics, beyond accuracy included, are the in-memory model's on the same cases."""
    from tfseqrec import beyond_accuracy, evaluation
    from tfseqrec.data import readers, splits

    model, vocabulary = in_memory
    split, _, _ = splits.prepare(readers.read_interactions(data_root / "ml-100k"), vocabulary=vocabulary)
    cases = split.test.select(np.arange(200))
    popularity = beyond_accuracy.ItemPopularity.of(split.train, vocabulary.num_items)
    options = {"ks": (10,), "progress": False, "metrics": "all", "popularity": popularity}
    served = evaluation.evaluate(evaluation.Exported(exported[2]), cases, **options)
    library = evaluation.evaluate(model, cases, **options)
    for key in ("ndcg@10", "hr@10", "mrr", "coverage@10", "arp@10", "novelty@10", "serendipity@10"):
        assert served[key] == pytest.approx(library[key], abs=1e-6), key
    assert served["by_target_popularity"].keys() == library["by_target_popularity"].keys()
    with pytest.raises(ValueError, match="exclude_seen=True"):
        evaluation.evaluate(evaluation.Exported(exported[2]), cases, exclude_seen=False)
