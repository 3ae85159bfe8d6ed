"""Two worker processes on localhost train one model (``--strategy multi_worker``).

Each worker runs ``tfseqrec train`` with its own ``TF_CONFIG``; the model the chief
writes must be the one a single process trains on the same global batches.
"""

import csv
import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np

import tfseqrec.models  # noqa: F401 (registers the model classes that load_model reads)
from tfseqrec.data import synthetic

# dropout 0: a replica's dropout masks are drawn for its half of the batch, not the whole
CONFIG = {
    "epochs": 2,
    "batch_size": 16,
    "hidden_dim": 8,
    "num_layers": 1,
    "max_sequence_length": 8,
    "dropout": 0.0,
    "seed": 3,
}


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _train_command(data, output, *extra):
    return [
        sys.executable,
        "-m",
        "tfseqrec.cli",
        "train",
        "--model",
        "sasrec",
        "--data",
        str(data),
        "--output",
        str(output),
        "--config",
        json.dumps(CONFIG),
        "--quiet",
        *extra,
    ]


def _env(tf_config=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _history(run):
    with open(run / "history.csv") as f:
        return list(csv.DictReader(f))


def test_two_workers_train_the_single_worker_model(tmp_path):
    data = synthetic.write_csv(synthetic.generate(900, 40, 30, seed=2), tmp_path / "log.csv")
    workers = [f"localhost:{port}" for port in _free_ports(2)]
    processes = [
        subprocess.Popen(
            _train_command(data, tmp_path / "cluster", "--strategy", "multi_worker"),
            env=_env({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for index, (process, output) in enumerate(zip(processes, outputs)):
        assert process.returncode == 0, f"worker {index}:\n{output[-3000:]}"
    single = subprocess.run(
        _train_command(data, tmp_path / "single"), env=_env(), capture_output=True, text=True, timeout=600
    )
    assert single.returncode == 0, single.stderr[-3000:]

    # The chief (worker 0) wrote the model directory; worker 1's copy is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster", "log.csv", "single"]
    cluster = keras.saving.load_model(tmp_path / "cluster" / "model.keras")
    alone = keras.saving.load_model(tmp_path / "single" / "model.keras")
    assert len(cluster.weights) == len(alone.weights)
    for mine, theirs in zip(cluster.weights, alone.weights):
        np.testing.assert_allclose(
            np.asarray(mine), np.asarray(theirs), rtol=1e-4, atol=1e-5, err_msg=mine.path
        )
    # The same epochs, losses and validation metrics, logged as scalars.
    rows, single_rows = _history(tmp_path / "cluster"), _history(tmp_path / "single")
    assert len(rows) == len(single_rows) == CONFIG["epochs"]
    for row, other in zip(rows, single_rows):
        for key in ("loss", "val_loss", "val_ndcg_10", "val_hr_10"):
            assert abs(float(row[key]) - float(other[key])) < 1e-4, (key, row[key], other[key])
