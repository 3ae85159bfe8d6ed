"""``tfseqrec.presets`` and ``tfseqrec.registry``: one source of defaults, presets as keras-hub opens them."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

import tfseqrec
from tfseqrec import data, kinds, losses, presets, registry

# Run on the primary stack only (CI time): the registry's and presets' Python and the command line printing them, the same on both stacks.
pytestmark = pytest.mark.primary

TINY = {"hidden_dim": 8, "num_heads": 1}


@pytest.fixture(scope="module")
def cli_runs(data_root, tmp_path_factory):
    """BERT4Rec trained one epoch by ``tfseqrec train`` on ML-100K and on Amazon Scientific."""
    out = {}
    for name, path in (("ml-100k", "ml-100k/u.data"), ("scientific", "amazon-scientific-text")):
        run = tmp_path_factory.mktemp(name) / "run"
        command = [sys.executable, "-m", "tfseqrec", "train", "--model", "bert4rec"]
        command += ["--data", str(data_root / path), "--output", str(run), "--epochs", "1", "--quiet"]
        command += ["--hidden-dim", "8", "--num-heads", "1"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        out[name] = (data_root / path, run, json.loads(done.stdout), done.stderr)
    return out


@pytest.mark.parametrize("name", ["ml-100k", "scientific"])
def test_the_command_line_and_python_choose_the_same_options(cli_runs, name):
    path, run, result, stderr = cli_runs[name]
    assert result["num_users"] > 0  # stdout is the one JSON document
    recorded = json.loads((run / "train_config.json").read_text())
    # Python: for_data, the constructor, fit, on the same split.
    split, vocabulary, _ = data.prepare(data.read_interactions(str(path)))
    choices = presets.for_data("bert4rec", split.train, {**TINY, "epochs": 1})
    assert {k: v["value"] for k, v in recorded["choices"].items()} == dict(choices)
    for option in choices:  # one line each on stderr
        assert f"bert4rec: {option} " in stderr
    keras.utils.set_random_seed(0)
    model = tfseqrec.BERT4Rec(num_items=vocabulary.num_items, **TINY, **choices.model_options)
    model.compile(optimizer=keras.optimizers.Adam(choices["learning_rate"]))
    train = data.cloze_dataset(
        split.train,
        choices["max_sequence_length"],
        choices["batch_size"],
        bucket_boundaries=choices["bucket_boundaries"],
    )
    assert np.isfinite(model.fit(train.take(2), epochs=1, verbose=0).history["loss"][-1])
    trained, _, _ = tfseqrec.load(str(run))
    ours, theirs = model.get_config(), trained.get_config()
    assert ours["backbone"]["config"] == {
        **theirs["backbone"]["config"],
        "name": ours["backbone"]["config"]["name"],
    }
    assert {k: ours[k] for k in ("mask_prob", "loss")} == {k: theirs[k] for k in ("mask_prob", "loss")}
    config = recorded["config"]
    assert (config["batch_size"], config["learning_rate"]) == (
        choices["batch_size"],
        choices["learning_rate"],
    )
    # The two datasets differ where the rules say they should: short histories on Scientific.
    assert choices["num_layers"] == (1 if name == "scientific" else 2)


def test_a_trained_directory_is_a_preset_and_save_to_preset_round_trips(cli_runs, tmp_path):
    _, run, _, _ = cli_runs["ml-100k"]
    model = tfseqrec.BERT4Rec.from_preset(str(run))
    trained, vocabulary, _ = tfseqrec.load(str(run))
    histories = [[5, 6, 7], [9]]
    np.testing.assert_array_equal(
        model.score(model_inputs(histories)), trained.score(model_inputs(histories))
    )
    model.save_to_preset(str(tmp_path / "copy"), vocabulary)
    again = tfseqrec.BERT4Rec.from_preset(str(tmp_path / "copy"))
    np.testing.assert_array_equal(again.score(model_inputs(histories)), model.score(model_inputs(histories)))
    loaded, loaded_vocabulary, _ = tfseqrec.load(str(tmp_path / "copy"))  # whatever the kind
    assert type(loaded) is tfseqrec.BERT4Rec and loaded_vocabulary.num_items == vocabulary.num_items
    with pytest.raises(ValueError, match="holds a BERT4Rec, not a SASRec"):
        tfseqrec.SASRec.from_preset(str(run))
    with pytest.raises(ValueError, match="a trained model: its options are its own"):
        tfseqrec.BERT4Rec.from_preset(str(run), hidden_dim=4)


def model_inputs(histories):
    width = max(len(h) for h in histories)
    return np.asarray([[0] * (width - len(h)) + h for h in histories])


def test_named_presets_build_the_tuned_architectures():
    for spec in registry.MODELS.values():
        cls = presets.model_class(spec) if spec.preparation != "text" else None
        for key, preset in spec.presets.items():
            name = registry.preset_name(spec.name, key)
            assert name in cls.preset_names()
            model = cls.from_preset(name, num_items=5, **({"text_dim": 4} if spec.reads_item_text else {}))
            backbone = model.backbone.get_config()
            for option, value in preset.options.items():
                if option in backbone:
                    assert backbone[option] == value, (name, option)
    hstu = tfseqrec.HSTU.from_preset("hstu_ml1m", num_items=5, num_layers=1)  # the arguments win
    assert (hstu.backbone.num_layers, hstu.backbone.hidden_dim) == (1, 50)
    with pytest.raises(ValueError, match="preset 'hstu_ml1m' is HSTU's; SASRec's presets: sasrec_ml1m"):
        tfseqrec.SASRec.from_preset("hstu_ml1m", num_items=5)
    with pytest.raises(ValueError, match="no preset 'sasrec_ml2m'; the presets: bert4rec_ml1m"):
        tfseqrec.SASRec.from_preset("sasrec_ml2m", num_items=5)


def test_the_registry_is_the_one_table_of_kinds():
    assert sorted(registry.MODELS) == sorted(kinds.KINDS)
    for name, spec in registry.MODELS.items():
        assert kinds.get(name).spec is spec
        if spec.preparation != "text":
            assert presets.model_class(spec).__name__ == spec.class_name
    # Read-only: a default changed by a caller would change every later run's.
    with pytest.raises(TypeError):
        registry.get("sasrec").training["learning_rate"] = 1.0
    with pytest.raises(ValueError, match="unknown model 'gru4rec'"):
        registry.get("gru4rec")
    # The registry imports no TensorFlow (the CLI's help reads it).
    code = "import sys, tfseqrec.registry; print('tensorflow' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    )


def test_a_named_loss_is_the_default_loss():
    for name in losses.LOSSES:
        assert losses.get(name).get_config() == losses.build(name).get_config()
    sasrec = {"num_items": 5, "max_sequence_length": 4, "hidden_dim": 8, "num_layers": 1}
    named, default = tfseqrec.SASRec(loss="softmax", **sasrec), tfseqrec.SASRec(**sasrec)
    assert named.loss_fn.get_config() == default.loss_fn.get_config()
    assert default.loss_fn.exclude_history  # the history is left out of the softmax either way


def test_bert4recs_default_warm_up_spans_at_most_240_updates():
    def users(n):  # n users of 3 items: one window each
        return data.Sequences(np.arange(n), np.tile([2, 3, 4], n), np.arange(0, 3 * n + 1, 3))

    # Hand-computed: 20,000 windows in batches of 128 are 157 an epoch; 240 / 157 epochs of warm-up.
    chosen = presets.for_data("bert4rec", users(20_000))
    assert chosen["batch_size"] == 128 and chosen["warmup_epochs"] == pytest.approx(240 / 157)
    # ML-1M's 6,040 windows (48 batches: 5 epochs are 240 updates) and small data keep 5 epochs.
    assert presets.for_data("bert4rec", users(6040))["warmup_epochs"] == 5.0
    assert presets.for_data("bert4rec", users(1000))["warmup_epochs"] == 5.0  # 32 batches of 32
    # A warm-up given is kept, and the other models have none to cut.
    assert "warmup_epochs" not in presets.for_data("bert4rec", users(20_000), {"warmup_epochs": 5.0})
    assert presets.for_data("sasrec", users(20_000))["warmup_epochs"] == 0.0


def test_help_shows_the_defaults_the_constructors_and_registry_hold():
    from tfseqrec import cli
    from tfseqrec.training import config

    with open(cli.DEFAULTS_FILE) as f:
        stored = json.load(f)
    # `python -m tfseqrec.training.config` rewrites the file after a default changes.
    assert stored == json.loads(json.dumps({m: config.defaults(m) for m in registry.MODELS}))
    help_text = subprocess.run(
        [sys.executable, "-m", "tfseqrec", "train", "-h"], capture_output=True, text=True, timeout=120
    ).stdout
    lines = {line.split()[0]: line for line in help_text.splitlines() if line.startswith("  --")}
    # Read independently of the file: the constructors' own signatures.
    hstu_width = presets.constructor_default(registry.get("hstu"), "hidden_dim")
    sasrec_length = presets.constructor_default(registry.get("sasrec"), "max_sequence_length")
    assert f"hstu: {hstu_width}" in lines["--hidden-dim"]
    assert lines["--max-sequence-length"].split()[1] == f"{sasrec_length};"
    assert registry.get("bert4rec").by_history["short"]["num_layers"] == 1
    assert "1 short" in lines["--num-layers"]
