"""Keras callbacks of the training drivers: best model, logs, limits, validation."""

import csv
import json
import os
import time

import keras
import numpy as np

from tfseqrec import distribute, evaluation


class TrainingDiverged(ValueError):
    """Training stopped on a non-finite loss; the best model so far stays on disk."""


def weights_finite(weights):
    """Whether every floating-point value of ``weights`` (variables or arrays) is finite."""
    arrays = (np.asarray(w) for w in weights)
    return all(np.all(np.isfinite(a)) for a in arrays if np.issubdtype(a.dtype, np.floating))


class DivergenceWatch(keras.callbacks.Callback):
    """Stops training at the first batch whose loss is not finite (``TerminateOnNaN``).

    ``diverged`` then holds ``{"epoch", "batch", "loss"}`` of that batch (0-based).
    """

    diverged = None
    _epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(loss) and self.diverged is None:
            self.diverged = {"epoch": self._epoch, "batch": batch, "loss": float(loss)}
            self.model.stop_training = True


class HistoryLog(keras.callbacks.CSVLogger):
    """``CSVLogger`` that resumes: rows of epochs not done (``epoch >= epochs_done``) go.

    A run killed after an epoch's row was written but before the epoch counted as
    done redoes that epoch; without this its row would appear twice.
    """

    def __init__(self, path, epochs_done):
        super().__init__(path, append=True)
        self.epochs_done = epochs_done

    def on_train_begin(self, logs=None):
        if os.path.exists(self.filename):
            with open(self.filename, newline="") as f:
                rows = list(csv.reader(f))
            kept = rows[:1] + [r for r in rows[1:] if r and r[0].isdigit() and int(r[0]) < self.epochs_done]
            if len(kept) < len(rows):
                partial = self.filename + ".partial"
                with open(partial, "w", newline="") as f:
                    csv.writer(f, lineterminator="\n").writerows(kept if len(kept) > 1 else [])
                os.replace(partial, self.filename)
        super().on_train_begin(logs)


class BestModel(DivergenceWatch):
    """Keeps the best model by ``monitor`` on disk, across restarts, and stops early.

    What ``ModelCheckpoint(save_best_only=True)`` and ``EarlyStopping(patience,
    restore_best_weights=True)`` do together, with two differences:

    - The best value, its epoch, the epochs waited since, the epochs done and the
      random generators' states are written to ``state_path`` after every epoch
      (atomically, before ``BackupAndRestore`` saves the epoch), and read back when
      it is created. A run killed and
      resumed therefore ends with the best model of all its epochs; with the Keras
      callbacks, whose best-so-far lives in memory only, it ended with a later,
      worse epoch.
    - Nothing non-finite is ever saved: a batch with a non-finite loss stops
      training (``TerminateOnNaN``), and an epoch is saved only when its loss, its
      metric and every weight are finite. ``diverged`` then says where it happened.

    The model file is replaced atomically (written beside it, then renamed), so an
    interruption never leaves half a file. At the end the best weights are loaded
    back into the model.

    ``monitor=None`` (training without validation): every finite epoch is the best so
    far, so the model of the last one is kept, and ``patience`` never stops training.
    """

    def __init__(self, path, state_path, monitor, patience):
        super().__init__()
        self.path = path
        self.state_path = state_path
        self.monitor = monitor
        self.patience = patience
        self.best = -np.inf
        self.best_epoch = None
        self.wait = 0
        self.epochs_done = 0
        self._random_states = None
        if os.path.exists(state_path):  # a run resumes
            with open(state_path) as f:
                state = json.load(f)
            self.best_epoch, self.wait, self.epochs_done = (
                state["best_epoch"],
                state["wait"],
                state["epochs_done"],
            )
            self._random_states = state.get("random_states")
            self.best = -np.inf if state["best"] is None else state["best"]
            if self.best_epoch is not None and not os.path.exists(path):
                raise FileNotFoundError(
                    f"{state_path} names epoch {self.best_epoch + 1} as the best, but {path} is missing"
                )

    def on_train_begin(self, logs=None):
        # The random generators' states (dropout, Cloze masking) are not part of the
        # weights BackupAndRestore saves: restored here, a resumed run draws the same
        # masks as an uninterrupted one.
        variables = self._random_variables()
        if self._random_states is not None and len(self._random_states) == len(variables):
            for variable, value in zip(variables, self._random_states):
                variable.assign(np.asarray(value, dtype=variable.dtype))

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        # Without a monitor, the epoch's number ranks it: each finite epoch beats the last.
        value = float(epoch) if self.monitor is None else logs.get(self.monitor)
        loss = logs.get("loss")
        if loss is not None and not np.isfinite(loss) and self.diverged is None:
            self.diverged = {"epoch": epoch, "batch": None, "loss": float(loss)}
            self.model.stop_training = True
        finite = self.diverged is None and value is not None and np.isfinite(value)
        if finite and value > self.best and weights_finite(self.model.weights):
            self._save_model()
            self.best, self.best_epoch, self.wait = float(value), epoch, 0
        else:
            self.wait += 1
            if self.wait >= self.patience and self.monitor is not None:
                self.model.stop_training = True
        self.epochs_done = epoch + 1
        self._write_state()

    def on_train_end(self, logs=None):
        if self.best_epoch is not None:
            self.model.load_weights(self.path)

    def describe_divergence(self):
        d = self.diverged
        where = f"epoch {d['epoch'] + 1}" + (f", batch {d['batch'] + 1}" if d["batch"] is not None else "")
        measure = f", {self.monitor} {self.best:.4f}" if self.monitor is not None else ""
        kept = (
            f"the best model so far (epoch {self.best_epoch + 1}{measure}) is in {self.path}"
            if self.best_epoch is not None
            else "no model was saved"
        )
        return (
            f"training diverged: the loss became {d['loss']} in {where}; {kept}. Try a lower learning rate."
        )

    def _random_variables(self):
        """The model's state outside its weights: the seed generators' states."""
        weights = {id(w) for w in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    def _save_model(self):
        partial = os.path.join(os.path.dirname(self.path), ".partial-" + os.path.basename(self.path))
        self.model.save(partial)
        os.replace(partial, self.path)

    def _write_state(self):
        os.makedirs(os.path.dirname(self.state_path), exist_ok=True)
        partial = self.state_path + ".partial"
        with open(partial, "w") as f:
            best = None if self.best_epoch is None else self.best
            random_states = [np.asarray(v).tolist() for v in self._random_variables()]
            json.dump(
                {
                    "best": best,
                    "best_epoch": self.best_epoch,
                    "wait": self.wait,
                    "epochs_done": self.epochs_done,
                    "random_states": random_states,
                },
                f,
            )
        os.replace(partial, self.state_path)


class TimeLimit(keras.callbacks.Callback):
    """Stops training at the end of the first epoch past ``seconds`` of fit time.

    With ``within_epoch``, at the end of the first step past them (the epoch's logs and
    its ``on_epoch_end`` callbacks still come): for fits without validation, such as
    pre-training, whose epochs can outlast the budget. One worker only: workers would
    each stop at another step.
    """

    def __init__(self, seconds, within_epoch=False):
        super().__init__()
        self.seconds = seconds
        self.within_epoch = within_epoch

    def on_train_begin(self, logs=None):
        if self.within_epoch and distribute.is_multi_worker(self.model.distribute_strategy):
            raise ValueError(
                "TimeLimit(within_epoch=True) is for one worker; across workers it stops at epoch ends"
            )
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if self.within_epoch and time.monotonic() - self.start >= self.seconds:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        # Across workers, all stop when one's clock has run out: a worker that went on
        # alone would wait for the others at its next step.
        if distribute.any_worker(
            self.model.distribute_strategy, time.monotonic() - self.start >= self.seconds
        ):
            self.model.stop_training = True


class StepLimit(keras.callbacks.Callback):
    """Stops training after ``steps`` training batches in all (validation still runs)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = int(steps)
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True


class StepsPerEpoch(keras.callbacks.Callback):
    """The training steps of each epoch in ``counts`` (a time budget may cut the last one short)."""

    def __init__(self):
        super().__init__()
        self.counts = []

    def on_epoch_begin(self, epoch, logs=None):
        self.counts.append(0)

    def on_train_batch_end(self, batch, logs=None):
        self.counts[-1] += 1


class RankingValidation(DivergenceWatch):
    """Full-catalogue validation metrics after every epoch, into ``logs`` as ``val_*``.

    With ``refresh=True`` (stage 1) the item table is re-encoded first, so the
    metrics, and the next epoch, use the current encoder's item vectors. With
    ``start`` (a ``time.monotonic()`` reading), ``logs["seconds"]`` is the time since.
    """

    def __init__(self, recommender, cases, refresh, batch_size=128, start=None):
        super().__init__()
        self.start = start
        self.recommender = recommender
        self.cases = cases
        self.refresh = refresh
        self.batch_size = batch_size
        self.best = -np.inf
        self.best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        if self.diverged is not None:  # never validated, never kept
            return
        if self.refresh:
            self.recommender.refresh_item_embeddings()
        result = evaluation.evaluate(self.recommender, self.cases, batch_size=self.batch_size, progress=False)
        for key in ("ndcg@10", "hr@10", "mrr"):
            logs["val_" + key.replace("@", "_")] = result[key]
        if self.start is not None:
            logs["seconds"] = round(time.monotonic() - self.start, 1)
        if np.isfinite(result["ndcg@10"]) and result["ndcg@10"] > self.best:
            weights = [v.numpy() for v in self.model.weights]
            if weights_finite(weights):
                self.best, self.best_weights = result["ndcg@10"], weights
