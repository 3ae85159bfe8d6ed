"""Warm start (``tfseqrec.training.warm``, ``tfseqrec train --warm-start``): the grown vocabulary keeps
every known id and row, new items start as a new model's, the architecture cannot change."""

import json

import keras
import numpy as np
import pytest

from tests.test_cli import _tfseqrec
from tfseqrec import data, kinds, training
from tfseqrec.data import ItemVocabulary
from tfseqrec.models import BERT4Rec, SASRec
from tfseqrec.training import id_models, warm

OLD = ItemVocabulary(["a", "b", "c"])
NEW = ItemVocabulary(["c", "d", "a", "e"])  # "b" vanished, "d" and "e" are new


@pytest.mark.parametrize("cls", [SASRec, BERT4Rec])
def test_known_rows_are_kept_and_new_rows_start_as_a_new_models(cls):
    model = cls(num_items=3, max_sequence_length=4, hidden_dim=8, num_layers=1)
    grown, merged = training.warm_start(model, OLD, NEW, seed=7)
    assert merged.items == ["a", "b", "c", "d", "e"] and grown.num_items == 5
    keras.utils.set_random_seed(7)
    fresh = cls(num_items=5, max_sequence_length=4, hidden_dim=8, num_layers=1)
    for before, after, new in zip(model.weights, grown.weights, fresh.weights):
        before, after, new = (np.asarray(w) for w in (before, after, new))
        if before.shape == after.shape:
            np.testing.assert_array_equal(after, before)  # not an item table: the trained weight
        else:
            known = len(before)  # reserved rows and the 3 known items (or the 3 items' biases)
            np.testing.assert_array_equal(after[:known], before)
            np.testing.assert_array_equal(after[known:], new[known:])
    unchanged, same = training.warm_start(model, OLD, ItemVocabulary(["b"]))
    assert unchanged is model and same.items == OLD.items


def test_the_architecture_is_the_trained_runs():
    trained = {
        "model": "sasrec",
        "max_sequence_length": 50,
        "model_options": {"hidden_dim": 64, "num_layers": 2},
    }
    config = training.TrainConfig.from_dict({"model": "sasrec", "epochs": 3})
    config = warm.architecture(config, trained)
    assert config.model_options == {"hidden_dim": 64, "num_layers": 2} and config.max_sequence_length == 50
    assert config.epochs == 3  # a training option: the new run's
    wider = training.TrainConfig.from_dict({"model": "sasrec", "hidden_dim": 32, "max_sequence_length": 20})
    with pytest.raises(ValueError, match=r"hidden_dim 32 \(trained with 64\); max_sequence_length 20"):
        warm.architecture(wider, trained)
    with pytest.raises(ValueError, match="model 'hstu'"):
        warm.architecture(training.TrainConfig.from_dict({"model": "hstu"}), trained)
    features = SASRec(
        num_items=3,
        max_sequence_length=4,
        hidden_dim=8,
        item_features={"g": {"kind": "categorical", "values": 4, "width": 1}},
    )
    with pytest.raises(ValueError, match="attributes or text"):
        training.warm_start(features, OLD, NEW)


def _logs(tmp_path, users=200, seed=0):
    """An old log and the same log grown: each user's last two events later, some of new items."""
    rng = np.random.default_rng(seed)
    old, grown = ["user_id,item_id,timestamp"], ["user_id,item_id,timestamp"]
    for u in range(users):
        items = [f"i{rng.integers(40)}" for _ in range(10)] + [
            f"n{rng.integers(5)}" if u % 3 == 0 else f"i{rng.integers(40)}"
        ]
        for t, item in enumerate(items):
            line = f"u{u},{item},{t}"
            grown.append(line)
            if t < 8:
                old.append(line)
    (tmp_path / "old.csv").write_text("\n".join(old) + "\n")
    (tmp_path / "grown.csv").write_text("\n".join(grown) + "\n")
    return tmp_path / "old.csv", tmp_path / "grown.csv"


def test_train_warm_starts_on_the_grown_log(tmp_path):
    old_log, grown_log = _logs(tmp_path)
    tiny = ["--hidden-dim", "8", "--num-layers", "1", "--quiet"]
    _tfseqrec("train", "--data", old_log, "--output", tmp_path / "m1", "--epochs", "2", *tiny)
    done = _tfseqrec(
        "train",
        "--data",
        grown_log,
        "--output",
        tmp_path / "m2",
        "--warm-start",
        tmp_path / "m1",
        "--epochs",
        "1",
        "--config",
        '{"learning_rate_schedule": "cosine"}',
        "--quiet",
    )
    assert json.loads(done.stdout)["epochs"] == 1
    first, first_vocab, _ = kinds.load(tmp_path / "m1")
    second, second_vocab, info = kinds.load(tmp_path / "m2")
    # Adam goes on from the trained run's step count; the new run's schedule starts over from it.
    trained_steps = int(first.optimizer.iterations)
    assert int(second.optimizer.iterations) > trained_steps > 0
    schedule = second.optimizer.get_config()["learning_rate"]
    assert schedule["class_name"] == "FromStep" and schedule["config"]["start"] == trained_steps
    assert second_vocab.items[: first_vocab.num_items] == first_vocab.items  # every known id kept
    assert set(second_vocab.items[first_vocab.num_items :]) == {f"n{i}" for i in range(5)} - set(
        first_vocab.items
    )
    assert info["warm_start"]["items"] == second_vocab.num_items - first_vocab.num_items
    assert second.backbone.hidden_dim == 8 and second.backbone.num_layers == 1  # the trained architecture

    # A split prepared on its own (the TFX Trainer's: the grown log's vocabulary) moves onto the trained ids.
    split, log_vocab, _ = data.prepare(data.read_interactions(str(grown_log)))
    warm_run, _, moved, merged = id_models.warm_prepared("sasrec", {}, split, log_vocab, tmp_path / "m1")
    assert merged.items[: first_vocab.num_items] == first_vocab.items and warm_run["items"] == len(
        set(log_vocab.items) - set(first_vocab.items)
    )
    for before, after in ((split.train, moved.train), (split.valid.histories, moved.valid.histories)):
        assert log_vocab.to_raw(before.values) == merged.to_raw(after.values)  # the same raw items
    assert log_vocab.to_raw(split.valid.targets) == merged.to_raw(moved.valid.targets)
    assert merged.counts.tolist() == np.bincount(moved.train.values, minlength=merged.size)[3:].tolist()

    # Another architecture, or another kind, is refused before anything is written.
    for model, options, says in (
        ("sasrec", {"hidden_dim": 16}, r"hidden_dim 16 \(trained with 8\)"),
        ("hstu", {}, "holds a SASRec, not a HSTU"),
    ):
        with pytest.raises(ValueError, match=says):
            training.train(kinds.get(model), grown_log, tmp_path / "m3", options, warm_start=tmp_path / "m1")
    assert not (tmp_path / "m3").exists()


def test_adam_moments_are_carried_row_for_row():
    old_vars = [keras.Variable(np.ones((5, 2)), name="table"), keras.Variable(np.ones(2), name="w")]
    old = keras.optimizers.Adam()
    old.build(old_vars)
    for n, v in enumerate(v for v in old.variables if len(v.shape)):
        v.assign(np.full(v.shape, n + 1.0))
    new_vars = [keras.Variable(np.ones((7, 2)), name="table"), keras.Variable(np.ones(2), name="w")]
    old.iterations.assign(7)
    new = keras.optimizers.Adam(learning_rate=0.5)
    assert warm.carry_moments(old, new, new_vars) == 4
    state = [np.asarray(v) for v in new.variables if len(v.shape)]
    np.testing.assert_array_equal(state[0][:5], 1.0)
    np.testing.assert_array_equal(state[0][5:], 0.0)  # the new rows start at zero
    np.testing.assert_array_equal(state[3], 4.0)
    # The step count comes with the moments; the learning rate stays the new optimizer's.
    assert float(np.asarray(new.learning_rate)) == 0.5 and int(np.asarray(new.iterations)) == 7


def test_a_carried_adam_takes_the_step_the_trained_one_would_have_taken():
    # Adam by hand (NumPy): moments 0.3 and 0.02 grown over 500 steps, then a gradient of 0.1.
    m0, v0, step, grad, lr, (b1, b2, eps) = 0.3, 0.02, 500, 0.1, 1e-3, (0.9, 0.999, 1e-7)
    m, v = b1 * m0 + (1 - b1) * grad, b2 * v0 + (1 - b2) * grad**2
    expected = 1.0 - lr * np.sqrt(1 - b2 ** (step + 1)) / (1 - b1 ** (step + 1)) * m / (np.sqrt(v) + eps)
    old = keras.optimizers.Adam(learning_rate=lr, epsilon=eps)
    old.build([keras.Variable(np.ones(1), name="w")])
    for value, variable in zip((m0, v0), [x for x in old.variables if len(x.shape)]):
        variable.assign(np.full(1, value))
    old.iterations.assign(step)
    weight = keras.Variable(np.ones(1), name="w")
    new = keras.optimizers.Adam(learning_rate=lr, epsilon=eps)
    assert warm.carry_moments(old, new, [weight]) == 2
    new.apply_gradients([(np.full(1, grad, "float32"), weight)])
    np.testing.assert_allclose(np.asarray(weight), [expected], rtol=1e-5)
