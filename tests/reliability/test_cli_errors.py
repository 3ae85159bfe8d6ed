"""The CLI turns every expected failure into one line on stderr and a non-zero exit."""

import pytest

from tfseqrec import cli

BAD_FLAGS = [
    (
        ["evaluate", "--model-dir", "m", "--data", "d", "--batch-size", "-3"],
        "--batch-size",
        "must be an integer >= 1, got -3",
    ),
    (
        ["evaluate", "--model-dir", "m", "--data", "d", "--batch-size", "0"],
        "--batch-size",
        "must be an integer >= 1, got 0",
    ),
    (
        ["evaluate", "--model-dir", "m", "--data", "d", "--sampled-negatives", "-1"],
        "--sampled-negatives",
        ">= 1",
    ),
    (
        ["train", "--data", "d", "--output", "o", "--epochs", "0"],
        "--epochs",
        "must be an integer >= 1, got 0",
    ),
    (
        ["train", "--data", "d", "--output", "o", "--max-sequence-length", "0"],
        "--max-sequence-length",
        ">= 1, got 0",
    ),
    (["train", "--data", "d", "--output", "o", "--batch-size", "0"], "--batch-size", ">= 1, got 0"),
    (["train", "--data", "d", "--output", "o", "--learning-rate", "nan"], "--learning-rate", "> 0, got nan"),
    (
        ["train", "--data", "d", "--output", "o", "--learning-rate=-1e-3"],
        "--learning-rate",
        "> 0, got -0.001",
    ),
    (["train", "--data", "d", "--output", "o", "--dropout", "1.5"], "--dropout", ">= 0 and < 1, got 1.5"),
    (["train", "--data", "d", "--output", "o", "--mask-prob", "0"], "--mask-prob", "> 0 and <= 1, got 0.0"),
    (
        ["train", "--data", "d", "--output", "o", "--epochs", "2.5"],
        "--epochs",
        "expected an integer, got '2.5'",
    ),
    (
        ["recommend", "--model-dir", "m", "--history", "1", "--k", "-5"],
        "--k",
        "must be an integer >= 1, got -5",
    ),
    (["export", "--model-dir", "m", "--output", "o", "--k", "0"], "--k", ">= 1, got 0"),
    (["export", "--model-dir", "m", "--output", "o", "--version", "-2"], "--version", ">= 1, got -2"),
]


@pytest.mark.parametrize("argv, flag, message", BAD_FLAGS, ids=[" ".join(a[-2:]) for a, _, _ in BAD_FLAGS])
def test_numeric_flags_are_range_checked(argv, flag, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert f"argument {flag}: " in last and message in last, err
    assert "Traceback" not in err


def test_library_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["evaluate", "--model-dir", str(tmp_path), "--data", str(tmp_path / "none.csv")]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("tfseqrec: error: "), err


@pytest.mark.primary  # the run directory's logic: the same Python on both stacks
def test_a_finished_model_directory_is_refused_in_one_line(data_root, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "train",
        "--data",
        str(data_root / "ml-100k"),
        "--output",
        str(out),
        "--epochs",
        "1",
        "--max-sequence-length",
        "10",
        "--hidden-dim",
        "8",
        "--quiet",
    ]
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main(argv) == 1
    # stderr: the options the data settle (one line each), then the refusal, one line.
    *notes, err = capsys.readouterr().err.strip().splitlines()
    assert all(note.startswith("sasrec: ") for note in notes)
    assert (
        err == f"tfseqrec: error: {out} already holds a trained model; pass --overwrite to replace it "
        "(it stays in place until the new run completes)"
    )
    assert cli.main(argv + ["--overwrite"]) == 0
