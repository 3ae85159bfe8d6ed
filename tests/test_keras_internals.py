"""The private Keras and TensorFlow attributes ``tfseqrec.keras_internals`` relies on are still there.

A Keras or TensorFlow release may rename any of them; these tests fail first, naming
the attribute and the installed versions, instead of multi-worker training or
``RowSparseAdam`` going wrong quietly.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.distribute import values as tf_values

from tfseqrec import distribute, keras_internals

VERSIONS = f"Keras {keras.__version__} (TensorFlow {tf.__version__})"


class _Probe(keras_internals.MultiWorkerBuild, keras.Model):
    """A one-layer model built the way ``SequentialRecommender`` is."""

    def __init__(self):
        super().__init__(name="probe")
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        return self.dense(x)


class _CatchIterator(keras.Sequential):
    """Keeps the iterator ``fit`` passes to ``_maybe_symbolic_build``."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        self.iterators.append(iterator)
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


def _epoch_iterator():
    model = _CatchIterator([keras.layers.Dense(1)], name="catch_iterator")
    model.iterators = []
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.zeros((4, 2), np.float32), np.zeros((4, 1), np.float32), batch_size=2, epochs=1, verbose=0)
    assert model.iterators, f"{VERSIONS}: fit no longer calls Model._maybe_symbolic_build"
    return model.iterators[0]


class _Nested(keras.Model):
    """A dense layer at ``inner`` (``nested=True``, as a task holds its backbone) or at the top.

    ``load_own_variables`` keeps the store Keras passes it and, when asked, remaps what
    the load reads next, as ``tfseqrec.models.tasks`` does.
    """

    def __init__(self, nested=False, remap=None):
        super().__init__(name="nested")
        self.remap = remap
        self.stores, self.entry_paths = [], []
        if nested:
            self.inner = keras.Sequential([keras.layers.Dense(2, name="dense")], name="inner")
        else:
            self.dense = keras.layers.Dense(2, name="dense")
        self.build_from_config({"input_shape": (1, 3)})

    def build(self, input_shape):
        (self.inner if hasattr(self, "inner") else self.dense).build(input_shape)

    def load_own_variables(self, store):
        self.stores.append(store)
        self.entry_paths.append(keras_internals.store_entry_path(store))
        if self.remap is not None:
            keras_internals.read_moved_weights(store, self.remap)
        super().load_own_variables(store)


def _weights_store():
    model = _Nested()
    path = f"{pytest.importorskip('tempfile').mkdtemp()}/nested.weights.h5"
    model.save_weights(path)
    model.load_weights(path)
    return model.stores[0]


def _built_adam():
    variable = keras.Variable(np.zeros((3, 2), np.float32))
    adam = keras.optimizers.Adam()
    adam.build([variable])
    return adam


OBJECTS = {
    "keras.Model": lambda: keras.Model,
    "keras.Model()": lambda: keras.Sequential([keras.layers.Dense(1)]),
    "fit's epoch iterator": _epoch_iterator,
    "tf PerReplicaSpec": lambda: tf_values.PerReplicaSpec(tf.TensorSpec([2])),
    "keras.optimizers.Adam": lambda: keras.optimizers.Adam,
    "keras.optimizers.Adam (built)": _built_adam,
    "the weights store load_own_variables gets": _weights_store,
}


@pytest.mark.parametrize("where, attribute", keras_internals.RELIED_ON, ids=lambda x: str(x))
def test_every_private_attribute_relied_on_is_there(where, attribute):
    assert hasattr(OBJECTS[where](), attribute), (
        f"{VERSIONS} has no {where}.{attribute}, which tfseqrec.keras_internals relies on: adapt that "
        "module (and RELIED_ON) to this version"
    )


def test_fit_builds_through_the_multi_worker_path(monkeypatch):
    # The multi-worker branch, on one device: the model is built from the dataset's
    # element spec (no batch drawn), then trains as usual.
    monkeypatch.setattr(distribute, "is_multi_worker", lambda strategy: strategy is not None)
    read = []
    monkeypatch.setattr(
        keras_internals,
        "iterator_dataset",
        lambda iterator: read.append(iterator) or iterator._distributed_dataset,
    )
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        model = _Probe()
        model.compile(optimizer="sgd", loss="mse")
    assert keras_internals.model_strategy(model) is not None, f"{VERSIONS}: Model._distribute_strategy"
    model.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), batch_size=2, epochs=1, verbose=0)
    assert read and model.built, f"{VERSIONS}: fit did not build through MultiWorkerBuild"
    spec = keras_internals.replica_spec(tf_values.PerReplicaSpec(tf.TensorSpec([2]), tf.TensorSpec([2])))
    assert spec == tf.TensorSpec([2])


def test_adam_slots_are_the_moments_of_the_variable():
    variable = keras.Variable(np.zeros((3, 2), np.float32))
    adam = keras.optimizers.Adam(learning_rate=0.1, beta_1=0.9, beta_2=0.99)
    adam.build([variable])
    adam.apply_gradients([(tf.ones((3, 2)), variable)])
    m, v = keras_internals.adam_slots(adam, variable)
    np.testing.assert_allclose(m.numpy(), np.full((3, 2), 0.1), rtol=1e-6)  # (1 - beta_1) * g
    np.testing.assert_allclose(v.numpy(), np.full((3, 2), 0.01), rtol=1e-6)  # (1 - beta_2) * g^2


def test_a_moved_layer_reads_its_weights_from_where_the_file_keeps_them(tmp_path):
    flat = _Nested()
    flat.dense.kernel.assign(np.arange(6, dtype=np.float32).reshape(3, 2))
    flat.save_weights(tmp_path / "flat.weights.h5")
    # The file keeps the dense layer at "dense"; the nested model asks for "inner/layers/dense".
    moved = _Nested(nested=True, remap=lambda path: path.replace("inner/layers/", ""))
    moved.load_weights(tmp_path / "flat.weights.h5")
    assert moved.entry_paths == [""], f"{VERSIONS}: H5IOStore._h5_entry_path"
    kernel = moved.inner.layers[0].kernel.numpy()
    assert np.array_equal(kernel, np.arange(6).reshape(3, 2)), (
        f"{VERSIONS}: load_weights no longer asks the store given to load_own_variables for the layers after"
    )
