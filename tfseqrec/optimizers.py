"""Adam that updates only the rows of an embedding table a batch touched.

With a sampled loss, a batch reads a few thousand rows of a million-row item table.
Keras's ``Adam`` gets the table's gradient as a dense ``[num_items, d]`` tensor and
rewrites the whole table and both its moment slots every step: at a million items that
was most of a training step (benchmarks/README.md, "Scale"). A model compiled with ``RowSparseAdam``
reads its output table by rows (``tfseqrec.losses.ItemRows``), so the gradient is
``tf.IndexedSlices`` of the rows read, and ``RowSparseAdam`` updates those rows alone, as
TensorFlow Addons' ``LazyAdam`` and PyTorch's ``SparseAdam`` do; dense gradients (every
other weight) get Keras's Adam unchanged.

The rows a batch does not touch keep their moments and do not move, where dense Adam
would still decay the moments and move the row by its momentum: a different (the
usual "lazy") optimizer, not a faster copy of the same one.
"""

import keras
import tensorflow as tf

from tfseqrec import keras_internals


@keras.saving.register_keras_serializable(package="tfseqrec")
class RowSparseAdam(keras.optimizers.Adam):
    """``keras.optimizers.Adam``; a ``tf.IndexedSlices`` gradient updates its rows only.

    Duplicate rows in the gradient are summed first (a row read twice in a batch
    gets one update with the sum, as a dense gradient would give it; Keras 3.12's
    Adam, given ``tf.IndexedSlices`` with a repeated row, adds the squares of the
    pieces to the second moment instead of the square of their sum). The bias
    correction uses the global step, as Adam's.

    Example:

    >>> table = keras.Variable([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    >>> opt = RowSparseAdam(learning_rate=0.1)
    >>> opt.apply([tf.IndexedSlices(tf.constant([[1.0, -1.0]]), tf.constant([1]), tf.constant([3, 2]))], [table])
    >>> [[round(float(x), 3) for x in row] for row in table.numpy()]  # row 1 alone moves, by lr
    [[1.0, 1.0], [0.9, 1.1], [1.0, 1.0]]
    """

    def __init__(self, learning_rate=0.001, amsgrad=False, name="row_sparse_adam", **kwargs):
        if amsgrad:
            raise ValueError("RowSparseAdam does not implement amsgrad")
        super().__init__(learning_rate=learning_rate, amsgrad=False, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        rows, position = tf.unique(tf.cast(gradient.indices, "int32"))
        grad = tf.math.unsorted_segment_sum(tf.cast(gradient.values, dtype), position, tf.shape(rows)[0])
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        alpha = tf.cast(learning_rate, dtype) * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))
        m, v = keras_internals.adam_slots(self, variable)
        m_rows = beta_1 * tf.gather(m, rows) + (1 - beta_1) * grad
        v_rows = beta_2 * tf.gather(v, rows) + (1 - beta_2) * tf.square(grad)
        shape = tf.shape(variable, out_type="int32")
        self.assign(m, tf.IndexedSlices(m_rows, rows, shape))
        self.assign(v, tf.IndexedSlices(v_rows, rows, shape))
        self.assign_sub(
            variable, tf.IndexedSlices(alpha * m_rows / (tf.sqrt(v_rows) + self.epsilon), rows, shape)
        )
