"""Wrong data refused, a full disk and a broken model file said in one line (issue 39, items 3-5).

Real files and real runs: tiny models trained for real, a small tmpfs mounted for the
full disk (skipped where this process cannot mount one), model files truncated or
rewritten on disk, and the command line's own parser and exit codes.
"""

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import zipfile

import pytest

from tests.test_case import TINY_RECFORMER, file_tree, train_text_model
from tfseqrec import cli, kinds, ranking
from tfseqrec.data import synthetic

# Run on the primary stack only (CI time): refusals and file handling of the command line's own Python, the same on both stacks.
pytestmark = pytest.mark.primary

TINY = {"epochs": 1, "hidden_dim": 8, "num_layers": 1, "max_sequence_length": 8, "dropout": 0.0}
TINY_FLAGS = ["--epochs", "1", "--hidden-dim", "8", "--num-layers", "1", "--max-sequence-length", "8"]
RECFORMER = TINY_RECFORMER


def _cli(capsys, *argv):
    """``(exit code, stdout, stderr)`` of ``tfseqrec ARGV`` run in this process."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tfseqrec: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def sasrec(tmp_path_factory):
    """``(model dir, its data)``: a tiny SASRec trained on a synthetic log."""
    root = tmp_path_factory.mktemp("sasrec")
    data = synthetic.write_csv(synthetic.generate(300, 30, 15, seed=1), root / "log.csv")
    kinds.get("sasrec").train(data, root / "model", TINY, verbose=0)
    return root / "model", pathlib.Path(data)


@contextlib.contextmanager
def _tmpfs(path, size):
    """A tmpfs of ``size`` mounted at ``path`` for the block (the test is skipped where mount fails)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


# --- item 3: data other than the model's ------------------------------------------


def test_evaluate_refuses_other_data_unless_allowed(sasrec, data_root, tmp_path, capsys):
    model_dir, data = sasrec
    other = data_root / "ml-100k"
    code, out, err = _cli(capsys, "evaluate", "--model-dir", model_dir, "--data", other)
    line = _one_error_line(err)
    assert code == 1 and not out
    assert (
        "is not the data" in line and "300 events there, 100000 here" in line and "--allow-other-data" in line
    )
    code, out, _ = _cli(capsys, "evaluate", "--model-dir", model_dir, "--data", other, "--allow-other-data")
    assert code == 0 and json.loads(out)["num_users"] == 943
    # The same file, moved: accepted.
    shutil.copy(data, tmp_path / data.name)
    code, out, _ = _cli(capsys, "evaluate", "--model-dir", model_dir, "--data", tmp_path / data.name)
    assert code == 0 and json.loads(out)["num_users"] == 15


@pytest.mark.parametrize("model", ["recformer", "unisrec"])
def test_item_text_of_no_item_is_refused_the_same_way(model, data, tmp_path, capsys):
    other = tmp_path / "Other.item.json"
    other.write_text(json.dumps({f"x{i}": {"title": f"thing {i}"} for i in range(20)}))
    inputs = ["--data", data / "Tiny.inter.json", "--item-text", other]
    code, out, err = _cli(
        capsys, "train", "--model", model, *inputs, "--output", tmp_path / "model", "--quiet"
    )
    # stderr: the options the data settle (the id models', one line each), then the refusal.
    *notes, line = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and not out and line.startswith("tfseqrec: error: ")
    assert all(note.startswith(f"{model}: ") for note in notes)
    assert f"{other}: none of the data's 20 items has text there" in line and "x0" in line
    assert not (tmp_path / "model").exists()


@pytest.fixture(scope="module")
def recformer(data, tmp_path_factory):
    return train_text_model("recformer", data, tmp_path_factory.mktemp("recformer") / "model", RECFORMER)[0]


def test_export_refuses_a_new_item_without_text(recformer, tmp_path, capsys):
    new = tmp_path / "New.item.json"
    new.write_text(json.dumps({"20": {"title": "red pipette 20"}, "21": {"title": " ", "brand": ""}}))
    base = tmp_path / "served"
    code, out, err = _cli(capsys, "export", "--model-dir", recformer, "--output", base, "--item-text", new)
    line = _one_error_line(err)
    assert code == 1 and not out and "item '21' has no text in the attributes the model reads" in line
    assert not base.exists() or not os.listdir(base)


def test_multi_worker_without_tf_config_is_refused(sasrec, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    _, data = sasrec
    out_dir = tmp_path / "model"
    code, out, err = _cli(
        capsys, "train", "--data", data, "--output", out_dir, "--strategy", "multi_worker", *TINY_FLAGS
    )
    line = _one_error_line(err)
    assert code == 1 and not out and "needs TF_CONFIG" in line and "--strategy mirrored" in line
    assert not out_dir.exists()


# --- item 4: a full disk -----------------------------------------------------------


def test_full_disk_during_train_keeps_the_previous_model(sasrec, tmp_path, capsys):
    model_dir, data = sasrec
    with _tmpfs(tmp_path / "disk", "200k") as disk:
        previous = disk / "model"
        shutil.copytree(model_dir, previous, ignore=shutil.ignore_patterns("logs"))
        before = file_tree(previous)
        code, out, err = _cli(
            capsys, "train", "--data", data, "--output", previous, "--overwrite", "--quiet", *TINY_FLAGS
        )
        # stderr holds the training log (here the line on targets outside the windows), then the error
        *log, line = [line for line in err.splitlines() if line.strip()]
        assert code == 1 and not out and line.startswith("tfseqrec: error: no space left on the device")
        assert all(note.startswith("sasrec: ") for note in log), err
        assert "the model already in" in line and "untouched" in line
        assert file_tree(previous) == before and sorted(os.listdir(disk)) == ["model"]  # no model.partial


def test_full_disk_during_export_keeps_every_earlier_version(sasrec, tmp_path, capsys):
    model_dir, _ = sasrec
    with _tmpfs(tmp_path / "disk", "64m") as disk:
        base = disk / "served"
        assert _cli(capsys, "export", "--model-dir", model_dir, "--output", base, "--no-warmup")[0] == 0
        before = file_tree(base)
        # Room left for half a version, whatever a version's size: the next export fills the disk.
        used = shutil.disk_usage(disk).used
        subprocess.run(["mount", "-o", f"remount,size={used * 3 // 2}", str(disk)], check=True)
        code, out, err = _cli(capsys, "export", "--model-dir", model_dir, "--output", base)
        line = _one_error_line(err)
        assert code == 1 and not out and "no space left on the device" in line and "version 2" in line
        assert file_tree(base) == before and os.listdir(base) == ["1"]  # no .2.partial


@pytest.mark.parametrize(
    "argv",
    [
        ["data", "tfrecord", "ml-100k", "--output", "{disk}/tfrecords"],
        ["data", "item-text", "ml-1m/movies.dat", "--output", "{disk}/ml.item.json"],
        [
            "data",
            "synthetic",
            "--events",
            "100000",
            "--items",
            "100",
            "--users",
            "100",
            "--output",
            "{disk}/s.csv",
        ],
    ],
    ids=["tfrecord", "item-text", "synthetic"],
)
def test_full_disk_in_data_commands_leaves_no_half_file(argv, data_root, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TFSEQREC_DATA", str(data_root))
    with _tmpfs(tmp_path / "disk", "64k") as disk:
        kept = disk / "kept.txt"  # a file already there stays as it was
        kept.write_text("before")
        code, out, err = _cli(capsys, *[a.format(disk=disk) for a in argv])
        line = _one_error_line(err)
        assert code == 1 and not out and "no space left on the device" in line
        assert os.listdir(disk) == ["kept.txt"] and kept.read_text() == "before"


# --- items 4 and 5: model files ----------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "export"])
def test_a_truncated_model_file_is_called_truncated(sasrec, tmp_path, capsys, command):
    model_dir, data = sasrec
    broken = tmp_path / "model"
    shutil.copytree(model_dir, broken)
    path = broken / "model.keras"
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    extra = ["--data", data] if command == "evaluate" else ["--output", tmp_path / "served"]
    code, _, err = _cli(capsys, command, "--model-dir", broken, *extra)
    line = _one_error_line(err)
    assert code == 1 and "truncated or corrupt" in line and "File not found" not in line


def test_a_model_file_naming_os_system_is_refused_in_one_line(sasrec, tmp_path, capsys):
    model_dir, data = sasrec
    evil = tmp_path / "model"
    shutil.copytree(model_dir, evil)
    source = zipfile.ZipFile(model_dir / "model.keras")
    config = {
        "module": "os",
        "class_name": "system",
        "config": {"command": "touch pwned"},
        "registered_name": None,
    }
    with zipfile.ZipFile(evil / "model.keras", "w") as out:
        for info in source.infolist():
            body = (
                json.dumps(config).encode() if info.filename == "config.json" else source.read(info.filename)
            )
            out.writestr(info, body)
    code, _, err = _cli(capsys, "evaluate", "--model-dir", evil, "--data", data)
    line = _one_error_line(err)
    assert code == 1 and "names os.system" in line and "refused" in line
    assert not os.path.exists("pwned")


# --- item 5: the blessing metric ---------------------------------------------------


def test_pipeline_metric_is_checked_by_the_parser(tmp_path, capsys):
    assert set(cli.BLESSING_METRICS) == set(ranking.metrics_from_ranks([0, 3]))
    for metric in ("ndcg@7", "num_users", "num_unknown_targets"):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["pipeline", "run", "--data-root", str(tmp_path), "--metric", metric])
        assert exit_.value.code == 2 and f"invalid choice: '{metric}'" in capsys.readouterr().err
    assert not os.listdir(tmp_path)
