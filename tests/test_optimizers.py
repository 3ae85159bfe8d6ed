"""RowSparseAdam against a NumPy transcription of lazy Adam, and the sparse path end to end."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfseqrec import losses
from tfseqrec.models import HSTU, SASRec
from tfseqrec.optimizers import RowSparseAdam
from tfseqrec.training import TrainConfig, id_models


def _lazy_adam(w, steps, lr=0.01, b1=0.9, b2=0.999, eps=1e-7):
    """Lazy Adam by hand: duplicate rows summed; only the rows of a step move."""
    w = w.astype(np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, (index, values) in enumerate(steps, start=1):
        g = np.zeros_like(w)
        np.add.at(g, index, values)
        rows = np.unique(index)
        m[rows] = b1 * m[rows] + (1 - b1) * g[rows]
        v[rows] = b2 * v[rows] + (1 - b2) * g[rows] ** 2
        w[rows] -= lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m[rows] / (np.sqrt(v[rows]) + eps)
    return w


def test_row_sparse_adam_equals_lazy_adam_by_hand():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(6, 3)).astype(np.float32)
    steps = [
        (rng.integers(0, 6, 4), rng.normal(size=(4, 3)).astype(np.float32)) for _ in range(5)
    ]  # repeats rows
    table, opt = keras.Variable(w0), RowSparseAdam(learning_rate=0.01)
    for index, values in steps:
        opt.apply([tf.IndexedSlices(tf.constant(values), tf.constant(index), tf.constant([6, 3]))], [table])
    np.testing.assert_allclose(table.numpy(), _lazy_adam(w0, steps), atol=1e-6)
    untouched = sorted(set(range(6)) - {int(i) for index, _ in steps for i in index})
    np.testing.assert_array_equal(table.numpy()[untouched], w0[untouched])


def test_a_dense_gradient_gets_keras_adam():
    w0, g = np.ones((3, 2), np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)
    a, b = keras.Variable(w0), keras.Variable(w0)
    sparse, dense = RowSparseAdam(0.1), keras.optimizers.Adam(0.1)
    for _ in range(3):
        sparse.apply([tf.constant(g)], [a])
        dense.apply([tf.constant(g)], [b])
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("cls", [SASRec, HSTU])
def test_sampled_training_touches_only_the_rows_it_reads(cls):
    """The item table's gradient is IndexedSlices; a fit step leaves unread rows as they were."""
    rng = np.random.default_rng(1)
    loss = losses.SampledSoftmaxCrossEntropy(num_negatives=5, sampler="uniform", seed=0)
    model = cls(num_items=200, max_sequence_length=4, hidden_dim=8, num_layers=1, num_heads=1, loss=loss)
    x = {"item_ids": tf.constant(rng.integers(3, 203, (3, 4)))}
    y = tf.constant(rng.integers(3, 203, (3, 4)))
    model(x)
    model.compile(optimizer=RowSparseAdam(1e-2))  # the loss reads the table by rows under it
    with tf.GradientTape() as tape:
        value = model.compute_loss(x, y, model(x, training=True), training=True)
    (grad,) = tape.gradient(value, [model.backbone.item_embedding.embeddings])
    assert isinstance(grad, tf.IndexedSlices)
    # ItemRows reads the same table the scores use (HSTU: normalised rows).
    rows, _ = model.output_rows()
    np.testing.assert_allclose(
        rows.rows(tf.constant([0, 7])), tf.gather(model.output_table()[0], [0, 7]), atol=1e-6
    )
    before = model.backbone.item_embedding.embeddings.numpy()
    model.fit(x, y, epochs=1, verbose=0)
    moved = np.flatnonzero(np.any(model.backbone.item_embedding.embeddings.numpy() != before, axis=1))
    assert 0 < len(moved) <= 12 + 12 + 5  # 12 inputs, 12 targets and 5 negatives, of 203 rows


def test_sparse_item_updates_default_and_refusal():
    small, large = 1_000, id_models.SPARSE_UPDATES_MIN_ITEMS
    sampled = TrainConfig(loss="sampled_softmax")
    assert not id_models.sparse_item_updates(sampled, small) and id_models.sparse_item_updates(sampled, large)
    assert not id_models.sparse_item_updates(TrainConfig(), large)  # full softmax: dense
    assert id_models.sparse_item_updates(TrainConfig(loss="bce", sparse_item_updates=True), small)
    assert not id_models.sparse_item_updates(TrainConfig(loss="bce", sparse_item_updates=False), large)
    with pytest.raises(ValueError, match="needs a sampled loss"):
        TrainConfig(sparse_item_updates=True)


def test_under_keras_adam_the_loss_reads_the_whole_table():
    """Keras's Adam gets the dense item-table gradient it has always had."""
    rng = np.random.default_rng(2)
    loss = losses.SampledSoftmaxCrossEntropy(num_negatives=5, seed=0)
    model = SASRec(num_items=50, max_sequence_length=4, hidden_dim=8, num_layers=1, loss=loss)
    x, y = {"item_ids": tf.constant(rng.integers(3, 53, (3, 4)))}, tf.constant(rng.integers(3, 53, (3, 4)))
    model(x)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    with tf.GradientTape() as tape:
        value = model.compute_loss(x, y, model(x, training=True), training=True)
    (grad,) = tape.gradient(value, [model.backbone.item_embedding.embeddings])
    assert not isinstance(grad, tf.IndexedSlices)
