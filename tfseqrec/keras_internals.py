"""Every private Keras and TensorFlow attribute the library relies on, in one place.

Neither library promises these; a release can rename any of them. ``RELIED_ON`` lists
each one, and ``tests/test_keras_internals.py`` checks them against the installed
versions and fails naming the version when one is gone, so a change shows up as one
failing test instead of as multi-worker training that silently differs.

- ``MultiWorkerBuild``: a ``keras.Model`` mix-in. Keras 3's ``fit`` builds the model
  from a batch it draws and averages across workers, which fails under
  ``MultiWorkerMirroredStrategy`` (keras-team/keras#20585); the mix-in builds it from
  the dataset's element spec instead (``Model._maybe_symbolic_build``,
  ``Model._symbolic_build``, ``Model._distribute_strategy``, the epoch iterator's
  ``_distributed_dataset``, ``PerReplicaSpec._value_specs``).
- ``adam_slots``: an Adam optimizer's first and second moments of one variable
  (``_get_variable_index``, ``_momentums``, ``_velocities``), which ``RowSparseAdam``
  updates row by row.
- ``store_entry_path``, ``read_moved_weights``: while ``keras.saving.load_model`` reads a
  model file, the store a layer's ``load_own_variables`` receives is the file's weights
  store itself, opened at that layer's path (``H5IOStore._h5_entry_path``), and Keras
  asks its ``get(path)`` for every layer after; a task reads a file written when its
  weights lay at other paths by remapping those (``tfseqrec.models.tasks``).
"""

import keras

# Several workers are the TensorFlow backend's (tf.distribute): on another backend the
# model-file helpers below are used alone, and TensorFlow is not imported.
if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

    from tfseqrec import distribute

# (where, attribute): what this module reads. "where" names an object the test builds.
RELIED_ON = (
    ("keras.Model", "_maybe_symbolic_build"),
    ("keras.Model", "_symbolic_build"),
    ("keras.Model()", "_distribute_strategy"),
    ("fit's epoch iterator", "_distributed_dataset"),
    ("tf PerReplicaSpec", "_value_specs"),
    ("keras.optimizers.Adam", "_get_variable_index"),
    ("keras.optimizers.Adam (built)", "_momentums"),
    ("keras.optimizers.Adam (built)", "_velocities"),
    ("the weights store load_own_variables gets", "_h5_entry_path"),
)


def replica_spec(element_spec):
    """One replica's ``tf.TensorSpec`` nest of a distributed dataset's ``element_spec``."""

    def first(spec):  # a PerReplicaSpec (several local replicas) holds one spec per replica
        specs = getattr(spec, "_value_specs", None)
        return specs[0] if specs else spec

    return tf.nest.map_structure(first, element_spec, expand_composites=False)


def model_strategy(model):
    """The strategy ``model`` was created under (``None`` outside any), as ``fit`` reads it."""
    return model._distribute_strategy


def iterator_dataset(iterator):
    """The distributed dataset behind ``fit``'s epoch iterator."""
    return iterator._distributed_dataset


class MultiWorkerBuild:
    """Mix-in for a ``keras.Model`` (before it in the bases): ``fit`` under several workers
    builds the model from the dataset's element spec, drawing no batch.

    Keras builds the model from a batch it draws and averages across workers: the
    average fails for a batch of several tensors, and the draw opens an iterator, which
    moves a reshuffling dataset to its next order (the workers would then train on other
    batches than one worker does). Only shapes and dtypes are read: here they come from
    the element spec. On one worker, Keras's own build runs unchanged.
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = model_strategy(self)
        if not distribute.is_multi_worker(strategy):
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        if iterator is not None:
            data_batch = replica_spec(iterator_dataset(iterator).element_spec)
        data_batch = keras.tree.map_structure(
            lambda value: distribute.local_value(strategy, value), data_batch
        )
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)


def adam_slots(optimizer, variable):
    """``(first moment, second moment)``: the slot variables of ``variable`` in an Adam ``optimizer``."""
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


def store_entry_path(store):
    """The path the weights ``store`` that ``load_own_variables`` received is opened at.

    ``None`` for a store of another kind than a model file's (a plain dict of arrays).
    """
    if not hasattr(store, "has_path"):
        return None
    return store._h5_entry_path


def read_moved_weights(store, where):
    """Makes the weights ``store`` read ``where(path)`` whenever Keras asks it for ``path``.

    For the rest of the load that is under way (Keras asks the same store for every
    layer after the one it gave it to); once per store.
    """
    if getattr(store, "tfseqrec_moved", False):
        return
    get = store.get
    store.get = lambda path: get(where(path))
    store.tfseqrec_moved = True
