"""No command writes over what it reads: an output that is, holds or lies inside an input is
refused before anything is read or written, and the input is left as it was (issue 39).

Real folders and files in a tmp dir, the real command line; symbolic links and ``..``
resolved.
"""

import json
import os

import pytest

from tfseqrec import checks, cli

# Run on the primary stack only (CI time): path checks of the command line's own Python, the same on both stacks.
pytestmark = pytest.mark.primary

TINY = json.dumps({"max_sequence_length": 5, "hidden_dim": 8, "batch_size": 64, "epochs": 1})


def _dataset(root):
    """A small interaction folder: ``root/u.data`` (tab-separated user, item, rating, time)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = [f"{u}\t{(u + t) % 12}\t5\t{1000 + t}" for u in range(20) for t in range(6)]
    (root / "u.data").write_text("\n".join(lines) + "\n")
    return root


def _snapshot(root):
    """Every file under ``root`` (or ``root`` itself) with its bytes."""
    if root.is_file():
        return {root.name: root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(capsys, argv, flag, relation):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert f"{flag} " in err and f" {relation} the input " in err, err
    assert "choose an output outside every input" in err


@pytest.mark.parametrize(
    "output, relation",
    [
        ("D", "is"),  # the case: the data folder given as both, with --overwrite
        ("D/model", "is inside"),
        (".", "holds"),
        ("D/sub/../", "is"),  # `..` resolved
        ("link", "is"),  # a symbolic link to the data folder
    ],
)
def test_train_refuses_an_output_over_its_data(tmp_path, capsys, monkeypatch, output, relation):
    monkeypatch.chdir(tmp_path)
    data = _dataset(tmp_path / "D")
    (tmp_path / "D" / "sub").mkdir()
    os.symlink(data, tmp_path / "link")
    before = _snapshot(data)
    argv = ["train", "--model", "sasrec", "--data", "D", "--output", output, "--overwrite", "--config", TINY]
    _refused(capsys, argv, "--output", relation)
    assert _snapshot(data) == before
    assert not (tmp_path / "D" / "model").exists()


def test_train_refuses_an_output_above_a_data_file_item_text_or_init_from(tmp_path, capsys):
    data = _dataset(tmp_path / "in" / "D")
    (tmp_path / "in" / "pre").mkdir()
    before = _snapshot(tmp_path / "in")
    for argv, flag in [
        (["--data", str(data / "u.data"), "--output", str(tmp_path / "in")], "--data"),
        (["--data", str(data), "--output", str(data / "u.data")], "--data"),
        (
            [
                "--data",
                str(data),
                "--init-from",
                str(tmp_path / "in" / "pre"),
                "--output",
                str(tmp_path / "in" / "pre" / "again"),
            ],
            "--init-from",
        ),
    ]:
        model = "unisrec" if "--init-from" in argv else "sasrec"
        assert cli.main(["train", "--model", model, *argv, "--overwrite", "--config", TINY]) == 1
        err = capsys.readouterr().err
        assert f"the input {flag} " in err, err
    text = tmp_path / "texts" / "Tiny.item.json"
    text.parent.mkdir()
    text.write_text("{}")
    argv = ["train", "--model", "recformer", "--data", str(data), "--item-text", str(text)]
    _refused(capsys, [*argv, "--output", str(tmp_path / "texts"), "--overwrite"], "--output", "holds")
    assert text.read_text() == "{}"
    assert _snapshot(tmp_path / "in") == before


def test_train_beside_its_data_still_runs(tmp_path, capsys):
    data = _dataset(tmp_path / "D")
    before = _snapshot(data)
    argv = ["train", "--model", "sasrec", "--data", str(data), "--output", str(tmp_path / "model"), "--quiet"]
    assert cli.main([*argv, "--config", TINY]) == 0, capsys.readouterr().err
    assert _snapshot(data) == before
    assert (tmp_path / "model" / "model.keras").exists()
    # export: never into the model directory or over the item text; beside it, fine.
    model_dir = tmp_path / "model"
    model_before = _snapshot(model_dir)
    for output, relation in [(model_dir, "is"), (model_dir / "serving", "is inside"), (tmp_path, "holds")]:
        _refused(
            capsys, ["export", "--model-dir", str(model_dir), "--output", str(output)], "--output", relation
        )
    assert _snapshot(model_dir) == model_before
    argv = ["export", "--model-dir", str(model_dir), "--output", str(tmp_path / "saved"), "--no-warmup"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "saved" / "1" / "saved_model.pb").exists()


@pytest.mark.parametrize("flag", ["--pipeline-root", "--metadata-path", "--serving-model-dir"])
def test_pipeline_run_refuses_outputs_inside_its_data_root(tmp_path, capsys, flag):
    pytest.importorskip("tfx")
    root = tmp_path / "csv"
    root.mkdir()
    (root / "events.csv").write_text("user_id,item_id,timestamp\n1,2,3\n")
    before = _snapshot(root)
    outputs = {
        "--pipeline-root": str(tmp_path / "tfx"),
        "--metadata-path": str(tmp_path / "metadata.db"),
        "--serving-model-dir": str(tmp_path / "serving"),
    }
    outputs[flag] = str(root / "out")
    argv = ["pipeline", "run", "--data-root", str(root)]
    for name, path in outputs.items():
        argv += [name, path]
    _refused(capsys, argv, flag, "is inside")
    assert _snapshot(root) == before
    assert not any(os.path.exists(p) for p in outputs.values())


def test_the_one_check_resolves_links_and_dots(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.symlink(tmp_path / "a", tmp_path / "alias")
    checks.check_output_apart("--output", tmp_path / "c", {"--data": tmp_path / "a"})
    checks.check_output_apart(
        "--output", tmp_path / "ab", {"--data": tmp_path / "a"}
    )  # a prefix, not a parent
    with pytest.raises(ValueError, match="is inside the input --data"):
        checks.check_output_apart("--output", tmp_path / "alias" / "b", {"--data": tmp_path / "a"})
    with pytest.raises(ValueError, match="holds the input --data"):
        checks.check_output_apart(
            "--output", tmp_path / "a" / "b" / ".." / "..", {"--data": tmp_path / "alias/b"}
        )


def test_pretrain_and_the_data_commands_refuse_an_output_over_their_input(tmp_path, capsys):
    data = _dataset(tmp_path / "D")
    text = tmp_path / "T" / "Tiny.item.json"
    text.parent.mkdir()
    text.write_text(json.dumps({"1": {"title": "a"}}))
    before = {**_snapshot(data), **_snapshot(text.parent)}
    argv = ["pretrain", "--model", "unisrec", "--data", str(data), "--item-text", str(text)]
    _refused(capsys, [*argv, "--output", str(text.parent), "--overwrite"], "--output", "holds")
    _refused(
        capsys, ["data", "tfrecord", str(data), "--output", str(data / "records")], "--output", "is inside"
    )
    _refused(capsys, ["data", "item-text", str(text), "--output", str(text)], "--output", "is")
    assert {**_snapshot(data), **_snapshot(text.parent)} == before
