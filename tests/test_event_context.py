"""Event context end to end: ``tfseqrec train --event-features`` for each id model, ``evaluate``
with the model's values, and the SavedModel's signatures taking ``event_<column>`` beside history."""

import json

import numpy as np
import pytest
import tensorflow as tf

import tfseqrec
from tests.test_cli import _tfseqrec
from tfseqrec import bulk, evaluation, export, kinds, serving
from tfseqrec.data import events, tfrecord, vocab
from tfseqrec.training import id_models

TINY = ["--epochs", "1", "--hidden-dim", "8", "--num-heads", "1", "--num-layers", "1", "--quiet"]
TINY += ["--max-sequence-length", "12"]
HISTORIES = [["50", "172", "133"], ["1", "2", "3", "4", "5", "6", "7"], ["181"]]
RATINGS = [["5", "4", "1"], ["1", "2", "3", "4", "5", "4", "3"], ["2"]]


@pytest.fixture(scope="module")
def trained(data_root, tmp_path_factory):
    """A tiny SASRec on ml-100k reading each event's rating: ``(model_dir, train's JSON)``."""
    out = tmp_path_factory.mktemp("context") / "sasrec"
    done = _tfseqrec(
        "train", "--model", "sasrec", "--data", data_root / "ml-100k", "--event-features", "rating",
        "--output", out, *TINY,
    )  # fmt: skip
    return out, json.loads(done.stdout)


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    base = tmp_path_factory.mktemp("saved_models") / "ml100k"
    return json.loads(_tfseqrec("export", "--model-dir", trained[0], "--output", base, "--k", "5").stdout)


def test_the_model_holds_the_training_values_and_evaluate_reads_them(trained, data_root):
    model_dir, result = trained
    model, _, info = kinds.load(model_dir)
    assert info["config"]["event_features"] == ["rating"]
    assert sorted(model.event_features["rating"]) == ["1", "2", "3", "4", "5"]
    evaluated = json.loads(
        _tfseqrec("evaluate", "--model-dir", model_dir, "--data", data_root / "ml-100k").stdout
    )
    assert evaluated["ndcg@10"] == pytest.approx(result["ndcg@10"], abs=1e-9)


@pytest.mark.parametrize("model", ["bert4rec"])  # HSTU's context: test_the_context_reaches_the_prediction
def test_bert4rec_trains_with_context(data_root, tmp_path, model):
    out = tmp_path / model
    done = _tfseqrec(
        "train", "--model", model, "--data", data_root / "ml-100k", "--event-features", "rating",
        "--output", out, *TINY,
    )  # fmt: skip
    assert json.loads(done.stdout)["num_users"] == 943
    trained, _, _ = kinds.load(out)
    assert trained.backbone.event_embedding is not None


def test_context_reaches_the_model_only_at_real_events():
    ids = np.array([[0, 0, 3, 4, 5]])
    for cls in (tfseqrec.SASRec, tfseqrec.BERT4Rec, tfseqrec.HSTU):
        model = cls(num_items=4, max_sequence_length=5, hidden_dim=8, num_layers=1, event_features={"t": 6})
        base = np.asarray(model.score({"item_ids": ids, "event_t": np.array([[3, 3, 3, 4, 5]])}))
        padded = np.asarray(model.score({"item_ids": ids, "event_t": np.array([[5, 4, 3, 4, 5]])}))
        real = np.asarray(model.score({"item_ids": ids, "event_t": np.array([[3, 3, 5, 4, 5]])}))
        np.testing.assert_array_equal(base, padded)  # a padded slot's context is ignored
        assert np.abs(base - real).max() > 0, cls.__name__
        with pytest.raises(ValueError, match="event_t"):
            model.score({"item_ids": ids})
    # BERT4Rec's inference [MASK] has no context; the history's moves with its items.
    bert = tfseqrec.BERT4Rec(num_items=4, max_sequence_length=4, hidden_dim=8, event_features={"t": 6})
    shifted = bert.inference_inputs({"item_ids": np.array([[3, 4, 5]]), "event_t": np.array([[3, 4, 5]])})
    assert np.asarray(shifted["item_ids"]).tolist() == [[3, 4, 5, vocab.MASK_ID]]
    assert np.asarray(shifted["event_t"]).tolist() == [[3, 4, 5, 0]]


def test_every_history_signature_takes_the_context(exported, trained):
    signatures = exported["signatures"]
    assert signatures["predict_examples"]["inputs"] == {"examples": "string"}  # records carry it
    for name in ("serving_default", "recommend_ids", "recommend_top_k", "rank_targets"):
        assert signatures[name]["inputs"]["event_rating"] == "string", name


def test_answers_equal_the_in_memory_model_given_the_same_context(exported, trained):
    model, vocabulary, _ = kinds.load(trained[0])
    slots = events.EventVocabulary.of_model(model)
    predictor = serving.SavedModelPredictor(exported["path"])
    request = {
        "history": serving.pad_histories(HISTORIES),
        "event_rating": serving.pad_events(HISTORIES, RATINGS),
    }
    answer = predictor.run("serving_default", request)
    # The oracle: the in-memory model, given the slots of the same values.
    ids = [vocabulary.lookup(h).tolist() for h in HISTORIES]
    context = [slots.encode({"rating": np.array(r, object)})["rating"].tolist() for r in RATINGS]
    top, scores = model.recommend(ids, k=5, events={"rating": context})
    assert [[i.decode() for i in row] for row in answer["item_ids"]] == [vocabulary.to_raw(r) for r in top]
    np.testing.assert_allclose(answer["scores"], scores, rtol=1e-5, atol=1e-5)
    # The context is live: other ratings, other scores.
    other = predictor.run(
        "serving_default",
        {**request, "event_rating": serving.pad_events(HISTORIES, [["1"] * len(h) for h in HISTORIES])},
    )
    assert np.abs(other["scores"] - answer["scores"]).max() > 0
    # gRPC requests carry it; a request without it, or shaped unlike the history, fails.
    reply = serving.predict_reply(
        predictor.predict(serving.predict_request(HISTORIES, "m", events={"rating": RATINGS}))
    )
    assert reply.item_ids == [[i.decode() for i in row] for row in answer["item_ids"]]
    with pytest.raises(ValueError, match="event_rating"):
        predictor.run("serving_default", {"history": request["history"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="event_rating must have the shape of history"):
        predictor.run("serving_default", {**request, "event_rating": request["event_rating"][:, :2]})
    with pytest.raises(ValueError, match="3 items but 2 values"):
        serving.pad_events(HISTORIES[:1], [["5", "4"]], "rating")
    # Records with the raw values of the context (the SequenceBuilder's) get the same answer.
    records = [
        tfrecord.make_example(f"u{n}", vocabulary.lookup(h), h, events={"rating": r}).SerializeToString()
        for n, (h, r) in enumerate(zip(HISTORIES, RATINGS))
    ]
    from_records = predictor.run("predict_examples", {"examples": np.array(records, object)})
    assert from_records["item_ids"].tolist() == answer["item_ids"].tolist()
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"event_rating.{1,3} feature with one value per item"
    ):
        bare = tfrecord.make_example("u", vocabulary.lookup(HISTORIES[0]), HISTORIES[0]).SerializeToString()
        predictor.run("predict_examples", {"examples": np.array([bare], object)})


def test_warmup_requests_carry_the_context_and_are_answered(exported):
    predictor = serving.SavedModelPredictor(exported["path"])
    logs = export.read_warmup_requests(exported["path"])
    assert {log.predict_log.request.model_spec.signature_name for log in logs} == set(exported["signatures"])
    for log in logs:
        request = log.predict_log.request
        if request.model_spec.signature_name == "predict_examples":  # records carrying the context
            records = [tf.train.Example.FromString(r) for r in tf.make_ndarray(request.inputs["examples"])]
            for r in records:  # a value per item (a warm-up history may be empty)
                items = r.features.feature["items"].bytes_list.value
                assert len(r.features.feature["event_rating"].bytes_list.value) == len(items)
            assert any(r.features.feature["items"].bytes_list.value for r in records)
        else:
            history, context = (tf.make_ndarray(request.inputs[key]) for key in ("history", "event_rating"))
            assert context.shape == history.shape
        assert predictor.predict(request).outputs


def test_bad_uses_are_refused(data_root, trained, tmp_path):
    bad = _tfseqrec(
        "train", "--model", "sasrec", "--data", data_root / "ml-100k", "--event-features", "device",
        "--output", tmp_path / "m", *TINY, check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "u.data:1: missing event column(s) ['device']" in bad.stderr
    assert not (tmp_path / "m").exists()
    plain = tfseqrec.SASRec(num_items=4, max_sequence_length=5, hidden_dim=8)
    with pytest.raises(ValueError, match="trained without event features"):
        plain.score({"item_ids": np.array([[0, 3]]), "event_rating": np.array([[0, 3]])})
    with pytest.raises(ValueError, match="does not read event context"):
        plain.recommend([[3]], events={"rating": [[3]]})


def test_cli_recommend_takes_the_context_and_agrees_with_the_export(exported, trained):
    model_dir = trained[0]
    history, ratings = " ".join(HISTORIES[0]), " ".join(RATINGS[0])
    answer = json.loads(
        _tfseqrec("recommend", "--model-dir", model_dir, "--history", history, "--event", f"rating={ratings}",
                  "--k", "5", "--json").stdout
    )  # fmt: skip
    served = serving.SavedModelPredictor(exported["path"]).run(
        "serving_default",
        {
            "history": serving.pad_histories(HISTORIES[:1]),
            "event_rating": serving.pad_events(HISTORIES[:1], RATINGS[:1]),
        },
    )
    assert answer["item_ids"] == [i.decode() for i in served["item_ids"][0]]
    np.testing.assert_allclose(answer["scores"], served["scores"][0], rtol=1e-5, atol=1e-5)
    missing = _tfseqrec("recommend", "--model-dir", model_dir, "--history", history, check=False)
    assert missing.returncode != 0 and '--event rating="v1 v2 ..."' in missing.stderr


def _cue_log(path, users=300, items=50, length=12, seed=0):
    """A log whose next item is named by the previous event's context (``cue``): ids alone
    cannot predict it, the context tells it exactly."""
    rng = np.random.default_rng(seed)
    rows = ["user_id,item_id,timestamp,cue"]
    for u in range(users):
        item = rng.integers(items)
        for t in range(length):
            cue = rng.integers(items)
            rows.append(f"u{u},i{item},{t},c{cue}")
            item = cue
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("model", ["sasrec", "hstu"])
def test_the_context_reaches_the_prediction(tmp_path, model):
    log = _cue_log(tmp_path / "cue.csv")
    scores = {}
    for columns in (None, ["cue"]):
        config = {"model": model, "epochs": 15, "hidden_dim": 16, "num_layers": 1, "event_features": columns}
        trained, _, split, _ = id_models.train(
            kinds.get(model), log, tmp_path / f"{model}-{columns}", config, verbose=0
        )
        scores[bool(columns)] = evaluation.evaluate(trained, split.test, progress=False)["ndcg@10"]
    assert scores[False] < 0.3 and scores[True] > 0.9, scores


def test_a_text_model_refuses_event_context(data_root, tmp_path):
    refused = _tfseqrec(
        "train", "--model", "unisrec", "--data", data_root / "ml-100k", "--item-text", data_root / "ml-100k" / "u.item",
        "--event-features", "rating", "--output", tmp_path / "m", check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "unisrec reads no event context" in refused.stderr


def test_every_user_of_the_log_with_its_context(trained, data_root, tmp_path):
    model, vocabulary, _ = kinds.load(trained[0])
    histories = list(bulk.read_histories(data_root / "ml-100k" / "u.data", model))
    assert len(histories) == 943 and len(histories[0].events["rating"]) == len(histories[0].items)
    out = tmp_path / "recs.jsonl"
    bulk.recommend_file(model, vocabulary, histories[:3], out, k=5)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    slots = events.EventVocabulary.of_model(model)
    for history, row in zip(histories[:3], rows):
        context = slots.encode({"rating": np.asarray(history.events["rating"], object)})["rating"]
        top, _ = model.recommend(
            [vocabulary.lookup(history.items).tolist()], k=5, events={"rating": [context.tolist()]}
        )
        assert row["item_ids"] == vocabulary.to_raw(top[0])


def test_an_export_with_context_evaluates_as_its_model_does(exported, trained, data_root):
    """``evaluation.Exported`` asks the export with each case's raw ratings (the data's own slots
    decoded): its metrics are the in-memory model's, which reads the model's slots of them."""
    from tfseqrec import beyond_accuracy
    from tfseqrec.data import readers, splits

    model, vocabulary, _ = kinds.load(trained[0])
    log = readers.read_interactions(data_root / "ml-100k", event_columns=["rating"])
    own, _, _ = splits.prepare(
        log, vocabulary=vocabulary, event_vocabulary=events.EventVocabulary.of_model(model)
    )
    # The cases' slots in another order than the model's: only decoded values can agree.
    other = events.EventVocabulary({"rating": model.event_features["rating"][::-1]})
    data, _, _ = splits.prepare(log, vocabulary=vocabulary, event_vocabulary=other)
    served_model = evaluation.Exported(exported["path"])
    assert served_model.event_features == ["rating"] and not served_model.uses_timestamps
    rows = np.arange(150)
    with pytest.raises(ValueError, match="event_vocabulary"):
        evaluation.evaluate(served_model, data.test.select(rows), progress=False)
    served_model.event_vocabulary = other
    popularity = beyond_accuracy.ItemPopularity.of(own.train, vocabulary.num_items)
    options = {"ks": (10,), "progress": False, "metrics": "coverage,novelty", "popularity": popularity}
    served = evaluation.evaluate(served_model, data.test.select(rows), **options)
    library = evaluation.evaluate(model, own.test.select(rows), **options)
    for key in ("ndcg@10", "hr@10", "mrr", "coverage@10", "novelty@10"):
        assert served[key] == pytest.approx(library[key], abs=1e-6), key


@pytest.mark.primary  # the report's path: the same Python on both stacks (the export's answers are tested there)
def test_the_report_puts_the_model_beside_its_export(exported, trained, data_root, tmp_path):
    """``tfseqrec report`` on a run directory and its export, both reading ratings: the same figures."""
    done = _tfseqrec(
        "report", "--model-dir", trained[0], "--model-dir", exported["path"], "--data", data_root / "ml-100k",
        "--output", tmp_path / "report.html", "--sample", "2",
    )  # fmt: skip
    models = json.loads(done.stdout)["models"]
    assert len(models) == 2 and models[1]["label"].endswith(f"v{exported['version']}")
    for key in ("ndcg@10", "hr@10", "coverage@10", "novelty@10"):
        assert models[1]["metrics"][key] == pytest.approx(models[0]["metrics"][key], abs=1e-6), key
