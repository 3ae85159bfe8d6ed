"""Trains a tiny SASRec on the JAX backend, in a process of its own, and saves it.

Run by ``tests/backends/test_jax.py`` as ``KERAS_BACKEND=jax python jax_train.py OUT``:
``SASRec.fit`` on plain NumPy arrays (left-padded with 0), ``OUT/sasrec.keras``, and one
JSON line with the epochs' losses, the model's ``recommend`` answers for ``HISTORIES``
and whether training and ``recommend`` imported TensorFlow (they may not; Keras's
``.keras`` writer then looks it up itself when it is installed).
"""

import json
import pathlib
import sys

import keras
import numpy as np

from tfseqrec.models import SASRec

NUM_ITEMS, LENGTH = 20, 6
# Vocabulary ids (3 is the first item); the last one is shorter than the window.
HISTORIES = [[3, 4, 5, 6, 7, 8, 9], [12, 13, 14], [20, 21, 22, 5]]


def walks(num_rows=96, seed=0):
    """Histories ``i, i + 1, ...`` over the catalogue (left-padded with 0): inputs and next items."""
    rng = np.random.default_rng(seed)
    start = rng.integers(3, 3 + NUM_ITEMS - LENGTH - 1, num_rows)
    sequences = start[:, None] + np.arange(LENGTH + 1)[None, :]
    item_ids, next_item_ids = sequences[:, :-1].astype("int32"), sequences[:, 1:].astype("int32")
    short = rng.integers(1, LENGTH, num_rows // 4)  # a quarter of the rows padded on the left
    for row, length in enumerate(short):
        item_ids[row, : LENGTH - length] = 0
        next_item_ids[row, : LENGTH - length] = 0
    return item_ids, next_item_ids


def main(out):
    # Not keras.utils.set_random_seed: it seeds TensorFlow too, importing it.
    item_ids, next_item_ids = walks()
    model = SASRec(num_items=NUM_ITEMS, max_sequence_length=LENGTH, hidden_dim=8, num_heads=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(item_ids, next_item_ids, epochs=8, batch_size=16, verbose=0)
    ids, scores = model.recommend(HISTORIES, k=5)
    # Read before saving: Keras's .keras writer looks TensorFlow up whenever it is installed.
    tensorflow_imported = "tensorflow" in sys.modules
    model.save(pathlib.Path(out) / "sasrec.keras")
    result = {
        "backend": keras.backend.backend(),
        "loss": [float(v) for v in history.history["loss"]],
        "ids": np.asarray(ids).tolist(),
        "scores": np.asarray(scores).tolist(),
        "tensorflow_imported": tensorflow_imported,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
