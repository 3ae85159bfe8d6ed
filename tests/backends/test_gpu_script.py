"""``benchmarks/gpu.py`` at tiny size on JAX's CPU: every model kind trains, tests and is stored.

The first 30 users of Amazon Scientific (and their items' text) make a data root of their
own, beside ML-1M (Recformer's pre-training text); ``--prepare`` writes the text models'
inputs on the TensorFlow backend, as on the CPU before a GPU run; then the script trains
SASRec, BERT4Rec, HSTU, UniSRec and Recformer (its pre-training on ML-1M's titles and
genres cut short by a budget of seconds, then both fine-tuning stages) under ``KERAS_BACKEND=jax`` and writes one record per run.
"""

import json
import os
import pathlib

import numpy as np

from tests.backends.test_jax import REPO, pytestmark, run_on_jax  # noqa: F401 (pytestmark: JAX only)
from tests.test_case import benchmark_script

SCIENTIFIC = "amazon-scientific-text"
USERS = 30
ID_CONFIG = {"hidden_dim": 8, "num_layers": 1, "num_heads": 1, "max_sequence_length": 10, "epochs": 3}
RECFORMER_CONFIG = {
    "num_layers": 1,
    "max_tokens": 64,
    "max_sequence_length": 5,
    "max_attribute_tokens": 8,
    "align_epochs": 1,
    "epochs": 2,
    "stage2_epochs": 1,
    "batch_size": 8,
}


def tiny_scientific(data_root, out):
    """``out/amazon-scientific-text``: the first ``USERS`` users and the text of their items."""
    source = pathlib.Path(data_root) / SCIENTIFIC
    with open(source / "Scientific.inter.json") as f:
        interactions = dict(list(json.load(f).items())[:USERS])
    with open(source / "Scientific.item.json") as f:
        items = json.load(f)
    kept = {str(i) for sequence in interactions.values() for i in sequence}
    (out / SCIENTIFIC).mkdir(parents=True)
    (out / SCIENTIFIC / "Scientific.inter.json").write_text(json.dumps(interactions))
    (out / SCIENTIFIC / "Scientific.item.json").write_text(json.dumps({k: items[k] for k in kept}))
    (out / "ml-1m").symlink_to(pathlib.Path(data_root) / "ml-1m")  # read, never copied
    return out


def test_every_kind_trains_on_jax_and_is_stored(tmp_path, data_root):
    root = tiny_scientific(data_root, tmp_path / "data")
    common = ["benchmarks/gpu.py", "--protocol", "scientific", "--data-root", str(root)]
    prepared = tmp_path / "prepared"
    env = {"KERAS_BACKEND": "tensorflow"}  # --prepare: on the CPU, with TensorFlow
    done = run_on_jax([*common, "--prepare", str(prepared)], timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (prepared / "minilm" / "model.safetensors").stat().st_size < 50e6  # half precision: it travels
    out = tmp_path / "gpu.json"
    done = run_on_jax(
        [
            *common,
            *("--prepared", str(prepared), "--models", "sasrec,bert4rec,hstu,unisrec,recformer-pretrained"),
            *("--minutes", "5", "--pretrain-minutes", "0.05", "--config", json.dumps(ID_CONFIG)),
            *("--recformer-config", json.dumps(RECFORMER_CONFIG), "--json", str(out), "--commit", "test"),
        ],
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stored = json.loads(out.read_text())
    records = benchmark_script("records")
    assert [records.validate(rec) for rec in stored] == [[]] * 5
    assert [r["model"] for r in stored] == ["sasrec", "bert4rec", "hstu", "unisrec", "recformer-pretrained"]
    for rec in stored:
        assert rec["dataset"] == f"{SCIENTIFIC}/Scientific.inter.json" and "cpu" in rec["environment"]
        assert 0 <= rec["metrics"]["ndcg@10"] <= rec["metrics"]["hr@10"] <= 1, rec["metrics"]
        assert all(np.isfinite(p["loss"]) for p in rec["curve"]), rec["curve"]
    by_model = {r["model"]: r for r in stored}
    for name in ("sasrec", "bert4rec", "hstu", "unisrec"):
        assert len(by_model[name]["curve"]) == 3  # the given epochs: 5 minutes never ran out
        assert by_model[name]["options"]["hidden_dim"] == 8
    masking = by_model["bert4rec"]["extra"]["masking"]
    assert masking["step_ms"] > 0 and masking["premasked_step_ms"] > 0 and masking["masking_share"] < 1
    recformer = by_model["recformer-pretrained"]
    assert [p["stage"] for p in recformer["curve"]] == [1, 1, 2]
    start = recformer["extra"]["start"]
    # ML-1M's 3,416 items: the 3 seconds end inside the alignment's first epoch (its first step
    # compiles for longer), so pre-training's own steps are left out here (jax_recformer.py fits
    # RecformerPretrainer on JAX); the run goes on to fine-tune.
    assert start["items"] == 3416 and len(start["align_losses"]) == 1 and start["losses"] == [], start
    assert recformer["options"]["max_tokens"] == 64
    assert os.path.basename(recformer["command"].split()[1]) == "gpu.py"
