"""Training on several devices: ``tf.distribute`` strategies by name.

- ``mirrored``: every local device (GPUs, or the CPU) holds a replica of the model;
  each step's batch is split across them and the gradients are summed
  (``tf.distribute.MirroredStrategy``). The loss is scaled to the global mean over
  target positions (``SequentialRecommender.compute_loss``), so the trained model is
  the one-device model (tested on two logical CPUs).
- ``multi_worker`` (several machines, ``MultiWorkerMirroredStrategy`` and
  ``TF_CONFIG``) is refused: Keras 3's ``fit`` cannot run under that strategy. Before
  its first step it averages a batch across workers to build the model
  (``_maybe_symbolic_build``), which fails for any batch that is a nest of tensors,
  as every tfseqrec batch is (keras-team/keras#20585, tensorflow/tensorflow#72388;
  seen here with Keras 3.12 and in Keras 3.15's source). Two worker processes on
  localhost connected, then failed at that step.
"""

import tensorflow as tf

STRATEGIES = ("mirrored", "multi_worker")

MULTI_WORKER_BLOCKED = (
    "the multi_worker strategy is not available: Keras 3's fit fails under MultiWorkerMirroredStrategy for "
    "batches of several tensors (keras-team/keras#20585, tensorflow/tensorflow#72388); train on one machine, "
    "with --strategy mirrored for its several GPUs"
)


def make_strategy(name):
    """The strategy called ``name`` (one of ``STRATEGIES``), or ``None`` for ``None``."""
    if name is None:
        return None
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        raise ValueError(MULTI_WORKER_BLOCKED)
    raise ValueError(f"unknown strategy {name!r}; expected one of {STRATEGIES}")


def resolve(strategy):
    """A strategy object from a name, an object or ``None``."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError(MULTI_WORKER_BLOCKED)
    return make_strategy(strategy) if strategy is None or isinstance(strategy, str) else strategy
