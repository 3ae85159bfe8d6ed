"""Serving edge cases: padding that cannot collide with an item, strict JSON, empty histories."""

import json

import numpy as np
import pytest

import tfseqrec
from tfseqrec import cli, export, kinds, serving, training

TINY = {"max_sequence_length": 10, "hidden_dim": 8, "batch_size": 128, "epochs": 1}


@pytest.fixture(scope="module")
def trained(data_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("serving") / "model"
    training.train(kinds.get("sasrec"), data_root / "ml-100k", out, TINY, verbose=0)
    model, vocabulary, _ = tfseqrec.load(out)
    path, _ = export.export_version(
        kinds.for_model(model), model, vocabulary, str(out.parent / "export"), warmup=False
    )
    return out, path, vocabulary


@pytest.mark.parametrize(
    "raw, integer",
    [
        ("0", True),
        ("42", True),
        ("-1", False),
        ("007", False),
        ("9223372036854775808", False),
        ("9223372036854775807", True),
        ("123456789012345678901234567890", False),
        ("1e3", False),
    ],
)
def test_which_raw_ids_make_an_integer_vocabulary(raw, integer):
    assert export.module._integer_id(raw) is integer


def test_int_padding_is_refused_as_an_item_id():
    with pytest.raises(
        ValueError, match=r"takes item ids in \[0, 2\*\*63\); got -1 \(a negative id is padding\)"
    ):
        serving.pad_histories([[5, -1]], "recommend_ids")
    assert serving.pad_histories([[5], [6, 7]], "recommend_ids").tolist() == [[5, -1], [6, 7]]


def test_recommend_json_is_strict_json_when_k_exceeds_the_unseen_items(trained, capsys):
    out, _, vocabulary = trained
    history = " ".join(vocabulary.items[:3])
    assert (
        cli.main(["recommend", "--model-dir", str(out), "--history", history, "--k", "5000", "--json"]) == 0
    )
    reply = json.loads(
        capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")
    )
    # Only the unseen items come back (issue 39: the seen ones used to follow with null scores).
    assert len(reply["item_ids"]) == vocabulary.num_items - 3
    assert None not in reply["scores"] and not set(reply["item_ids"]) & set(history.split())
    assert all(isinstance(s, float) for s in reply["scores"][:-3])


def test_empty_history_gets_popularity_in_the_cli_as_in_the_export(trained, capsys):
    out, path, vocabulary = trained
    assert (
        cli.main(["recommend", "--model-dir", str(out), "--history", "not-an-item", "--k", "10", "--json"])
        == 0
    )
    captured = capsys.readouterr()
    assert "most popular items" in captured.err
    from_cli = json.loads(captured.out)["item_ids"]
    predictor = serving.SavedModelPredictor(path)
    served = predictor.run("serving_default", {"history": np.array([[b""]], dtype=object)})
    assert [i.decode() for i in served["item_ids"][0]] == from_cli
    by_count = sorted(range(vocabulary.num_items), key=lambda i: (-vocabulary.counts[i], i))[:10]
    assert from_cli == [vocabulary.items[i] for i in by_count]  # independent oracle: sort by count


def test_unknown_signature_is_a_clear_error(trained):
    predictor = serving.SavedModelPredictor(trained[1])
    with pytest.raises(ValueError, match=r"no signature 'nope'; the export has \["):
        predictor.predict_json({"signature_name": "nope", "instances": [["1"]]})
