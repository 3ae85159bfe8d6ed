"""The library on the JAX backend (Keras 3 fixes its backend at import, so in processes of their own).

- ``test_core_runs_without_tensorflow``: ``jax_core.py`` imports and uses the layers,
  losses, Cloze masking, ranking and metrics with ``KERAS_BACKEND=jax``; TensorFlow must
  not be imported on the way.
- ``test_trained_on_jax_served_on_tensorflow``: ``jax_train.py`` fits a tiny SASRec on
  NumPy arrays with ``KERAS_BACKEND=jax`` (its loss falls) and saves it; this process
  (the TensorFlow backend) loads the ``.keras`` file, exports the SavedModel and gets
  the JAX model's ``recommend`` answers from its signatures.
- Recformer's run on JAX: ``test_recformer_on_jax.py`` (a file of its own, so that a second
  test process takes it beside the oracle run here).
- ``test_oracle_tests_pass_on_jax``: the NumPy-oracle test files (``JAX_TEST_FILES``) run
  again under ``KERAS_BACKEND=jax``: the same tests, the same oracles, another backend;
  with them ``test_models_on_jax.py`` (HSTU, SASRec with BCE, UniSRec and BERT4Rec fit,
  fresh negatives and masks each step, validation inside ``fit``, feeding from
  ``numpy_pipeline`` and from ``tf.data``).

Both need JAX, which the latest stack's lock installs (``make test-latest``); elsewhere
they are skipped.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# The test files that run on JAX too; tests a file keeps for TensorFlow skip themselves there.
JAX_TEST_FILES = [
    "tests/layers/test_layer_harness.py",
    "tests/layers/test_hstu_layer.py",
    "tests/layers/test_transformer_block.py",
    "tests/test_losses.py",
    "tests/data/test_masking.py",
    "tests/test_metrics.py",
    "tests/backends/test_models_on_jax.py",
]

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is in the latest stack only"),
    pytest.mark.skipif(os.environ.get("KERAS_BACKEND") == "jax", reason="started from the JAX run itself"),
]


def run_on_jax(args, timeout, env=None):
    """``python ARGS`` in the repository with ``KERAS_BACKEND=jax`` (or ``env`` over it): the completed process."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_core_runs_without_tensorflow():
    done = run_on_jax([str(REPO / "tests" / "backends" / "jax_core.py")], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["backend"] == "jax"
    assert out["layers"] == [[2, 5, 8], [2, 5, 8]]
    assert all(value > 0 for value in out["losses"].values()), out["losses"]
    assert out["masked"] >= 2  # at least one chosen item in each of the two rows
    # Hand-computed: ranking's module docstring case and its top-k with the history excluded.
    assert out["ranking"]["ranks"] == [2, 0] and out["ranking"]["top_k"] == [[0, 2], [2, 1]]
    assert out["ranking"]["metrics"]["hr@1"] == 0.5
    assert not out["tensorflow_imported"]


def test_trained_on_jax_served_on_tensorflow(tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the serving half runs on the TensorFlow backend")
    done = run_on_jax([str(REPO / "tests" / "backends" / "jax_train.py"), str(tmp_path)], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    trained = json.loads(done.stdout.strip().splitlines()[-1])
    assert trained["backend"] == "jax" and not trained["tensorflow_imported"]
    assert trained["loss"][-1] < 0.5 * trained["loss"][0], trained["loss"]  # a short fit that learns
    from tests.backends import jax_train

    model = keras.saving.load_model(tmp_path / "sasrec.keras")
    _answers_as_on_jax(model, jax_train.HISTORIES, jax_train.NUM_ITEMS, trained, tmp_path, 1e-5)


def _answers_as_on_jax(model, histories, num_items, trained, tmp_path, tolerance):
    """``model``, loaded on TensorFlow, and its SavedModel give the JAX run's top 5 of ``histories``."""
    import tfseqrec  # the TensorFlow side: the model trained on JAX, exported
    from tfseqrec import serving
    from tfseqrec.data import ItemVocabulary

    ids, scores = model.recommend(histories, k=5)
    _assert_same_ranking(np.asarray(ids).tolist(), trained, tolerance)
    np.testing.assert_allclose(scores, trained["scores"], atol=tolerance, rtol=tolerance)
    vocabulary = ItemVocabulary([f"i{j}" for j in range(num_items)])
    path, _ = tfseqrec.export_model(model, vocabulary, tmp_path / "saved_models", k=5, warmup=False)
    raw = [vocabulary.to_raw(history) for history in histories]
    out = serving.SavedModelPredictor(path).run("serving_default", {"history": serving.pad_histories(raw)})
    served = [vocabulary.lookup([v.decode() for v in row]).tolist() for row in out["item_ids"]]
    _assert_same_ranking(served, trained, tolerance)
    np.testing.assert_allclose(out["scores"], trained["scores"], atol=tolerance, rtol=tolerance)


def _assert_same_ranking(ids, trained, tolerance):
    """``ids`` rank as the JAX run's top 5 did; items whose JAX scores are within ``tolerance``
    of each other (a tie the two backends' rounding may break either way) in any order."""
    for got, want, scores in zip(ids, trained["ids"], trained["scores"]):
        groups = [[0]]
        for i in range(1, len(want)):
            if abs(scores[i] - scores[i - 1]) <= tolerance * (1 + abs(scores[i - 1])):
                groups[-1].append(i)
            else:
                groups.append([i])
        assert [sorted(got[i] for i in g) for g in groups] == [sorted(want[i] for i in g) for g in groups], (
            got,
            want,
            scores,
        )


def test_oracle_tests_pass_on_jax():
    done = run_on_jax(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *JAX_TEST_FILES], timeout=900
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary, summary
