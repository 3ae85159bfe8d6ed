"""The backend-agnostic core used on the JAX backend, in a process of its own.

Run by ``tests/backends/test_jax.py`` as ``KERAS_BACKEND=jax python jax_core.py``: it
imports and uses the layers, losses, Cloze masking, ranking and metrics, then prints
one JSON line with what it computed and whether TensorFlow was imported (it may not
be).
"""

import json
import sys

import keras
import numpy as np

from tfseqrec import losses, metrics, ranking
from tfseqrec.data import masking, vocab
from tfseqrec.layers import HSTULayer, TransformerBlock


def _layers(rng):
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    padding = np.array([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], bool)
    block = TransformerBlock(num_heads=2, intermediate_dim=16)
    hstu = HSTULayer(num_heads=2, attention_dim=4, linear_dim=4, max_sequence_length=5)
    return [tuple(block(x, padding_mask=padding).shape), tuple(hstu(x, padding_mask=padding).shape)]


def _losses(rng):
    hidden = rng.normal(size=(6, 8)).astype("float32")
    positives = np.array([0, 3, 5, 7, 2, 1], np.int32)
    table = losses.ItemRows(keras.Variable(rng.normal(size=(vocab.NUM_RESERVED + 9, 8)).astype("float32")), 3)
    seen = np.zeros((2, 9), bool)
    seen[0, [0, 3, 5]] = True
    history = (np.array([0, 0, 0, 1, 1, 1], np.int32), seen)
    values = {}
    for loss in (
        losses.FullSoftmaxCrossEntropy(exclude_history=True),
        losses.BinaryCrossEntropy(num_negatives=2, seed=0),
        losses.GBCE(num_negatives=4, seed=0),
        losses.SampledSoftmaxCrossEntropy(num_negatives=4, seed=0),
        losses.SampledSoftmaxCrossEntropy(num_negatives=4, sampler="uniform", per_position=True, seed=0),
    ):
        values[f"{loss.name}/{loss.get_config().get('sampler', '')}"] = float(
            loss.from_embeddings(hidden, positives, table, history=history)
        )
    return values


def _masking():
    preprocessor = masking.ClozePreprocessor(num_items=20, mask_prob=0.5, seed=1)
    x, y, weight = preprocessor({"item_ids": np.array([[0, 3, 4, 5], [6, 7, 8, 9]], np.int32)})
    return float(np.sum(np.asarray(weight)))


def _ranking():
    scores = np.array([[0.5, 0.9, 0.5, np.nan], [0.1, 0.2, 0.3, 0.4]], np.float32)
    targets = np.array([3, 6])
    ranks = ranking.rank_targets(scores, targets, history=np.array([[4, 0], [0, 0]]))
    values, columns = ranking.top_k(scores, 2, exclude=np.array([[4, 0], [6, 0]]))
    ndcg = metrics.NDCG(k=2)
    ndcg.update_state(targets, scores)
    return {
        "ranks": np.asarray(ranks).tolist(),
        "top_k": np.asarray(columns).tolist(),
        "ndcg": float(ndcg.result()),
        "metrics": ranking.metrics_from_ranks(np.asarray(ranks), ks=(1,)),
    }


def main():
    rng = np.random.default_rng(0)
    out = {
        "backend": keras.backend.backend(),
        "layers": _layers(rng),
        "losses": _losses(rng),
        "masked": _masking(),
        "ranking": _ranking(),
        "tensorflow_imported": "tensorflow" in sys.modules,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
