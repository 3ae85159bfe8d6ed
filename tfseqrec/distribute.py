"""Training on several devices and machines: ``tf.distribute`` strategies by name.

- ``mirrored``: every local device (GPUs, or the CPU) holds a replica of the model;
  each step's batch is split across them and the gradients are summed
  (``tf.distribute.MirroredStrategy``). The loss is scaled to the global mean over
  target positions (``SequentialRecommender.compute_loss``), so the trained model is
  the one-device model (tested on two logical CPUs).
- ``multi_worker``: the same across machines (``MultiWorkerMirroredStrategy``, the
  cluster read from ``TF_CONFIG``); every worker runs the same command, each global
  batch is split across all workers' replicas, and the gradients are all-reduced.
  The result is single-worker training on the same global batch (tested with two
  worker processes on localhost). The chief (task ``chief``, else worker 0) writes the
  model directory; every other worker writes its own copy beside it
  (``worker_output_dir``), removed when the run completes. Keras 3's ``fit`` needs two
  work-arounds under this strategy, in ``SequentialRecommender``
  (``tfseqrec.keras_internals.MultiWorkerBuild`` and ``step_logs``; keras-team/keras#20585), and the
  decisions callbacks take alone (the time budget) are agreed across workers
  (``any_worker``), so that no worker waits for another that has stopped.
"""

import json
import os

import tensorflow as tf

STRATEGIES = ("mirrored", "multi_worker")


def make_strategy(name):
    """The strategy called ``name`` (one of ``STRATEGIES``), or ``None`` for ``None``.

    ``multi_worker`` reads the cluster from ``TF_CONFIG`` and is refused without it (one
    worker alone is ``mirrored``; a missing ``TF_CONFIG`` is a launch that went wrong).
    """
    if name is None:
        return None
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"unknown strategy {name!r}; expected one of {STRATEGIES}")


def resolve(strategy):
    """A strategy object from a name, an object or ``None``."""
    return make_strategy(strategy) if strategy is None or isinstance(strategy, str) else strategy


def is_multi_worker(strategy):
    """Whether ``strategy`` spans several workers (replicas beyond this machine's)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return False
    return strategy.num_replicas_in_sync > len(strategy.extended.worker_devices)


def task(strategy):
    """``(task_type, task_id)`` of this process in a multi-worker cluster, ``None`` otherwise."""
    if not is_multi_worker(strategy):
        return None
    resolver = strategy.cluster_resolver
    return resolver.task_type, int(resolver.task_id)


def is_chief(strategy):
    """Whether this process writes the model directory: always, but in a multi-worker
    cluster only the ``chief`` task, or worker 0 where the cluster names no chief."""
    this = task(strategy)
    if this is None:
        return True
    task_type, task_id = this
    has_chief = "chief" in strategy.cluster_resolver.cluster_spec().as_dict()
    return task_type == "chief" or (not has_chief and task_type == "worker" and task_id == 0)


def worker_output_dir(output_dir, strategy):
    """Where this process writes: ``output_dir`` for the chief, ``output_dir.worker-N`` else."""
    if is_chief(strategy):
        return output_dir
    task_type, task_id = task(strategy)
    return f"{os.path.normpath(output_dir)}.{task_type}-{task_id}"


def any_worker(strategy, flag):
    """``flag`` or-ed over every worker (all-reduced): a decision they all take together."""
    if not is_multi_worker(strategy):
        return bool(flag)
    value = strategy.run(tf.identity, args=(tf.constant(1.0 if flag else 0.0),))
    return bool(strategy.reduce(tf.distribute.ReduceOp.MAX, value, axis=None) > 0)


def local_value(strategy, value):
    """One replica's value of a distributed value (``value`` itself otherwise)."""
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _check_tf_config():
    """A malformed ``TF_CONFIG`` fails here with its fault named, not deep inside TensorFlow."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ValueError(
            "--strategy multi_worker needs TF_CONFIG (the cluster and this worker's task), set on "
            "every worker; it is not set here. To train on this machine's devices alone use "
            "--strategy mirrored (docs/distribution.md)"
        )
    try:
        config = json.loads(raw)
        workers = config["cluster"]["worker"]
        task_type, task_id = config["task"]["type"], int(config["task"]["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"TF_CONFIG is not a cluster description ({error!r}); expected "
            '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}'
        ) from None
    members = config["cluster"].get(task_type)
    if not isinstance(workers, list) or not workers or members is None or not 0 <= task_id < len(members):
        raise ValueError(f"TF_CONFIG's task {task_type} {task_id} is not in its cluster {config['cluster']}")
