"""The id models trained on the JAX backend: run by ``test_jax.py`` with ``KERAS_BACKEND=jax``.

Each fit is a few steps of a tiny model on walks ``i, i + 1, ...``, whose next item is
always learnable; skipped on another backend (the TensorFlow suite trains the same
models in tests/models).
"""

import keras
import numpy as np
import pytest

from tests.backends import jax_train
from tfseqrec import losses, metrics
from tfseqrec.data import numpy_pipeline, pipeline, splits  # pipeline: tf.data, which Keras reads on JAX
from tfseqrec.models import HSTU, BERT4Rec, SASRec, UniSRec

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX backend's tests")
SIZES = {
    "num_items": jax_train.NUM_ITEMS,
    "max_sequence_length": jax_train.LENGTH,
    "hidden_dim": 8,
    "num_heads": 2,
}


def _fit(model, x, y=None, epochs=6, **kwargs):
    model.compile(optimizer=keras.optimizers.Adam(1e-2), **kwargs.pop("compile", {}))
    return model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, **kwargs).history


@pytest.mark.parametrize(
    "make",
    [
        lambda: HSTU(**SIZES),
        lambda: SASRec(**SIZES, loss=losses.BinaryCrossEntropy(num_negatives=2, seed=0)),
        lambda: UniSRec(
            **SIZES,
            text_dim=16,
            text_embeddings=np.random.default_rng(0).normal(size=(jax_train.NUM_ITEMS, 16)).astype("float32"),
        ),
    ],
    ids=["hstu", "sasrec_bce", "unisrec"],
)
def test_loss_falls(make):
    history = _fit(make(), *jax_train.walks())
    assert history["loss"][-1] < 0.7 * history["loss"][0], history["loss"]


def test_sampled_negatives_are_drawn_fresh_each_step():
    # The loss's seed generator is the model's state: JAX's steps carry it on.
    loss = losses.SampledSoftmaxCrossEntropy(num_negatives=4, seed=0)
    model = SASRec(**SIZES, loss=loss)
    before = np.asarray(loss.seed_generator.state.value).copy()
    _fit(model, *jax_train.walks(num_rows=32), epochs=1)  # 2 steps
    assert not np.array_equal(np.asarray(loss.seed_generator.state.value), before)


def test_bert4rec_masks_inside_each_step():
    model = BERT4Rec(**SIZES, mask_prob=0.3, seed=1)
    state = model.masking.seed_generator.state
    before = np.asarray(state.value).copy()
    history = _fit(model, {"item_ids": jax_train.walks()[0]}, epochs=8)
    assert history["loss"][-1] < 0.9 * history["loss"][0], history["loss"]
    assert not np.array_equal(np.asarray(state.value), before)  # fresh masks each step


def test_validation_ranks_the_next_item():
    item_ids, next_item_ids = jax_train.walks()
    # Validation cases: the window's next item, the window its history.
    window, target = next_item_ids[:16], next_item_ids[:16, -1] + 1
    history = _fit(
        SASRec(**SIZES),
        item_ids,
        next_item_ids,
        validation_data=({"item_ids": window, "history": window}, target),
        compile={"metrics": [metrics.HitRate(k=3)]},
    )
    assert history["val_hr_3"][-1] > 0.5, history  # the walk's next item, most of the time
    assert history["val_loss"][-1] < history["val_loss"][0]


def _sequences():
    item_ids, next_item_ids = jax_train.walks(num_rows=48)
    rows = [
        [int(i) for i in row if i] + [int(row_next[-1])] for row, row_next in zip(item_ids, next_item_ids)
    ]
    return splits.Sequences.from_list(range(len(rows)), rows)


def test_fit_from_the_numpy_batches_and_from_tf_data():
    sequences = _sequences()
    for data in (
        numpy_pipeline.causal_batches(sequences, jax_train.LENGTH, 16, seed=0),
        pipeline.causal_dataset(sequences, jax_train.LENGTH, 16, seed=0),
    ):
        history = _fit(SASRec(**SIZES), data)
        assert history["loss"][-1] < 0.7 * history["loss"][0], history["loss"]
    history = _fit(
        BERT4Rec(**SIZES, seed=1), numpy_pipeline.cloze_batches(sequences, jax_train.LENGTH, 16, seed=0)
    )
    assert history["loss"][-1] < history["loss"][0], history["loss"]
