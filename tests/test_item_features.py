"""Item attributes end to end: ``tfseqrec data item-features``, ``tfseqrec train --item-features``
for each id model, attributes alone (``use_id_embeddings: false``) through the SavedModel."""

import csv
import json

import numpy as np
import pytest
import tensorflow as tf

import tfseqrec
from tests.test_cli import _tfseqrec
from tfseqrec.data import vocab

TINY = ["--epochs", "1", "--hidden-dim", "8", "--num-heads", "1", "--num-layers", "1", "--quiet"]


@pytest.fixture(scope="module")
def features_file(data_root, tmp_path_factory):
    path = tmp_path_factory.mktemp("features") / "ml100k.csv"
    out = json.loads(
        _tfseqrec("data", "item-features", data_root / "ml-100k" / "u.item", "--output", path).stdout
    )
    assert out == {"output": str(path), "items": 1682, "columns": ["genres", "year"]}
    return path


def test_the_movielens_attributes_are_genres_and_year(features_file):
    with open(features_file, newline="") as f:
        rows = {row["item_id"]: row for row in csv.DictReader(f)}
    assert rows["1"] == {"item_id": "1", "genres": "Animation|Children's|Comedy", "year": "1995"}


@pytest.mark.parametrize("model", ["sasrec", "bert4rec", "hstu"])
def test_each_id_model_trains_with_attributes_beside_ids(data_root, features_file, tmp_path, model):
    out = tmp_path / model
    done = _tfseqrec(
        "train", "--model", model, "--data", data_root / "ml-100k", "--item-features", features_file,
        "--output", out, *TINY,
    )  # fmt: skip
    assert json.loads(done.stdout)["num_users"] == 943
    assert "genres (multi), year (numeric); 1,682 of 1,682 items have a row" in done.stderr
    recorded = json.loads((out / "item_features.json").read_text())
    assert recorded["kinds"] == {"genres": "multi", "year": "numeric"}
    trained, _, _ = tfseqrec.load(str(out))
    backbone = trained.backbone
    # Input and scoring read the same item vectors: the id embedding plus the attributes',
    # which SASRec weighs 10 / (10 + events) and BERT4Rec and HSTU fully.
    weights = np.ones(vocab.NUM_RESERVED + 1682)
    if model == "sasrec":
        # Training counted each item's events: all of the log's but each user's last two.
        counts = np.asarray(backbone.item_counts.embeddings)[:, 0]
        assert counts.sum() == 100_000 - 2 * 943 and counts[: vocab.NUM_RESERVED].sum() == 0
        weights = 10.0 / (10.0 + counts)
    else:
        assert backbone.item_counts is None
    expected = np.asarray(backbone.item_embedding.embeddings) + weights[:, None] * np.asarray(
        backbone.feature_embedding.table()
    )
    if getattr(backbone, "temperature", None) is not None:  # HSTU scores with unit-length rows
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    table, _ = backbone.output_table()
    np.testing.assert_allclose(np.asarray(table), expected[vocab.NUM_RESERVED :], rtol=1e-5, atol=1e-6)


def test_an_item_weighs_its_attributes_less_the_more_it_was_trained_on():
    spec = {"genre": {"kind": "multi", "values": 6, "width": 2}}
    genres = np.array([[0, 0], [0, 0], [0, 0], [3, 0], [4, 5], [3, 4]])  # 3 reserved ids, 3 items
    model = tfseqrec.SASRec(
        num_items=3, max_sequence_length=4, hidden_dim=8, item_features=spec,
        item_feature_tables={"genre": genres}, item_counts=[0, 0, 0, 10, 0, 30],
    )  # fmt: skip
    backbone = model.backbone
    ids = np.array([[0, 3, 4, 5]])
    # By hand: k / (k + events) with k = 10 is 1/2, 1 (never trained on) and 1/4.
    expected = np.asarray(backbone.item_embedding(ids)) + np.array([1.0, 0.5, 1.0, 0.25])[
        None, :, None
    ] * np.asarray(backbone.feature_embedding(ids))
    np.testing.assert_allclose(np.asarray(backbone.lookup_items(ids)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(backbone.item_table())[3:], expected[0, 1:], rtol=1e-6)
    # Items added later have no events: their attributes weigh fully; the others keep their counts.
    grown = model.with_items(4, item_feature_tables={"genre": np.concatenate([genres, [[5, 0]]])})
    assert np.asarray(grown.backbone.item_counts.embeddings)[:, 0].tolist() == [0, 0, 0, 10, 0, 30, 0]
    # Shrinkage 0 weighs every item's attributes fully, as BERT4Rec and HSTU do by default.
    full = tfseqrec.SASRec(
        num_items=3, max_sequence_length=4, hidden_dim=8, item_features=spec,
        item_feature_tables={"genre": genres}, attribute_shrinkage=0,
    )  # fmt: skip
    assert full.backbone.item_counts is None
    with pytest.raises(ValueError, match="one per id"):
        backbone.set_item_counts([1, 2, 3])


def test_attributes_alone_serve_items_never_trained_on(data_root, features_file, tmp_path):
    # Training never sees items 1601..1682; the export adds them by their attributes.
    log = tmp_path / "ml-100k" / "u.data"
    log.parent.mkdir()
    lines = (data_root / "ml-100k" / "u.data").read_text().splitlines()
    log.write_text("".join(f"{line}\n" for line in lines if int(line.split("\t")[1]) <= 1600))
    out, base = tmp_path / "model", tmp_path / "export"
    _tfseqrec(
        "train", "--model", "sasrec", "--data", log, "--item-features", features_file,
        "--output", out, "--config", '{"use_id_embeddings": false}', *TINY,
    )  # fmt: skip
    exported = json.loads(
        _tfseqrec("export", "--model-dir", out, "--output", base, "--item-features", features_file).stdout
    )
    assert exported["added_items"] == 1682 - len(
        {line.split("\t")[1] for line in log.read_text().splitlines()}
    )
    served = tf.saved_model.load(exported["path"]).signatures["recommend_top_k"]
    answer = served(history=tf.constant([["50", "172", "133"]]), k=tf.constant([exported["num_items"]]))
    scores = dict(zip((i.decode() for i in answer["item_ids"].numpy()[0]), answer["scores"].numpy()[0]))
    assert {str(i) for i in range(1601, 1683)} <= set(scores)  # the new items are ranked too
    # Without ids an item is its attributes: items with the same genres and year score the same,
    # whether training saw them or not.
    with open(features_file, newline="") as f:
        by_attributes = {}
        for row in csv.DictReader(f):
            by_attributes.setdefault((row["genres"], row["year"]), []).append(row["item_id"])
    twins = [ids for ids in by_attributes.values() if len(ids) > 1 and all(i in scores for i in ids)]
    mixed = [ids for ids in twins if min(map(int, ids)) <= 1600 < max(map(int, ids))]
    assert mixed
    for ids in mixed[:20] + twins[:20]:
        assert max(scores[i] for i in ids) - min(scores[i] for i in ids) < 1e-4 * (1 + abs(scores[ids[0]]))


def test_bad_uses_are_refused(data_root, features_file, tmp_path):
    text_model = _tfseqrec(
        "train", "--model", "unisrec", "--data", data_root / "ml-100k", "--item-text",
        data_root / "ml-100k" / "u.item", "--item-features", features_file, "--output", tmp_path / "u",
        check=False,
    )  # fmt: skip
    assert text_model.returncode == 1 and "--item-features is for the id models" in text_model.stderr
    other = tmp_path / "other.csv"
    other.write_text("item_id,brand\nB0001,a\nB0002,b\n")  # another catalogue's ids
    mismatched = _tfseqrec(
        "train", "--data", data_root / "ml-100k", "--item-features", other, "--output", tmp_path / "s",
        *TINY, check=False,
    )  # fmt: skip
    assert mismatched.returncode == 1 and "none of the 2 items of the file" in mismatched.stderr
    assert not (tmp_path / "s").exists()
    ids_only = _tfseqrec(
        "train", "--data", data_root / "ml-100k", "--config", '{"use_id_embeddings": false}',
        "--output", tmp_path / "n", *TINY, check=False,
    )  # fmt: skip
    assert ids_only.returncode == 1 and "use_id_embeddings=False needs item_features" in ids_only.stderr


def test_export_refuses_attributes_for_a_model_trained_without_them(data_root, features_file, tmp_path):
    out = tmp_path / "ids"
    _tfseqrec("train", "--data", data_root / "ml-100k", "--output", out, *TINY)
    refused = _tfseqrec(
        "export",
        "--model-dir",
        out,
        "--output",
        tmp_path / "e",
        "--item-features",
        features_file,
        check=False,
    )
    assert refused.returncode == 1 and "was trained without item attributes" in refused.stderr
    assert not (tmp_path / "e").exists()
