"""Learning-rate schedules of the training drivers, in ``keras.ops``: the same schedule on every
Keras backend (``benchmarks/gpu.py`` trains with it on JAX, without TensorFlow)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tfseqrec")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``learning_rate`` over ``warmup_steps``, then linear decay to 0 at ``total_steps``.

    ``total_steps=None`` keeps ``learning_rate`` after the warm-up (no decay).

    Example:

    >>> schedule = WarmupLinearDecay(1.0, total_steps=10, warmup_steps=2)
    >>> [round(float(schedule(step)), 3) for step in (0, 1, 2, 6, 10, 12)]
    [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    >>> [round(float(WarmupLinearDecay(1.0, None, 4)(step)), 3) for step in (0, 2, 4, 1000)]
    [0.0, 0.5, 1.0, 1.0]
    """

    def __init__(self, learning_rate, total_steps, warmup_steps=0):
        self.learning_rate = float(learning_rate)
        self.total_steps = None if total_steps is None else int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warm = step / max(self.warmup_steps, 1)
        if self.total_steps is None:
            after = ops.ones_like(step)
        else:
            after = ops.maximum((self.total_steps - step) / max(self.total_steps - self.warmup_steps, 1), 0.0)
        return self.learning_rate * ops.where(step < self.warmup_steps, warm, after)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }


@keras.saving.register_keras_serializable(package="tfseqrec")
class FromStep(keras.optimizers.schedules.LearningRateSchedule):
    """``schedule`` counted from optimizer step ``start`` (its value at ``start`` before it).

    A warm start's optimizer goes on from the trained run's step count, which Adam's bias
    correction of the carried moments needs, while the new run's schedule starts over.

    Example:

    >>> schedule = FromStep(WarmupLinearDecay(1.0, total_steps=10, warmup_steps=2), start=100)
    >>> [round(float(schedule(step)), 3) for step in (100, 101, 106, 110)]
    [0.0, 0.5, 0.5, 0.0]
    """

    def __init__(self, schedule, start):
        self.schedule = schedule
        self.start = int(start)

    def __call__(self, step):
        return self.schedule(ops.maximum(ops.cast(step, "int64") - self.start, 0))

    def get_config(self):
        return {"schedule": keras.optimizers.schedules.serialize(self.schedule), "start": self.start}

    @classmethod
    def from_config(cls, config):
        return cls(keras.optimizers.schedules.deserialize(config["schedule"]), config["start"])
