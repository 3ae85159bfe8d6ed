"""Training under faults: divergence, kills, and model directories that must not be lost.

Each test runs real training on ML-100K (tiny model) and checks both the answer
(the error, the model kept) and that nothing on disk was lost or changed.
"""

import csv
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import tfseqrec
from tests.test_case import file_tree
from tests.test_training import _Kill
from tfseqrec import kinds, training

SASREC = kinds.get("sasrec")
TINY = {
    "max_sequence_length": 20,
    "hidden_dim": 8,
    "batch_size": 64,
    "validation_batch_size": 512,
    "epochs": 3,
}


class _Poison(keras.callbacks.Callback):
    """Makes the model's weights NaN at the start of an epoch: a run that diverges there."""

    def __init__(self, at_epoch):
        super().__init__()
        self.at_epoch = at_epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.at_epoch:
            table = self.model.backbone.item_embedding.embeddings
            table.assign(np.full(table.shape, np.nan, "float32"))


def test_divergence_stops_with_a_clear_error_and_keeps_the_best_model(data_root, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(training.TrainingDiverged, match=r"diverged: the loss became nan in epoch 2, batch 1"):
        training.train(
            SASREC,
            data_root / "ml-100k",
            out,
            dict(TINY, epochs=4),
            callbacks=[_Poison(at_epoch=1)],
            verbose=0,
        )
    assert not out.exists()  # an unfinished run never becomes the model directory
    partial = pathlib.Path(str(out) + training.PARTIAL_SUFFIX)
    model = keras.saving.load_model(partial / training.MODEL_FILE)
    assert all(np.all(np.isfinite(np.asarray(w))) for w in model.weights if w.dtype.startswith("float"))
    rows = list(csv.DictReader(open(partial / "history.csv")))
    assert np.isfinite(float(rows[0]["val_ndcg_10"])) and rows[1]["loss"] == "nan"


def test_nan_learning_rate_is_refused_before_anything_is_written(data_root, tmp_path):
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0, got nan"):
        training.train(
            SASREC, data_root / "ml-100k", tmp_path / "run", dict(TINY, learning_rate=float("nan"))
        )
    assert not os.listdir(tmp_path)


def test_a_finished_model_is_not_overwritten_without_overwrite(data_root, tmp_path):
    out = tmp_path / "run"
    training.train(SASREC, data_root / "ml-100k", out, dict(TINY, epochs=1), verbose=0)
    before = file_tree(out)
    with pytest.raises(FileExistsError, match="already holds a trained model; pass --overwrite"):
        training.train(SASREC, data_root / "ml-100k", out, dict(TINY, epochs=1), verbose=0)
    assert file_tree(out) == before  # not a byte changed, no history row appended


def test_an_unrelated_directory_is_refused(data_root, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "history.csv").write_text("my,own,file\n")
    with pytest.raises(FileExistsError, match="not a tfseqrec model directory"):
        training.train(SASREC, data_root / "ml-100k", out, dict(TINY, epochs=1), verbose=0)
    assert (out / "history.csv").read_text() == "my,own,file\n" and os.listdir(out) == ["history.csv"]


@pytest.mark.primary  # the run directory's logic: the same Python on both stacks
def test_a_failed_overwrite_leaves_the_old_model_whole(data_root, tmp_path):
    out = tmp_path / "run"
    training.train(SASREC, data_root / "ml-100k", out, dict(TINY, epochs=1), verbose=0)
    before = file_tree(out)
    # Another dataset (another vocabulary) whose run dies in its first epoch.
    with pytest.raises(training.TrainingDiverged):
        training.train(
            SASREC,
            data_root / "ml-1m" / "ml-1m.txt",
            out,
            dict(TINY, epochs=2),
            callbacks=[_Poison(0)],
            verbose=0,
            overwrite=True,
        )
    assert file_tree(out) == before
    model, vocabulary, _ = tfseqrec.load(out)
    assert model.num_items == vocabulary.num_items == 1682


@pytest.mark.primary  # the run directory's logic: the same Python on both stacks
def test_overwrite_replaces_the_model_when_the_run_completes(data_root, tmp_path):
    out = tmp_path / "run"
    training.train(SASREC, data_root / "ml-100k", out, dict(TINY, epochs=1), verbose=0)
    training.train(
        SASREC, data_root / "ml-100k", out, dict(TINY, epochs=2, seed=1), verbose=0, overwrite=True
    )
    _, _, info = tfseqrec.load(out)
    assert info["config"]["seed"] == 1
    assert len(list(csv.DictReader(open(out / "history.csv")))) == 2  # the new run's rows only
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_resuming_with_other_options_is_refused(data_root, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        training.train(SASREC, data_root / "ml-100k", out, TINY, callbacks=[_Kill(at_epoch=0)], verbose=0)
    partial = pathlib.Path(str(out) + training.PARTIAL_SUFFIX)
    before = file_tree(partial)
    with pytest.raises(
        ValueError, match=r"unfinished run with other options \(learning_rate: 0.002 there, 0.01 here"
    ):
        training.train(SASREC, data_root / "ml-100k", out, dict(TINY, learning_rate=0.01), verbose=0)
    assert file_tree(partial) == before


@pytest.mark.primary  # the run directory's logic: the same Python on both stacks
def test_load_refuses_a_vocabulary_of_another_model(data_root, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    training.train(SASREC, data_root / "ml-100k", a, dict(TINY, epochs=1), verbose=0)
    training.train(SASREC, data_root / "ml-1m" / "ml-1m.txt", b, dict(TINY, epochs=1), verbose=0)
    os.replace(b / "item_vocab.tsv", a / "item_vocab.tsv")
    with pytest.raises(ValueError, match="scores 1682 items but its vocabulary lists 3416"):
        tfseqrec.load(a)


KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import keras
    from tfseqrec import kinds, training

    class Kill(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if self.epoch == int(sys.argv[4]) and batch == 2:
                os.kill(os.getpid(), signal.SIGKILL)  # kill -9, mid-epoch

    config = eval(sys.argv[3])
    training.train(kinds.get("sasrec"), sys.argv[1], sys.argv[2], config, callbacks=[Kill()], verbose=0)
    """
)


@pytest.mark.primary
def test_kill_9_mid_epoch_then_resume_ends_with_the_best_model(data_root, tmp_path):
    # A large learning rate makes the validation metric go up and down, so the best
    # epoch is not the last one.
    config = dict(TINY, epochs=6, patience=10, learning_rate=0.02)
    data = str(data_root / "ml-100k")
    killed = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, data, str(tmp_path / "resumed"), repr(config), "3"],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert (tmp_path / "resumed.partial" / "backup").is_dir()
    resumed, history, split, _ = training.train(SASREC, data, tmp_path / "resumed", config, verbose=0)
    straight, _, _, _ = training.train(SASREC, data, tmp_path / "straight", config, verbose=0)

    rows = list(csv.DictReader(open(tmp_path / "resumed" / "history.csv")))
    assert [int(r["epoch"]) for r in rows] == list(range(6))  # each epoch once
    scores = [float(r["val_ndcg_10"]) for r in rows]
    best = int(np.argmax(scores))
    # The saved model is the best epoch's, across the kill: its validation score is the best one.
    from tfseqrec import evaluation

    saved, _, _ = tfseqrec.load(tmp_path / "resumed")
    assert evaluation.evaluate(saved, split.valid)["ndcg@10"] == pytest.approx(scores[best], abs=1e-5)
    straight_rows = list(csv.DictReader(open(tmp_path / "straight" / "history.csv")))
    straight_scores = [float(r["val_ndcg_10"]) for r in straight_rows]
    assert int(np.argmax(straight_scores)) == best
    np.testing.assert_allclose(scores, straight_scores, atol=1e-4)


def test_a_nan_model_scores_zero_not_perfect():
    from tfseqrec import evaluation
    from tfseqrec.data import splits
    from tfseqrec.models import SASRec

    model = SASRec(num_items=50, max_sequence_length=4, hidden_dim=8)
    table = model.backbone.item_embedding.embeddings
    table.assign(np.full(table.shape, np.nan, "float32"))
    cases = splits.Cases(splits.Sequences.from_list(["a", "b"], [[3, 4], [5]]), np.array([6, 7]))
    result = evaluation.evaluate(model, cases, progress=False)
    # Ranked last of the 50 items (0-based rank 49), not first.
    assert result["ndcg@10"] == 0.0 and result["hr@10"] == 0.0
    assert result["mrr"] == pytest.approx(1 / 50)


# (file before, epochs done, the epoch trained, file after): a kill after epoch 3's row
# was written but before epoch 3 counted as done leaves epochs_done = 2, so the resumed
# run redoes epoch 3 and its old row must go; a restart from scratch keeps one header.
HISTORY_CASES = [
    (
        "epoch,loss,val_loss\n0,7.5,7.6\n1,7.0,7.1\n2,6.8,6.9\n",
        2,
        2,
        ["epoch,loss,val_loss", "0,7.5,7.6", "1,7.0,7.1", "2,6.75,6.85"],
    ),
    ("epoch,loss,val_loss\n0,7.5,7.6\n", 0, 0, ["epoch,loss,val_loss", "0,6.75,6.85"]),
]


@pytest.mark.parametrize("before, epochs_done, epoch, after", HISTORY_CASES, ids=["resumed", "restarted"])
def test_history_rows_of_epochs_not_done_are_dropped(tmp_path, before, epochs_done, epoch, after):
    path = tmp_path / "history.csv"
    path.write_text(before)
    log = training.HistoryLog(str(path), epochs_done=epochs_done)
    log.on_train_begin()
    log.on_epoch_end(epoch, {"loss": 6.75, "val_loss": 6.85})
    log.on_train_end()
    assert path.read_text().splitlines() == after


def test_a_second_run_into_the_same_output_at_once_is_refused(data_root, tmp_path):
    out = tmp_path / "model"
    # Another process holds the directory (as a run does while it trains).
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom tfseqrec.training import directory\n"
            "with directory.output_directory(sys.argv[1], {'config': {}, 'data': 'x'}):\n"
            "    print('held', flush=True)\n    time.sleep(120)\n",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        command = [
            sys.executable,
            "-m",
            "tfseqrec",
            "train",
            "--data",
            str(data_root / "ml-100k"),
            "--output",
            str(out),
        ]
        refused = subprocess.run(command + ["--epochs", "1"], capture_output=True, text=True, timeout=300)
        assert refused.returncode != 0 and f"another run is writing {out} now" in refused.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.lock", "model.partial"]  # the holder's
    finally:
        holder.kill()
        holder.wait()
    # Its lock dies with it: the next run trains.
    with training.output_directory(str(out), {"config": {}, "data": "x"}) as work:
        assert os.path.isdir(work)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
