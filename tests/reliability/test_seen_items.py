"""No seen item comes back as a recommendation, whatever k (issue 39).

``recommend`` returns only the items that can be recommended; the fixed-shape export
signatures pad with an id no item has ("" or -1) at ``-inf``. Checked against a NumPy
oracle (the model's scores, the history excluded, sorted) on a tiny model, through a real
SavedModel and the real command line; plus the serving inputs the exports refuse.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfseqrec import cli, serving
from tfseqrec.data import ItemVocabulary, vocab
from tfseqrec.export.module import PAD_INT_ID, PAD_RAW_ID, Recommender
from tfseqrec.models import SASRec

N = 6  # items
R = vocab.NUM_RESERVED
BIG = 2**31 - 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A SASRec over items "10".."15" (integer raw ids), and its export, saved and loaded."""
    root = tmp_path_factory.mktemp("seen")
    vocabulary = ItemVocabulary([str(10 + i) for i in range(N)], list(range(N, 0, -1)))
    path = vocabulary.save(str(root))
    keras.utils.set_random_seed(3)
    model = SASRec(num_items=N, max_sequence_length=8, hidden_dim=8)
    module = Recommender(model, vocabulary, path, k=4)
    tf.saved_model.save(module, str(root / "sm"), signatures=module.signatures())
    return model, vocabulary, tf.saved_model.load(str(root / "sm")).signatures


def oracle(model, history, k):
    """``(ids, scores)``: the model's scores of every item not in ``history``, best first, at most k."""
    window = np.array([[0] * (8 - len(history[-8:])) + history[-8:]], np.int32)
    scores = np.asarray(model.score(tf.constant(window)))[0].astype(np.float64)
    free = [c for c in range(N) if c + R not in history]
    order = sorted(free, key=lambda c: (-scores[c], c))[:k]
    return [c + R for c in order], scores[order]


HISTORIES = [[], [R], [R, R + 2, R + 4], [R + c for c in range(N - 1)], [R + c for c in range(N)]]


@pytest.mark.parametrize("history", HISTORIES)
@pytest.mark.parametrize("k", [1, 4, N + 10, BIG])
def test_recommend_returns_only_what_can_be_recommended(tiny, history, k):
    model, _, _ = tiny
    if not history:
        pytest.skip("an empty history is scored by popularity (the CLI and the exports)")
    ids, scores = model.recommend([history], k=k)
    want_ids, want_scores = oracle(model, history, k)
    assert ids.shape == (1, len(want_ids)) and scores.shape == ids.shape
    assert ids[0].tolist() == want_ids
    np.testing.assert_allclose(scores[0], want_scores, rtol=1e-5, atol=1e-6)
    assert not set(ids[0].tolist()) & set(history)


def test_recommend_pads_a_shorter_row_with_an_id_that_is_no_item(tiny):
    model, _, _ = tiny
    ids, scores = model.recommend([HISTORIES[3], HISTORIES[1], HISTORIES[4]], k=BIG)
    assert ids.shape == (3, N - 1)  # the widest row: all but the one seen item
    assert ids[0].tolist() == [R + N - 1, 0, 0, 0, 0]
    assert ids[1].tolist() == oracle(model, HISTORIES[1], BIG)[0]
    assert ids[2].tolist() == [0] * (N - 1)
    assert np.all(np.isneginf(scores[ids == vocab.PAD_ID]))
    assert np.all(np.isfinite(scores[ids != vocab.PAD_ID]))


def _raw(vocabulary, ids):
    return [vocabulary.items[i - R] for i in ids]


@pytest.mark.parametrize("history", HISTORIES[1:])
def test_every_export_signature_pads_with_no_item(tiny, history):
    model, vocabulary, signatures = tiny
    raw = _raw(vocabulary, history)
    request = tf.constant([raw + [""]], tf.string)  # padding anywhere is ignored
    for name, out, k in [
        ("serving_default", signatures["serving_default"](history=request), 4),
        ("recommend_top_k", signatures["recommend_top_k"](history=request, k=tf.constant([BIG])), N),
        ("recommend_top_k", signatures["recommend_top_k"](history=request, k=tf.constant([N + 10])), N),
    ]:
        want_ids, want_scores = oracle(model, history, k)
        items = [i.decode() for i in out["item_ids"].numpy()[0]]
        scores = out["scores"].numpy()[0]
        assert len(items) == k, name
        assert items == _raw(vocabulary, want_ids) + [PAD_RAW_ID] * (k - len(want_ids)), name
        np.testing.assert_allclose(scores[: len(want_ids)], want_scores, rtol=1e-5, atol=1e-6)
        assert np.all(np.isneginf(scores[len(want_ids) :])), name
        assert not set(items) & set(raw), name
    ints = tf.constant([[int(r) for r in raw] + [-1]], tf.int64)
    out = signatures["recommend_ids"](history=ints)
    want_ids, _ = oracle(model, history, 4)
    expected = [int(r) for r in _raw(vocabulary, want_ids)] + [PAD_INT_ID] * (4 - len(want_ids))
    assert out["item_ids"].numpy()[0].tolist() == expected


def test_rank_targets_is_unchanged_by_the_padding(tiny):
    model, vocabulary, signatures = tiny
    history = HISTORIES[4]  # the whole catalogue: the target alone stays a candidate
    out = signatures["rank_targets"](
        history=tf.constant([_raw(vocabulary, history)]), target=tf.constant([vocabulary.items[2]])
    )
    assert out["rank"].numpy().tolist() == [0] and out["known"].numpy().tolist() == [True]


def test_a_one_dimensional_history_names_the_shape_expected(tiny):
    _, vocabulary, signatures = tiny
    for name, history in [
        ("serving_default", tf.constant(vocabulary.items[:2])),
        ("recommend_ids", tf.constant([10, 11], tf.int64)),
    ]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"history \[2\] .*expected shape \[\?,\?\]"):
            signatures[name](history=history)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A SASRec trained by the command line on 40 users over 30 items."""
    root = tmp_path_factory.mktemp("seen_cli")
    lines = [f"{u}\t{(u + 2 * t) % 30}\t5\t{1000 + t}" for u in range(40) for t in range(25)]
    (root / "u.data").write_text("\n".join(lines) + "\n")
    config = json.dumps({"max_sequence_length": 10, "hidden_dim": 8, "batch_size": 64, "epochs": 1})
    argv = ["train", "--model", "sasrec", "--data", str(root / "u.data"), "--output", str(root / "m")]
    assert cli.main([*argv, "--config", config, "--quiet"]) == 0
    return root / "m"


def test_the_cli_returns_only_unseen_items_and_says_so(model_dir, capsys):
    capsys.readouterr()
    history = [str(i) for i in range(20)]
    argv = ["recommend", "--model-dir", str(model_dir), "--history", " ".join(history), "--k", "100000"]
    assert cli.main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    reply = json.loads(captured.out)
    assert len(reply["item_ids"]) == 10 and not set(reply["item_ids"]) & set(history)
    assert all(isinstance(s, float) for s in reply["scores"])  # no null: every slot is an item
    assert "10 item(s) can be recommended (the catalogue's 30 less the history), fewer than --k 100000" in (
        captured.err
    )
    assert cli.main([*argv[:-2], "--k", "10"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 10 and "can be recommended" not in captured.err
    every = " ".join(str(i) for i in range(30))
    assert cli.main(["recommend", "--model-dir", str(model_dir), "--history", every, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"item_ids": [], "scores": []}


@pytest.mark.parametrize("bad", [10**26, -(10**30), 2**63, 1.5, float("nan")])
def test_times_beyond_int64_are_refused_in_one_line(bad):
    with pytest.raises(ValueError, match=r"timestamps: .* is not a time in whole seconds within int64"):
        serving.pad_timestamps([[100, bad]])
    with pytest.raises(ValueError, match="within int64"):
        serving.rest_request([["a", "b"]], timestamps=[[100, bad]])
    assert serving.pad_timestamps([[2**63 - 1, -(2**63)]]).tolist() == [[2**63 - 1, -(2**63)]]


@pytest.mark.primary  # the command line's checks: the same Python on both stacks
def test_the_cli_refuses_timestamps_beyond_int64(model_dir, capsys):
    config = json.dumps(
        {"max_sequence_length": 10, "hidden_dim": 8, "num_heads": 1, "batch_size": 64, "epochs": 1}
    )
    data, out = model_dir.parent / "u.data", model_dir.parent / "hstu"
    argv = [
        "train",
        "--model",
        "hstu",
        "--data",
        str(data),
        "--output",
        str(out),
        "--config",
        config,
        "--quiet",
    ]
    assert cli.main(argv) == 0
    capsys.readouterr()
    argv = ["recommend", "--model-dir", str(out), "--history", "1 2"]
    assert cli.main([*argv, "--timestamps", "1000 100000000000000000000000000"]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "--timestamps: 100000000000000000000000000 is not a time in whole seconds" in err
    )
    assert cli.main([*argv, "--timestamps", "1000 1001"]) == 0


def test_the_reply_helpers_drop_the_padding(tiny):
    _, vocabulary, signatures = tiny
    request = tf.constant([vocabulary.items[:5], vocabulary.items[:1] + [""] * 4])
    out = signatures["serving_default"](history=request)
    body = {
        "outputs": {
            "item_ids": out["item_ids"].numpy().astype(str).tolist(),
            "scores": out["scores"].numpy().tolist(),
        }
    }
    reply = serving.rest_reply(body)
    assert [len(row) for row in reply.item_ids] == [1, 4] and reply.item_ids[0] == [vocabulary.items[5]]
    assert all(np.isfinite(s) for row in reply.scores for s in row)
    ints = signatures["recommend_ids"](history=tf.constant([[10, 11, 12, 13, 14, 15]], tf.int64))
    reply = serving.rest_reply({"outputs": {k: v.numpy().tolist() for k, v in ints.items()}})
    assert reply.item_ids == [[]] and reply.scores == [[]]
