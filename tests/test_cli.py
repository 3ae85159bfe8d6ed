"""The ``tfseqrec`` console script, run as users run it (a subprocess)."""

import importlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import tfseqrec
from tfseqrec import cli, commands, kinds
from tfseqrec.data import tfrecord
from tfseqrec.distribute import STRATEGIES


def _console_script():
    return shutil.which("tfseqrec", path=os.path.dirname(sys.executable)) or shutil.which("tfseqrec")


def _tfseqrec(*args, check=True, env=None):
    result = subprocess.run(
        [_console_script(), *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )
    if check and result.returncode != 0:
        raise AssertionError(f"tfseqrec {args} failed ({result.returncode}):\n{result.stderr}")
    return result


@pytest.mark.parametrize(
    "relative, users, items, interactions",
    [
        ("ml-1m/ml-1m.txt", 6040, 3416, 999_611),
        ("ml-1m/ml-1m_full_sequences.txt.gz", 6040, 3706, 1_000_209),
        ("ml-100k", 943, 1682, 100_000),
        ("amazon-scientific-text", 8317, 4344, 58_492),
    ],
)
def test_data_stats_every_shared_dataset(data_root, relative, users, items, interactions):
    out = json.loads(_tfseqrec("data", "stats", data_root / relative, "--json").stdout)
    assert (out["num_users"], out["num_items"], out["num_interactions"]) == (users, items, interactions)
    splits = out["splits"]
    assert splits["test_cases"] == splits["valid_cases"] == users
    assert splits["train_interactions"] == interactions - 2 * users


def test_data_stats_k_core_reports_removals(data_root):
    out = json.loads(
        _tfseqrec("data", "stats", data_root / "ml-100k", "--min-item-interactions", 20, "--json").stdout
    )
    removed = out["removed"]
    assert removed["removed_items"] > 0 and removed["removed_interactions"] > 0
    assert out["num_interactions"] + removed["removed_interactions"] == 100_000


def test_data_stats_csv_with_named_columns(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("uid,iid,ts\na,x,3\na,y,1\na,z,2\nb,x,1\n")
    out = json.loads(
        _tfseqrec(
            "data", "stats", path, "--user-col", "uid", "--item-col", "iid", "--time-col", "ts", "--json"
        ).stdout
    )
    assert out["num_users"] == 2 and out["splits"]["train_only_users"] == 1


def test_bad_input_exits_1_naming_file_and_line(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("user_id,item_id,timestamp\na,x,1\na,y,later\n")
    result = _tfseqrec("data", "stats", path, check=False)
    assert result.returncode == 1
    assert f"{path}:3: column 'timestamp'" in result.stderr
    missing = _tfseqrec("data", "stats", tmp_path / "nope.txt", check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_data_tfrecord_round_trip(data_root, tmp_path):
    out = json.loads(_tfseqrec("data", "tfrecord", data_root / "ml-100k", "--output", tmp_path).stdout)
    assert out["records"] == {"train": 943, "valid": 943, "test": 943}
    test = tfrecord.read_examples(tmp_path / "test.tfrecord.gz", compression="GZIP")
    assert len(test) == 943
    assert test.histories.num_events == 100_000 - 943  # every event but each user's last


def test_data_item_text_maps_ml1m_ids_to_movie_titles(data_root, tmp_path):
    m = data_root / "ml-1m"
    out = json.loads(
        _tfseqrec(
            "data",
            "item-text",
            m / "movies.dat",
            "--id-map",
            m / "sas_to_original_items.txt",
            "--output",
            tmp_path / "ml-1m.item.json",
        ).stdout
    )
    assert (
        out["items"] == 3416
        and out["mapped_ids_without_text"] == 0
        and out["attributes"] == ["genres", "title"]
    )
    text = json.loads((tmp_path / "ml-1m.item.json").read_text())
    # The map's first line: an ml-1m.txt item and its movies.dat id.
    original = (m / "sas_to_original_items.txt").read_text().split("\n")[0].split()
    movie = [
        line
        for line in (m / "movies.dat").read_text(encoding="latin-1").splitlines()
        if line.split("::")[0] == original[1]
    ][0].split("::")
    assert text[original[0]] == {"title": movie[1], "genres": movie[2].replace("|", ", ")}
    bad = _tfseqrec("data", "item-text", m / "movies.dat", "--output", tmp_path / "x.json", check=False)
    assert bad.returncode == 1 and "must end in .item.json" in bad.stderr


TINY_TRAIN = ["--epochs", 1, "--hidden-dim", 8, "--max-sequence-length", 20, "--batch-size", 256, "--quiet"]


@pytest.fixture(scope="module")
def trained(data_root, tmp_path_factory):
    """One small BERT4Rec trained through the CLI, shared by the tests below: ``(model
    directory, metrics, stderr)``. Its stdout goes through ``python -m json.tool`` as a
    user's ``tfseqrec train ... | jq`` would, which fails on anything but one JSON document."""
    out = tmp_path_factory.mktemp("cli_model")
    argv = [_console_script(), "train", "--model", "bert4rec", "--data", data_root / "ml-100k"]
    argv += ["--output", out, *TINY_TRAIN]
    pipeline = f"set -o pipefail; {shlex.join(map(str, argv))} | {shlex.quote(sys.executable)} -m json.tool"
    result = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return out, json.loads(result.stdout), result.stderr


def test_train_prints_test_metrics_and_writes_the_model_dir(trained):
    out, result, _ = trained
    assert result["num_users"] == 943 and result["epochs"] == 1
    assert {"ndcg@10", "hr@10", "mrr"} <= set(result)
    assert {"model.keras", "item_vocab.tsv", "train_config.json", "history.csv", "logs"} <= set(
        os.listdir(out)
    )


def test_train_notes_and_progress_go_to_stderr(trained):
    *_, stderr = trained
    # The training log's notes, and the epoch's line that Keras writes to sys.stdout.
    assert re.search(r"^bert4rec: ", stderr, flags=re.M), stderr
    assert re.search(r"^\d+/\d+ - .*\bloss: ", stderr, flags=re.M), stderr


def test_evaluate_json_with_and_without_seen_items(trained, data_root):
    out, _, _ = trained
    keys = {"ndcg@1", "ndcg@5", "ndcg@10", "ndcg@20", "hr@1", "hr@5", "hr@10", "hr@20", "mrr", "num_users"}
    with_seen = json.loads(_tfseqrec("evaluate", "--model-dir", out, "--data", data_root / "ml-100k").stdout)
    assert keys <= set(with_seen) and with_seen["num_users"] == 943 and with_seen["exclude_seen"]
    # Beyond accuracy by default; its breakdowns hold every case once.
    assert 0 < with_seen["coverage@10"] <= 1 and with_seen["arp_ratio@10"] > 0
    assert sum(b["cases"] for b in with_seen["by_history_length"].values()) == 943
    assert sum(b["cases"] for b in with_seen["by_target_popularity"].values()) == 943
    without = json.loads(
        _tfseqrec(
            "evaluate",
            "--model-dir",
            out,
            "--data",
            data_root / "ml-100k",
            "--no-exclude-seen",
            "--split",
            "valid",
            "--sampled-negatives",
            100,
            "--sampler",
            "popularity",
        ).stdout
    )
    assert not without["exclude_seen"] and without["split"] == "valid"
    assert "coverage@10" in without
    assert without["sampled"] == {"num_negatives": 100, "sampler": "popularity"}
    assert 0 <= without["sampled_ndcg@10"] <= 1


def test_evaluate_metrics_chooses_and_refuses_unknown_names(trained, data_root, capsys):
    out, _, _ = trained
    args = ["evaluate", "--model-dir", str(out), "--data", str(data_root / "ml-100k"), "--metrics"]
    assert cli.main([*args, "accuracy"]) == 0
    accuracy = json.loads(capsys.readouterr().out)
    assert "ndcg@10" in accuracy and not any(k.startswith(("coverage", "by_")) for k in accuracy)
    assert cli.main([*args, "coverage,by_length"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert "coverage@10" in chosen and "by_history_length" in chosen and "novelty@10" not in chosen
    assert cli.main([*args, "coverage,fame"]) == 1
    failed = capsys.readouterr()
    assert failed.out == "" and "unknown metrics ['fame']" in failed.err


def test_evaluate_exclude_seen_window(trained, data_root):
    """Only the 20-item input window filtered: ML-100K users hold up to 737 items, so the
    candidates differ from the whole-history filter's and so do the metrics."""
    out, _, _ = trained
    args = ("evaluate", "--model-dir", out, "--data", data_root / "ml-100k")
    window = json.loads(_tfseqrec(*args, "--exclude-seen-window").stdout)
    whole = json.loads(_tfseqrec(*args).stdout)
    assert window["exclude_seen"] == "window" and whole["exclude_seen"] is True
    assert window["num_users"] == 943 and window["mrr"] != whole["mrr"]


def test_recommend_prints_raw_ids(trained):
    out, _, _ = trained
    lines = _tfseqrec(
        "recommend", "--model-dir", out, "--history", "50 172 133", "--k", 5
    ).stdout.splitlines()
    assert len(lines) == 5
    ranks, items, scores = zip(*(line.split("\t") for line in lines))
    assert ranks == ("1", "2", "3", "4", "5")
    assert not {"50", "172", "133"} & set(items)
    assert all(item.isdigit() and 1 <= int(item) <= 1682 for item in items)
    result = _tfseqrec("recommend", "--model-dir", out, "--history", "50 nope", "--k", 3, "--json")
    assert len(json.loads(result.stdout)["item_ids"]) == 3
    assert "ignoring 1 unknown item id(s): ['nope']" in result.stderr


def test_plot_writes_pngs(trained, tmp_path):
    out, _, _ = trained
    written = json.loads(_tfseqrec("plot", "--model-dir", out, "--output", tmp_path).stdout)["written"]
    for path in written:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.path.basename(p) for p in written) == ["attention.png", "training_curves.png"]


@pytest.mark.e2e
@pytest.mark.primary  # the readers and the training loop: the same Python on both stacks
@pytest.mark.parametrize(
    "relative", ["ml-1m/ml-1m.txt", "ml-1m/ml-1m_full_sequences.txt.gz", "amazon-scientific-text"]
)
def test_train_sasrec_on_every_other_dataset(data_root, tmp_path, relative):
    result = _tfseqrec("train", "--data", data_root / relative, "--output", tmp_path, *TINY_TRAIN)
    metrics = json.loads(result.stdout)
    assert metrics["num_users"] in (6040, 8317) and 0 <= metrics["ndcg@10"] <= 1


def test_train_bad_config_is_a_clear_error(data_root, tmp_path):
    result = _tfseqrec(
        "train",
        "--data",
        data_root / "ml-100k",
        "--output",
        tmp_path,
        "--config",
        '{"hiden_dim": 8}',
        check=False,
    )
    assert result.returncode == 1 and "unknown training options ['hiden_dim']" in result.stderr


def test_train_validation_and_sampler_flags(data_root, tmp_path):
    args = cli.build_parser().parse_args(
        ["train", "--data", "d", "--output", "o", "--validation", "none", "--sampler", "uniform"]
    )
    assert (args.validation, args.sampler) == ("none", "uniform")
    assert {"validation", "sampler"} <= set(args.option_flags)
    result = _tfseqrec(
        "train",
        "--data",
        data_root / "ml-100k",
        "--output",
        tmp_path / "m",
        "--sampler",
        "uniform",
        check=False,
    )
    assert (
        result.returncode == 1
        and "sampler applies to the sampled_softmax loss, not 'softmax'" in result.stderr
    )
    assert not os.path.exists(tmp_path / "m")


def test_model_flags_go_to_model_options_over_the_config():
    options = {"epochs": 3, "model_options": {"hidden_dim": 32, "num_layers": 1}}
    for name, value in (("hidden_dim", 8), ("batch_size", 16)):
        commands._set_option(kinds.get("sasrec"), options, name, value)
    assert options == {"epochs": 3, "batch_size": 16, "model_options": {"hidden_dim": 8, "num_layers": 1}}
    recformer = {}  # Recformer's options are all fields of its config
    commands._set_option(kinds.get("recformer"), recformer, "num_layers", 1)
    assert recformer == {"num_layers": 1}


def test_data_synthetic_writes_a_log_that_stats_reads(tmp_path):
    out = json.loads(
        _tfseqrec(
            "data",
            "synthetic",
            "--events",
            3000,
            "--items",
            400,
            "--users",
            50,
            "--seed",
            4,
            "--output",
            tmp_path / "log.csv",
        ).stdout
    )
    assert (out["events"], out["users"], out["catalogue"]) == (3000, 50, 400)
    stats = json.loads(_tfseqrec("data", "stats", tmp_path / "log.csv", "--json").stdout)
    assert stats["has_timestamps"] and stats["num_interactions"] == 3000 and stats["num_users"] == 50
    assert stats["num_items"] == out["items_used"]
    bad = _tfseqrec(
        "data",
        "synthetic",
        "--events",
        10,
        "--items",
        5,
        "--users",
        9,
        "--output",
        tmp_path / "b.csv",
        check=False,
    )
    assert bad.returncode != 0 and "9 users of at least 5 events need 45 events" in bad.stderr


# Runs the command as the console script does, then reports which heavy modules it imported.
HELP_PROBE = """
import json, runpy, sys
sys.argv = ["tfseqrec", *json.loads(sys.argv[1])]
try:
    runpy.run_module("tfseqrec.cli", run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras"})), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["data", "stats", "--help"]])
def test_help_answers_without_importing_tensorflow(argv):
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, json.dumps(argv)], capture_output=True, text=True, timeout=120
    )
    assert json.loads(result.stderr.strip().splitlines()[-1]) == [], result.stderr
    assert result.stdout.startswith("usage: tfseqrec")


def test_help_describes_every_command_and_model():
    result = subprocess.run(
        [sys.executable, "-m", "tfseqrec.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    for name in ["data", "train", "pretrain", "evaluate", "plot", "recommend", "export", "pipeline"]:
        assert any(line.split()[:1] == [name] and line.startswith("  ") for line in lines), name
    for name in ["sasrec", "bert4rec", "hstu", "unisrec", "recformer"]:
        assert f"  {name}" in result.stdout and cli.MODELS[name] in result.stdout
    assert "flag parsing" not in result.stdout and "examples:" in result.stdout
    for code in cli.EXIT_STATUS:
        assert any(line.split()[:1] == [str(code)] and line.startswith("  ") for line in lines), code
    train = subprocess.run(
        [sys.executable, "-m", "tfseqrec.cli", "train", "--help"], capture_output=True, text=True, timeout=120
    ).stdout
    assert train.startswith("usage: tfseqrec train ") and all(text in train for text in cli.MODELS.values())


def test_help_tables_match_the_library():
    assert sorted(cli.MODELS) == sorted(kinds.KINDS)
    assert cli.PRETRAINABLE == sorted(name for name, kind in kinds.KINDS.items() if kind.pretrainable)
    assert tuple(cli.STRATEGIES) == tuple(STRATEGIES)
    assert cli.PRESETS == {
        name: {preset: cli.PRESETS.get(name, {}).get(preset) for preset in kind.presets}
        for name, kind in kinds.KINDS.items()
        if kind.presets
    }


def test_train_help_lists_presets_and_an_unknown_preset_names_the_models(capsys):
    train = subprocess.run(
        [sys.executable, "-m", "tfseqrec.cli", "train", "--help"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "--preset" in train and "hstu ml1m" in train and "unisrec scientific" in train
    for model, preset, message in (
        ("sasrec", "nope", "sasrec has no preset 'nope'; its presets: ml1m, ml1m-cosine"),
        ("recformer", "ml1m", "recformer has no preset 'ml1m'; its presets: none"),
    ):
        argv = ["train", "--model", model, "--preset", preset, "--data", "x.csv", "--output", "out"]
        assert cli.main(argv) == 1
        assert message in capsys.readouterr().err


# The least each command needs to parse.
MINIMAL_ARGV = {
    "data stats": ["data", "stats", "log.csv"],
    "data download": ["data", "download", "ml-100k"],
    "data item-text": ["data", "item-text", "movies.dat", "--output", "o.item.json"],
    "data item-features": ["data", "item-features", "u.item", "--output", "o.csv"],
    "data synthetic": ["data", "synthetic", "--events", "9", "--items", "3", "--output", "o.csv"],
    "data tfrecord": ["data", "tfrecord", "log.csv", "--output", "o"],
    "train": ["train", "--data", "d", "--output", "o"],
    "pretrain": ["pretrain", "--model", "unisrec", "--data", "d", "--item-text", "t", "--output", "o"],
    "evaluate": ["evaluate", "--model-dir", "m", "--data", "d"],
    "plot": ["plot", "--model-dir", "m"],
    "report": ["report", "--model-dir", "m", "--data", "d", "--output", "r.html"],
    "recommend": ["recommend", "--model-dir", "m", "--history", "1 2"],
    "export": ["export", "--model-dir", "m", "--output", "o"],
    "pipeline run": ["pipeline", "run", "--data-root", "r"],
}


def test_every_command_parses_to_its_implementation():
    leaves = {name for name in cli.SUMMARIES if not any(o.startswith(name + " ") for o in cli.SUMMARIES)}
    assert leaves == set(commands.COMMANDS) == set(MINIMAL_ARGV)
    parser = cli.build_parser()
    for name, argv in MINIMAL_ARGV.items():
        assert parser.parse_args(argv).run == name


def test_help_examples_parse():
    text = "\n".join([cli.EPILOG, *("\n".join(lines) for lines in cli.EXAMPLES.values())])
    examples = [
        line for line in text.replace("\\\n", " ").splitlines() if line.strip().startswith("tfseqrec ")
    ]
    assert len(examples) >= 15
    parser = cli.build_parser()
    for line in examples:
        parser.parse_args(shlex.split(line)[1:])


def test_a_command_without_its_subcommand_prints_its_help_on_stderr(capsys):
    assert cli.main(["data"]) == cli.EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("usage: tfseqrec data ") and "  synthetic  " in captured.err
    assert captured.out == ""
    assert cli.main([]) == 2
    assert "  recommend  " in capsys.readouterr().err


NOTICES = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    b"I0000 00:00:1795812687.817777    8039 port.cc:153] oneDNN custom operations are on.\n",
    b"2026-01-01 20:50:38.190894: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:10575] "
    b"Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one "
    b"has already been registered\n",
    b"2026-01-01 20:50:38.146002: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.\n",
]


@pytest.mark.parametrize("level, shown", [("2", b""), ("0", b"".join(NOTICES))])
def test_start_up_notices_are_hidden_and_other_lines_kept(level, shown):
    # Written to file descriptor 2, as TensorFlow's C++ logging writes them.
    code = (
        "import ast, os, sys\n"
        "from tfseqrec import cli\n"
        "with cli._tensorflow_start_up_hidden():\n"
        "    for line in ast.literal_eval(sys.argv[1]):\n"
        "        os.write(2, line)\n"
        "    os.write(2, b'a real problem\\n')\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": level}
    result = subprocess.run(
        [sys.executable, "-c", code, repr(NOTICES)], capture_output=True, env=env, timeout=60
    )
    assert result.returncode == 0 and result.stderr == shown + b"a real problem\n"


def test_a_command_prints_no_tensorflow_start_up_noise(data_root):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = _tfseqrec("data", "stats", data_root / "ml-100k", "--json", env=env)
    assert json.loads(result.stdout)["num_users"] == 943
    assert result.stderr == ""


def test_version_without_tensorflow_from_the_console_script_and_python_m():
    expected = f"tfseqrec {tfseqrec.__version__}\n"
    for argv in ([_console_script()], [sys.executable, "-m", "tfseqrec"]):
        result = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=120)
        assert (result.returncode, result.stdout, result.stderr) == (0, expected, ""), argv
    probe = HELP_PROBE.replace('"tfseqrec.cli"', '"tfseqrec"')  # runs tfseqrec/__main__.py
    result = subprocess.run(
        [sys.executable, "-c", probe, '["--version"]'], capture_output=True, text=True, timeout=120
    )
    assert result.stdout == expected and json.loads(result.stderr.strip().splitlines()[-1]) == []


def test_python_m_tfseqrec_runs_the_console_scripts_main():
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "tfseqrec"]
    assert script.load() is cli.main is importlib.import_module("tfseqrec.__main__").main


def _fake_command(outcome):
    """A command that prints as the library does, then writes its result or raises ``outcome``."""

    def command(args, stdout):
        print("a note")  # as the training log and Keras's progress bars print: to sys.stdout
        if isinstance(outcome, BaseException):
            raise outcome
        print(json.dumps(outcome), file=stdout)
        return 0

    return command


@pytest.mark.parametrize(
    "outcome, status, err",
    [
        ({"ndcg@10": 0.5}, 0, "a note\n"),
        (
            ValueError("log.csv:3: column 'timestamp': bad"),
            1,
            "tfseqrec: error: log.csv:3: column 'timestamp': bad\n",
        ),
        (
            FileNotFoundError(2, "No such file or directory", "x.csv"),
            1,
            "tfseqrec: error: x.csv: No such file or directory\n",
        ),
        (KeyboardInterrupt(), 130, "tfseqrec: interrupted\n"),
    ],
    ids=["result", "bad-data", "missing-file", "interrupted"],
)
def test_stdout_carries_the_result_alone_and_failures_their_exit_status(
    monkeypatch, capsys, outcome, status, err
):
    monkeypatch.setitem(commands.COMMANDS, "plot", _fake_command(outcome))
    assert cli.main(["plot", "--model-dir", "m"]) == status
    captured = capsys.readouterr()
    assert captured.out == ("" if status else json.dumps(outcome) + "\n")
    assert captured.err.startswith("a note\n") and captured.err.endswith(err)


def test_a_command_line_that_does_not_parse_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--data", "d"])
    assert exit_info.value.code == cli.EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--output" in captured.err
