"""Recformer end to end: CLI training, alignment, new items, the SavedModel and its signatures."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.test_case import TINY_RECFORMER, report_beside_export, train_text_model
from tests.test_cli import _tfseqrec
from tfseqrec import export, kinds, serving, training
from tfseqrec.data import readers, splits
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.models import RecformerRecommender
from tfseqrec.training import recformer as recformer_training

pytestmark = pytest.mark.primary
CONFIG = TINY_RECFORMER


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    return train_text_model("recformer", data, tmp_path_factory.mktemp("recformer") / "model", CONFIG)


@pytest.fixture(scope="module")
def loaded(trained):
    return kinds.load(trained[0])


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    base = tmp_path_factory.mktemp("served") / "recformer"
    out = json.loads(_tfseqrec("export", "--model-dir", trained[0], "--output", base, "--k", 5).stdout)
    return base, out


def test_cli_trains_both_stages_and_reports_test_metrics(trained):
    model_dir, result = trained
    assert result["num_users"] == 30 and 0.0 <= result["ndcg@10"] <= 1.0 and result["epochs"] == 2
    assert {"model.keras", "item_vocab.tsv", "item_text.json", "recformer_config.json", "history.csv"} <= set(
        os.listdir(model_dir)
    )
    header, *rows = (model_dir / "history.csv").read_text().splitlines()
    assert header.split(",")[:2] == ["stage", "epoch"] and [r.split(",")[0] for r in rows] == ["1", "2"]
    seconds = [float(r.split(",")[header.split(",").index("seconds")]) for r in rows]
    assert 0 < seconds[0] < seconds[1]  # each epoch's own end time, not the stage's


def test_loaded_model_evaluates_as_trained(trained, loaded, data):
    recommender, vocabulary, info = loaded
    assert info["config"]["num_layers"] == 1 and vocabulary.num_items == 20
    split, _, _ = splits.prepare(readers.read_interactions(data / "Tiny.inter.json"), vocabulary=vocabulary)
    from tfseqrec import evaluation

    again = evaluation.evaluate(recommender, split.test, progress=False)
    assert again["ndcg@10"] == pytest.approx(trained[1]["ndcg@10"], abs=1e-6)


def test_recommend_cli_returns_unseen_raw_ids(trained):
    out = json.loads(
        _tfseqrec("recommend", "--model-dir", trained[0], "--history", "1 2 3", "--k", 4, "--json").stdout
    )
    assert len(out["item_ids"]) == 4 and not {"1", "2", "3"} & set(out["item_ids"])
    assert out["scores"] == sorted(out["scores"], reverse=True)


def test_other_model_flags_are_refused_for_recformer(data, tmp_path):
    result = _tfseqrec(
        "train",
        "--model",
        "recformer",
        "--data",
        data / "Tiny.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--output",
        tmp_path / "m",
        "--hidden-dim",
        8,
        check=False,
    )
    assert result.returncode == 1 and "--hidden-dim is not an option of recformer" in result.stderr
    result = _tfseqrec(
        "train",
        "--model",
        "recformer",
        "--data",
        data / "Tiny.inter.json",
        "--output",
        tmp_path / "m",
        check=False,
    )
    assert result.returncode == 1 and "--item-text" in result.stderr


def test_alignment_spreads_the_cls_vectors_without_interactions(data):
    config = training.RecformerConfig.from_dict(
        {**CONFIG, "attributes": ["title", "brand", "categories"], "align_epochs": 20}
    )
    vocabulary = vocab_lib.ItemVocabulary([str(i) for i in range(20)])
    texts, _ = recformer_training.item_texts(
        readers.read_item_text(data / "Tiny.item.json"), vocabulary, config.attributes
    )
    recommender = recformer_training.build(config, vocabulary, texts)

    def mean_cosine():
        recommender.refresh_item_embeddings()
        e = recommender.model.item_embeddings.numpy()
        e = e / np.linalg.norm(e, axis=1, keepdims=True)
        return float((e @ e.T)[~np.eye(len(e), dtype=bool)].mean())

    before = mean_cosine()
    history = recformer_training.align(recommender, config, verbose=0)
    after = mean_cosine()
    assert before > 0.99  # all-MiniLM-L6-v2's [CLS] barely depends on the input
    assert after < before - 0.05 and np.isfinite(history.history["loss"]).all()


def test_no_alignment_still_encodes_the_item_table(data):
    # With align_epochs 0 the zero-shot model is the checkpoint as it is: its table
    # must hold each item's one-item encoding, not the zeros it is built with (all
    # items tied then, and every target ranked last).
    config = training.RecformerConfig.from_dict(
        {**CONFIG, "attributes": ["title", "brand", "categories"], "align_epochs": 0, "pooling": "mean"}
    )
    vocabulary = vocab_lib.ItemVocabulary([str(i) for i in range(20)])
    texts, _ = recformer_training.item_texts(
        readers.read_item_text(data / "Tiny.item.json"), vocabulary, config.attributes
    )
    recommender = recformer_training.build(config, vocabulary, texts)
    assert recformer_training.align(recommender, config, verbose=0) is None
    ids = np.arange(vocab_lib.NUM_RESERVED, vocab_lib.NUM_RESERVED + 20)
    np.testing.assert_allclose(
        recommender.model.item_embeddings.numpy(), recommender.encode_items(ids), atol=1e-5
    )
    assert np.linalg.norm(recommender.model.item_embeddings.numpy(), axis=1).min() > 0


def test_add_items_encodes_new_items_and_keeps_the_old_table(loaded, data):
    recommender, vocabulary, info = loaded
    config = training.RecformerConfig.from_dict(info["config"])
    old = recommender.model.item_embeddings.numpy()
    grown, grown_vocabulary, added = recformer_training.add_items(
        recommender, vocabulary, readers.read_item_text(data / "New.item.json"), config
    )
    assert added == ["20"] and grown_vocabulary.num_items == 21 and grown_vocabulary.items[-1] == "20"
    table = grown.model.item_embeddings.numpy()
    np.testing.assert_array_equal(table[:20], old)
    new_id = grown_vocabulary.lookup(["20"])[0]
    np.testing.assert_allclose(table[20], grown.encode_items([new_id])[0], atol=1e-5)
    ids, _ = grown.recommend([[new_id]], k=20, exclude_seen=True)  # every item but the seen one
    assert new_id not in ids[0] and len(set(ids[0].tolist())) == 20


# --- the SavedModel -------------------------------------------------------------------


def test_export_has_id_and_text_signatures(exported):
    _, out = exported
    assert set(out["signatures"]) == set(export.SIGNATURES) | set(export.TEXT_SIGNATURES)
    assert out["signatures"]["recommend_texts"] == {
        "inputs": {"history_text": "string"},
        "outputs": {"item_ids": "string", "scores": "float32"},
    }
    assert out["signatures"]["encode_items"] == {
        "inputs": {"item_text": "string"},
        "outputs": {"embeddings": "float32"},
    }


def test_session_loader_answers_ids_and_texts_as_the_model_does(exported, loaded, data):
    recommender, vocabulary, info = loaded
    predictor = serving.SavedModelPredictor(os.path.join(exported[0], "1"))
    histories = [["1", "2", "3"], ["7"], ["unknown", "5", "9"]]
    out = predictor.run("serving_default", {"history": serving.pad_histories(histories)})
    ids = [[int(i) for i in vocabulary.lookup(h) if i >= vocab_lib.NUM_RESERVED] for h in histories]
    top, scores = recommender.recommend(ids, k=5)
    assert [[v.decode() for v in row] for row in out["item_ids"]] == [vocabulary.to_raw(r) for r in top]
    np.testing.assert_allclose(out["scores"], scores, atol=1e-5)

    attributes = info["config"]["attributes"]
    raw_text = readers.read_item_text(data / "Tiny.item.json")
    text = np.array([[[raw_text[i][a] for a in attributes] for i in ("1", "2", "3")]], dtype=object)
    by_text = predictor.run("recommend_texts", {"history_text": text})
    unfiltered, unfiltered_scores = recommender.recommend(ids[:1], k=5, exclude_seen=False)
    assert [v.decode() for v in by_text["item_ids"][0]] == vocabulary.to_raw(unfiltered[0])
    np.testing.assert_allclose(by_text["scores"][0], unfiltered_scores[0], atol=1e-5)

    vectors = predictor.run("encode_items", {"item_text": text[0]})["embeddings"]
    np.testing.assert_allclose(vectors, recommender.encode_items(ids[0]), atol=1e-5)


def test_text_history_padding_and_empty_requests_never_error(exported):
    predictor = serving.SavedModelPredictor(os.path.join(exported[0], "1"))
    padded = np.array(
        [[["red pipette 1", "acme", ""], ["", "", ""]], [["", "", ""], ["", "", ""]]], dtype=object
    )
    out = predictor.run("recommend_texts", {"history_text": padded})
    assert out["item_ids"].shape == (2, 5) and np.isfinite(out["scores"]).all()
    popular = predictor.run("serving_default", {"history": np.array([[""]], dtype=object)})
    assert out["item_ids"][1].tolist() == popular["item_ids"][0].tolist()
    narrow = predictor.run("encode_items", {"item_text": np.array([["blue flask"]], dtype=object)})
    assert narrow["embeddings"].shape[0] == 1


def test_warmup_records_cover_the_text_signatures(exported):
    path = os.path.join(exported[0], "1")
    predictor = serving.SavedModelPredictor(path)
    logs = export.read_warmup_requests(path)
    names = [log.predict_log.request.model_spec.signature_name for log in logs]
    assert sorted(set(names)) == sorted(set(export.SIGNATURES) | set(export.TEXT_SIGNATURES))
    checked = set()
    for log in logs:
        request = log.predict_log.request
        reply = predictor.predict(request)
        outputs = {key: tf.make_ndarray(value) for key, value in reply.outputs.items()}
        batch = len(tf.make_ndarray(next(iter(request.inputs.values()))))
        assert batch > 0 and all(len(v) == batch for v in outputs.values())
        if "scores" in outputs:  # k of 20 items: every slot is a real item with a finite score
            ids, k = outputs["item_ids"], 10 if request.model_spec.signature_name == "recommend_top_k" else 5
            assert ids.shape == (batch, k) and np.isfinite(outputs["scores"]).all()
            assert (ids != b"").all() if ids.dtype.kind in "OS" else (ids >= 0).all()
            checked.add("scores")
        if "embeddings" in outputs:
            assert np.isfinite(outputs["embeddings"]).all() and outputs["embeddings"].shape[1] > 0
            checked.add("embeddings")
        if "rank" in outputs:
            assert ((outputs["rank"] >= 0) & (outputs["rank"] <= 20)).all() and outputs["known"].all()
            checked.add("rank")
    assert checked == {"scores", "embeddings", "rank"}


def test_text_request_builds_what_the_signatures_take(exported):
    predictor = serving.SavedModelPredictor(os.path.join(exported[0], "1"))
    request = serving.text_request([[["red pipette 1", "acme"], "blue flask"]], "recformer", 3)
    assert tf.make_ndarray(request.inputs["history_text"]).shape == (1, 2, 3)
    assert serving.predict_reply(predictor.predict(request)).item_ids[0]
    request = serving.text_request(
        [["blue flask"], ["red pipette 1", "acme", "Lab"]], "recformer", 3, signature_name="encode_items"
    )
    vectors = tf.make_ndarray(predictor.predict(request).outputs["embeddings"])
    assert vectors.shape[0] == 2 and np.isfinite(vectors).all()


def test_export_with_new_item_text_serves_the_new_items(trained, exported, data):
    base, _ = exported
    out = json.loads(
        _tfseqrec(
            "export",
            "--model-dir",
            trained[0],
            "--output",
            base,
            "--k",
            5,
            "--no-warmup",
            "--item-text",
            data / "New.item.json",
        ).stdout
    )
    assert out["version"] == 2 and out["num_items"] == 21 and out["added_items"] == 1
    predictor = serving.SavedModelPredictor(out["path"])
    history = {"history": np.array([["1"]], dtype=object), "k": np.array([20], np.int32)}
    served = {v.decode() for v in predictor.run("recommend_top_k", history)["item_ids"][0]}
    assert served == {str(i) for i in range(21)} - {"1"}  # the new item "20" among them


def test_fresh_process_loads_the_recformer_export(exported):
    script = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['serving_default'](history=tf.constant([['1', '2']]))\n"
        "print(json.dumps([v.decode() for v in out['item_ids'][0].numpy()]))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", script, os.path.join(exported[0], "1")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=300,
    )
    items = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(items) == 5 and not {"1", "2"} & set(items)


def test_the_kind_registry_recognises_a_recformer_directory(trained):
    kind = kinds.for_model_dir(str(trained[0]))
    model, vocabulary, _ = kinds.load(str(trained[0]))
    assert kind.name == "recformer" and kinds.for_model(model) is kind and vocabulary.num_items == 20
    assert isinstance(model, RecformerRecommender)


def test_training_targets_are_drawn_afresh_and_batches_grouped_by_width(loaded, data):
    recommender, vocabulary, info = loaded
    split, _, _ = splits.prepare(readers.read_interactions(data / "Tiny.inter.json"), vocabulary=vocabulary)
    assert recommender.pad_multiple == CONFIG["attention_window"] // 2
    config = training.RecformerConfig.from_dict(
        {**info["config"], "training_targets": "random", "batch_size": 4}
    )

    def epoch(ds):
        rows, widths = [], []
        for x, y in ds:
            widths.append(int(x["token_ids"].shape[1]))
            real = x["padding_mask"].numpy().sum(1)
            assert widths[-1] % recommender.pad_multiple == 0 or widths[-1] == CONFIG["max_tokens"]
            assert (
                real.max() <= widths[-1] and real.min() > widths[-1] - recommender.pad_multiple
            )  # one bucket
            rows += [(tuple(r), int(t)) for r, t in zip(x["token_ids"].numpy()[:, :1], y.numpy())]
        return [t for _, t in rows], widths

    ds = recformer_training.training_dataset(recommender, split.train, config)
    first, widths = epoch(ds)
    second, _ = epoch(ds)
    assert len(first) == len(second) == 30 and first != second  # one target per user, drawn each epoch
    assert epoch(recformer_training.training_dataset(recommender, split.train, config))[0] == first  # seeded
    assert len(set(widths)) > 1
    every = training.RecformerConfig.from_dict({**info["config"], "training_targets": "all"})
    assert len(epoch(recformer_training.training_dataset(recommender, split.train, every))[0]) == 30 * 3
    assert recformer_training.steps_per_epoch(recommender, split.train, every) >= -(-90 // every.batch_size)


def test_linear_schedule_runs_one_optimiser_over_both_stages(trained, data):
    recommender, vocabulary, info = kinds.load(trained[0])  # a copy: `loaded` stays as trained
    split, _, _ = splits.prepare(readers.read_interactions(data / "Tiny.inter.json"), vocabulary=vocabulary)
    config = training.RecformerConfig.from_dict(
        {**info["config"], "learning_rate_schedule": "linear", "warmup_share": 0.25, "learning_rate": 1e-3}
    )
    rows = recformer_training.finetune(recommender, split, config, verbose=0)
    batches = sum(1 for _ in recformer_training.training_dataset(recommender, split.train, config))
    optimizer, steps = recommender.model.optimizer, int(recommender.model.optimizer.iterations)
    # Stage 2 went on with stage 1's optimiser (Keras also counts the step that finds an epoch's data spent).
    assert [r["stage"] for r in rows] == [1, 2] and 2 * batches <= steps <= 2 * (batches + 1)
    planned = 2 * recformer_training.steps_per_epoch(recommender, split.train, config)
    warmup = int(0.25 * planned)
    by_hand = 1e-3 * (planned - steps) / (planned - warmup)  # linear decay, past the warm-up
    assert float(optimizer.learning_rate) == pytest.approx(by_hand, rel=1e-5)


def test_text_report_counts_items_that_share_their_text():
    config = training.RecformerConfig(attributes=["title", "categories"], common_value_share=0.9)
    texts = np.array(
        [["", ""]] * vocab_lib.NUM_RESERVED + [["pen", "Lab,Pens"], ["pen", "Lab,Pens"], ["ink", "Lab"]],
        dtype=object,
    )
    tokens = tf.ragged.constant(
        [[]] * vocab_lib.NUM_RESERVED + [[5, 6], [5, 6], [7]], dtype=tf.int64, ragged_rank=1
    )
    report = recformer_training.text_report(config, texts, tokens)
    assert report["items_sharing_their_text"] == 2 and report["dropped_values"] == {"categories": ["Lab"]}
    assert report["tokens_per_item"] == {"mean": pytest.approx(5 / 3), "max": 2}


def test_cached_lower_layers_train_export_and_serve_text_as_in_process(data, tmp_path):
    # No alignment stage: test_alignment_spreads_the_cls_vectors_without_interactions has it.
    config = {
        **CONFIG,
        "num_layers": 2,
        "cached_layers": 1,
        "epochs": 1,
        "stage2_epochs": 0,
        "align_epochs": 0,
    }
    model_dir, result = train_text_model("recformer", data, tmp_path / "model", config)
    recommender, vocabulary, info = kinds.load(model_dir)
    assert info["config"]["cached_layers"] == 1 and recommender.state_cache is not None
    assert 0.0 <= result["ndcg@10"] <= 1.0
    out = json.loads(
        _tfseqrec(
            "export", "--model-dir", model_dir, "--output", tmp_path / "served", "--k", 5, "--no-warmup"
        ).stdout
    )
    # The export computes item states per request: no catalogue-sized table in the SavedModel.
    assert tuple(recommender.state_cache[1].shape) not in _graph_constant_shapes(out["path"])
    predictor = serving.SavedModelPredictor(out["path"])
    ids = [[int(i) for i in vocabulary.lookup(["1", "2", "3"])]]
    top, scores = recommender.recommend(ids, k=5, exclude_seen=False)
    raw_text = readers.read_item_text(data / "Tiny.item.json")
    text = np.array(
        [[[raw_text[i][a] for a in info["config"]["attributes"]] for i in ("1", "2", "3")]], dtype=object
    )
    by_text = predictor.run("recommend_texts", {"history_text": text})
    assert [v.decode() for v in by_text["item_ids"][0]] == vocabulary.to_raw(top[0])
    np.testing.assert_allclose(by_text["scores"][0], scores[0], atol=1e-4)


def _graph_constant_shapes(saved_model_dir):
    """Shapes of every constant in a SavedModel's graphs and functions."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    shapes = set()
    for graph in proto.meta_graphs:
        nodes = list(graph.graph_def.node) + [n for f in graph.graph_def.library.function for n in f.node_def]
        shapes |= {
            tuple(d.size for d in n.attr["value"].tensor.tensor_shape.dim) for n in nodes if n.op == "Const"
        }
    return shapes


def test_default_attributes_follow_what_the_items_carry(tmp_path):
    amazon = tmp_path / "Shop.item.json"
    amazon.write_text(
        json.dumps({"1": {"title": "pen", "description": "a pen", "brand": "acme", "categories": "Lab"}})
    )
    movies = tmp_path / "ml.item.json"  # what 'tfseqrec data item-text movies.dat' writes
    movies.write_text(json.dumps({"1": {"title": "Heat (1995)", "genres": "Action, Crime"}}))
    titles = tmp_path / "titles.item.json"
    titles.write_text(json.dumps({"1": {"title": "pen"}}))
    dat = tmp_path / "movies.dat"
    dat.write_text("1::Heat (1995)::Action|Crime\n", encoding="latin-1")
    assert recformer_training.default_attributes(amazon) == ["title", "brand", "categories"]
    assert recformer_training.default_attributes(movies) == ["title", "genres"]
    assert recformer_training.default_attributes(dat) == ["title", "genres"]
    assert recformer_training.default_attributes(titles) == ["title", "brand", "categories"]


def test_the_report_puts_the_model_beside_its_export(trained, exported, data, tmp_path):
    models = report_beside_export(trained[0], exported[1]["path"], data, tmp_path / "report.html")
    for key in ("ndcg@10", "hr@10", "coverage@10", "novelty@10"):
        assert models[1]["metrics"][key] == pytest.approx(models[0]["metrics"][key], abs=1e-5), key
    assert (tmp_path / "report.html").stat().st_size > 10_000
