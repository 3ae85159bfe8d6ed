"""UniSRec end to end: CLI training over item text, the SavedModel's id and text signatures, new items."""

import json
import os

import numpy as np
import pytest

from tests.test_case import report_beside_export, train_text_model
from tests.test_cli import _tfseqrec
from tfseqrec import evaluation, export, kinds, serving
from tfseqrec.data import readers, splits
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.models import UniSRec

CONFIG = {"hidden_dim": 8, "max_sequence_length": 5, "epochs": 3, "max_attribute_tokens": 6}
ATTRIBUTES = ["title", "brand", "categories"]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    return train_text_model("unisrec", data, tmp_path_factory.mktemp("unisrec") / "model", CONFIG)


@pytest.fixture(scope="module")
def loaded(trained):
    return kinds.load(str(trained[0]))


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    base = tmp_path_factory.mktemp("served") / "unisrec"
    out = json.loads(_tfseqrec("export", "--model-dir", trained[0], "--output", base, "--k", 5).stdout)
    return base, out


def _text(data, raw_ids):
    raw_text = readers.read_item_text(data / "Tiny.item.json")
    return np.array([[raw_text[i][a] for a in ATTRIBUTES] for i in raw_ids], dtype=object)


def test_cli_trains_over_text_vectors_and_the_directory_reloads(trained, loaded, data):
    model_dir, result = trained
    assert result["num_users"] == 30 and result["epochs"] == 3 and 0.0 <= result["ndcg@10"] <= 1.0
    assert {"model.keras", "item_vocab.tsv", "item_text.json", "train_config.json"} <= set(
        os.listdir(model_dir)
    )
    model, vocabulary, info = loaded
    assert isinstance(model, UniSRec) and kinds.for_model(model).name == "unisrec"
    assert info["config"]["attributes"] == ATTRIBUTES and info["item_text"].endswith("Tiny.item.json")
    assert model.backbone.text_encoder == {
        "attributes": ATTRIBUTES,
        "max_attribute_tokens": 6,
        "num_layers": 6,
    }
    assert (
        model.backbone.text_dim == 384 and not model.backbone.use_id_embeddings
    )  # the kind's default: text only
    # The frozen table holds unit vectors (mean-pooled MiniLM), one per item.
    table = np.asarray(model.backbone.text_embedding.embeddings)[vocab_lib.NUM_RESERVED :]
    np.testing.assert_allclose(np.linalg.norm(table, axis=1), 1.0, atol=1e-5)
    split, _, _ = splits.prepare(readers.read_interactions(data / "Tiny.inter.json"), vocabulary=vocabulary)
    again = evaluation.evaluate(model, split.test, progress=False)
    assert again["ndcg@10"] == pytest.approx(result["ndcg@10"], abs=1e-6)


def test_unisrec_refuses_to_train_without_item_text(data, tmp_path):
    result = _tfseqrec(
        "train",
        "--model",
        "unisrec",
        "--data",
        data / "Tiny.inter.json",
        "--output",
        tmp_path / "m",
        check=False,
    )
    assert result.returncode == 1 and "--item-text" in result.stderr


def test_text_signatures_answer_as_the_id_signatures(exported, loaded, data):
    """Text only: a history given by its items' text is the history given by their ids."""
    model, vocabulary, _ = loaded
    _, out = exported
    assert set(out["signatures"]) == set(export.SIGNATURES) | set(export.TEXT_SIGNATURES)
    predictor = serving.SavedModelPredictor(out["path"])
    raw = ["1", "2", "3"]
    ids = [int(i) for i in vocabulary.lookup(raw)]
    top, scores = model.recommend([ids], k=5, exclude_seen=False)
    by_text = predictor.run("recommend_texts", {"history_text": _text(data, raw)[None]})
    assert [v.decode() for v in by_text["item_ids"][0]] == vocabulary.to_raw(top[0])
    np.testing.assert_allclose(by_text["scores"][0], scores[0], atol=1e-4)
    by_ids = predictor.run("serving_default", {"history": np.array([raw], dtype=object)})
    seen_filtered, filtered_scores = model.recommend([ids], k=5)
    assert [v.decode() for v in by_ids["item_ids"][0]] == vocabulary.to_raw(seen_filtered[0])
    np.testing.assert_allclose(by_ids["scores"][0], filtered_scores[0], atol=1e-5)
    vectors = predictor.run("encode_items", {"item_text": _text(data, raw)})["embeddings"]
    table = np.asarray(model.output_table()[0])
    np.testing.assert_allclose(vectors, table[np.array(ids) - vocab_lib.NUM_RESERVED], atol=1e-4)


def test_text_padding_and_empty_requests_never_error(exported):
    predictor = serving.SavedModelPredictor(exported[1]["path"])
    padded = np.array(
        [[["", "", ""], ["red pipette 1", "acme", ""]], [["", "", ""], ["", "", ""]]], dtype=object
    )
    out = predictor.run("recommend_texts", {"history_text": padded})
    assert out["item_ids"].shape == (2, 5) and np.isfinite(out["scores"]).all()
    popular = predictor.run("serving_default", {"history": np.array([[""]], dtype=object)})
    assert out["item_ids"][1].tolist() == popular["item_ids"][0].tolist()
    nothing = predictor.run("recommend_texts", {"history_text": np.zeros((1, 0, 3), dtype=object)})
    assert nothing["item_ids"][0].tolist() == popular["item_ids"][0].tolist()
    narrow = predictor.run("encode_items", {"item_text": np.array([["blue flask"]], dtype=object)})
    assert narrow["embeddings"].shape == (1, 8)


def test_warmup_records_answer(exported):
    path = exported[1]["path"]
    predictor = serving.SavedModelPredictor(path)
    logs = export.read_warmup_requests(path)
    names = {log.predict_log.request.model_spec.signature_name for log in logs}
    assert names == set(export.SIGNATURES) | set(export.TEXT_SIGNATURES)
    for log in logs:
        reply = predictor.predict(log.predict_log.request)
        assert reply.outputs


def test_export_with_new_item_text_serves_the_new_items_by_their_text(trained, exported, loaded, data):
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
    served = predictor.run("recommend_top_k", history)
    assert {v.decode() for v in served["item_ids"][0]} == {str(i) for i in range(21)} - {"1"}
    # The new item's score is its encoded text's cosine with the history: as if it had been there.
    new_text = np.array(
        [[readers.read_item_text(data / "New.item.json")["20"][a] for a in ATTRIBUTES]], dtype=object
    )
    vector = predictor.run("encode_items", {"item_text": new_text})["embeddings"][0]
    model, vocabulary, _ = loaded
    hidden = np.asarray(model(np.array([[int(vocabulary.lookup(["1"])[0])]])))[0, -1]
    position = [v.decode() for v in served["item_ids"][0]].index("20")
    assert served["scores"][0][position] == pytest.approx(float(vector @ hidden), abs=1e-4)


@pytest.mark.primary  # the report's path, the same on both stacks; the export's answers are tested there
def test_the_report_puts_the_model_beside_its_export(trained, exported, data, tmp_path):
    models = report_beside_export(trained[0], exported[1]["path"], data, tmp_path / "report.html")
    for key in ("ndcg@10", "hr@10", "coverage@10", "novelty@10"):
        assert models[1]["metrics"][key] == pytest.approx(models[0]["metrics"][key], abs=1e-5), key
    assert (tmp_path / "report.html").stat().st_size > 10_000
