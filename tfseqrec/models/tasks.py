"""The tasks on top of the id models' backbones: next item and Cloze.

A backbone (``SASRecBackbone``, ``BERT4RecBackbone``, ``HSTUBackbone``,
``UniSRecBackbone``) maps item ids to the sequence output ``[batch, length, hidden_dim]``
and holds the output table items are scored with; a task owns what is done with
them: the training loss, validation ranking, scores and top-k recommendations, as
keras-hub's ``Task`` on a ``Backbone``. The public models are a task over a backbone
built from the same arguments: ``SASRec``, ``HSTU`` and ``UniSRec`` are
``NextItemTask``s, ``BERT4Rec`` a ``ClozeTask``. A task holds its backbone
(``task.backbone``); its weights lie under ``backbone/`` in a model file. Files written
when the tasks inherited their backbone (its weights at the top) load too: the task
reads them from there (``tests/models/test_saved_v0.py``).
"""

import inspect
import json
import os
import posixpath

import keras
import numpy as np
from keras import ops

from tfseqrec import keras_internals, ranking, registry
from tfseqrec import losses as losses_lib
from tfseqrec import metrics as metrics_lib
from tfseqrec.data import events as events_lib
from tfseqrec.data import masking as masking_lib
from tfseqrec.data import numpy_pipeline, splits, vocab

# Training and scoring are keras.ops on every backend. The TensorFlow backend adds what
# only it has: several workers (tf.distribute), RowSparseAdam's row updates
# (tf.IndexedSlices), top-k a block of the catalogue at a time, tf.function graphs; on
# another backend (JAX) TensorFlow is not imported at all.
ON_TENSORFLOW = keras.backend.backend() == "tensorflow"
if ON_TENSORFLOW:
    import tensorflow as tf

    from tfseqrec import (
        block_ranking,
        distribute,
        optimizers,  # also registers RowSparseAdam, which a saved model's compile config may name
    )

    _BASES = (keras_internals.MultiWorkerBuild, keras.Model)
else:
    _BASES = (keras.Model,)


# The model file inside a preset directory (as ``tfseqrec train`` names it).
PRESET_MODEL_FILE = "model.keras"
PRESET_RUN_FILE = "train_config.json"


class NextItemTask(*_BASES):
    """Next-item prediction on a backbone: loss, validation ranking, scores, top-k.

    The task holds its backbone (``self.backbone``, a ``SequentialBackbone``: ``call(inputs)
    -> hidden``, the sequence output, and the output table items are scored with). A
    subclass names its backbone class (``backbone_cls``) and is built either from the
    backbone's arguments (``SASRec(num_items=..., hidden_dim=...)``) or around a
    backbone (``SASRec(backbone=SASRecBackbone(...))``), as keras-hub's tasks are. The
    backbone's own attributes are read on it (``model.backbone.hidden_dim``); the config
    nests the backbone's (``keras.layers.serialize``) beside the task's own options.
    ``from_preset`` opens a trained model directory or builds a named preset's
    architecture; ``save_to_preset`` writes a directory ``from_preset`` and
    ``tfseqrec.load`` open.

    Training (``fit``) takes ``(x, y, sample_weight)`` with
    ``x = {"item_ids", "padding_mask"}``, ``y`` the target id of every position
    ``[batch, length]`` and ``sample_weight`` 0 where nothing is predicted; the loss
    object scores only positions with non-zero weight. The batch loss is the sum over
    those positions divided by ``loss_normalizer`` when it is set (a constant, so each
    position weighs the same in whatever batch it falls: length bucketing groups short
    histories into batches of few positions, which a per-batch mean would up-weight),
    else their mean. Validation data are
    ``(x, y)`` with ``y`` the next item ``[batch]``: the model scores every item and
    updates the compiled ranking metrics (``tfseqrec.metrics``), full-catalogue.

    Scores and recommendations address items by vocabulary id; column ``j`` of a
    score matrix is id ``j + vocab.NUM_RESERVED``, and reserved ids are never scored.

    Args:
        backbone: the network (an instance of ``backbone_cls``); by default one built
            from ``*args, **kwargs``.
        loss: a ``tfseqrec.losses`` object or name; default the full softmax without
            the sequence's other items (``FullSoftmaxCrossEntropy(exclude_history=True)``).
        exclude_seen_in_validation: leave the history's items out of the candidates
            in validation (see ``test_step``).
        loss_normalizer: divide the summed training loss by this constant instead
            of averaging each batch.
        name, dtype, trainable: the task's, as a ``keras.Model`` takes them (``dtype``
            the backbone's too).
        *args, **kwargs: the backbone's arguments, when no ``backbone`` is given.
    """

    # The backbone class a subclass builds from its arguments.
    backbone_cls = None

    def __init__(
        self,
        *args,
        backbone=None,
        loss=None,
        exclude_seen_in_validation=True,
        loss_normalizer=None,
        name=None,
        dtype=None,
        trainable=True,
        **kwargs,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        # Before the backbone's layers: a loss's seed generator draws from the global seed,
        # and the layers' initializers draw theirs after it. The default is made whatever
        # ``loss`` is, so that a seed gives the initial weights it gave the stored runs.
        default = losses_lib.get(None)
        self.loss_fn = default if loss is None else losses_lib.get(loss)
        self.exclude_seen_in_validation = exclude_seen_in_validation
        self.loss_normalizer = loss_normalizer
        self._score_fn = None
        if backbone is None:
            backbone = self.backbone_cls(*args, dtype=dtype, **kwargs)
        elif args or kwargs:
            raise ValueError(
                f"give {type(self).__name__} a backbone or the backbone's arguments, not both "
                f"(got backbone= and {', '.join(sorted(kwargs)) or 'positional arguments'})"
            )
        # === Layers ===
        self.backbone = backbone
        self.make_task_layers()
        self(backbone.example_inputs())

    def make_task_layers(self):
        """The task's own layers and state, created after the backbone.

        A loss that draws (sampled negatives) advances its seed generator each step.
        Tracked by the model, its state is part of the model's, which JAX's stateless
        steps carry from one step to the next (untracked, every step would draw the
        same negatives there). Seed states are not written to model files.
        """
        seed_generator = getattr(self.loss_fn, "seed_generator", None)
        if seed_generator is not None:
            self.loss_seed_generator = seed_generator

    def with_backbone(self, backbone):
        """A new task of this one's class and options (``loss``, ...) over ``backbone``."""
        config = self.get_config()
        config["backbone"] = backbone
        config["loss"] = keras.saving.deserialize_keras_object(config["loss"])
        return type(self)(**config)

    def with_items(self, num_items, item_features=None, item_feature_tables=None):
        """A copy over ``num_items`` items, the first ones keeping their weights
        (``SequentialBackbone.with_items``); the task's options stay."""
        return self.with_backbone(self.backbone.with_items(num_items, item_features, item_feature_tables))

    def call(self, inputs, training=None, return_attention_scores=False):
        """The backbone's sequence output (and attention maps when asked)."""
        if return_attention_scores:
            return self.backbone(inputs, training=training, return_attention_scores=True)
        return self.backbone(inputs, training=training)

    # --- the model contract (``tfseqrec.models.protocol``), the backbone's -----------

    @property
    def num_items(self):
        return self.backbone.num_items

    @property
    def max_sequence_length(self):
        return self.backbone.max_sequence_length

    @property
    def uses_timestamps(self):
        """Whether the inputs must carry ``timestamps`` (HSTU with a time bias)."""
        return self.backbone.uses_timestamps

    @property
    def event_features(self):
        """``{column: slots}`` of the event context the inputs carry (``event_<column>``), or ``None``."""
        return self.backbone.event_features

    def unpack_inputs(self, inputs):
        """``(item_ids, padding_mask)`` of ``inputs`` (``SequentialBackbone.unpack_inputs``)."""
        return self.backbone.unpack_inputs(inputs)

    def inference_inputs(self, inputs):
        """Inputs for predicting the item after the history (the backbone's layout)."""
        return self.backbone.inference_inputs(inputs)

    def output_table(self, training=False):
        """``(item_embeddings [num_items, d], bias or None)`` that items are scored with."""
        return self.backbone.output_table(training=training)

    def output_rows(self, training=False):
        """``output_table`` read by rows where it is row-wise (``SequentialBackbone.output_rows``)."""
        return self.backbone.output_rows(training=training)

    def scores_from_hidden(self, hidden):
        """Float32 scores ``[..., num_items]`` of hidden states ``[..., d]``."""
        return self.backbone.scores_from_hidden(hidden)

    def loss_table(self, training=False):
        """The ``(table, bias)`` the loss reads: by rows under ``RowSparseAdam``, which
        updates only the rows read; whole otherwise (a dense gradient, as Keras's
        Adam expects)."""
        if ON_TENSORFLOW and isinstance(getattr(self, "optimizer", None), optimizers.RowSparseAdam):
            return self.output_rows(training=training)
        return self.output_table(training=training)

    # --- training and validation ---------------------------------------------------

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        y = ops.convert_to_tensor(y)
        table, bias = self.loss_table(training=training and len(y.shape) != 1)
        if len(y.shape) == 1:  # validation: the next item at the last position
            hidden = y_pred[:, -1]
            positives = ops.cast(y, "int32") - vocab.NUM_RESERVED
            count = ops.shape(positives)[0]
            loss = self.loss_fn.from_embeddings(ops.cast(hidden, table.dtype), positives, table, bias)
        else:
            weight = (
                ops.cast(y, "int32") >= vocab.NUM_RESERVED
                if sample_weight is None
                else ops.greater(sample_weight, 0)
            )
            history = self._history(x, y, weight) if self.loss_fn.exclude_history else None
            if self.jit_compile is True or not ON_TENSORFLOW:
                # XLA (and JAX, which always compiles) wants static shapes: score every
                # position, weigh the unused ones 0.
                hidden = ops.reshape(y_pred, [-1, y_pred.shape[-1]])
                positives = ops.maximum(ops.reshape(ops.cast(y, "int32"), [-1]) - vocab.NUM_RESERVED, 0)
                w = ops.cast(ops.reshape(weight, [-1]), table.dtype)
                if history is not None:
                    history = (ops.reshape(history[0], [-1]), history[1])
                per_position = self.loss_fn.from_embeddings(
                    ops.cast(hidden, table.dtype), positives, table, bias, sample_weight=w, history=history
                )
                count = ops.sum(w)
                # from_embeddings averaged over all positions; make it the mean of the weighted ones.
                loss = per_position * ops.cast(ops.size(w), table.dtype) / ops.maximum(count, 1.0)
            else:
                hidden = tf.boolean_mask(y_pred, weight)
                positives = tf.cast(tf.boolean_mask(y, weight), "int32") - vocab.NUM_RESERVED
                count = tf.shape(positives)[0]
                if history is not None:
                    history = (tf.boolean_mask(history[0], weight), history[1])
                loss = self.loss_fn.from_embeddings(
                    tf.cast(hidden, table.dtype), positives, table, bias, history=history
                )
        # `loss` is the mean over this replica's target positions. Keras averages the
        # replicas' losses, so scale to sum / denominator over all replicas: with no
        # fixed normaliser, the single-device mean exactly.
        count = ops.cast(count, loss.dtype)
        replicas, total = 1, count
        context = tf.distribute.get_replica_context() if ON_TENSORFLOW else None
        if context is not None and context.num_replicas_in_sync > 1:
            replicas = context.num_replicas_in_sync
            total = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
        fixed = self.loss_normalizer if len(y.shape) != 1 else None  # training batches only
        denominator = ops.maximum(total, 1.0) if fixed is None else float(fixed)
        if fixed is not None or replicas > 1:
            loss = loss * count * replicas / denominator
        if self.losses:
            loss += sum(self.losses[1:], self.losses[0])
        return loss

    def _history(self, x, y, weight):
        """``(rows [batch, length], seen [batch, num_items])`` of a training batch.

        ``seen`` marks every item of each row's inputs and weighted targets: the
        items a history-aware loss leaves out of the negatives. A scatter of
        O(batch * length) updates into a ``[batch, num_items]`` bitmap.
        """
        ids, _ = self.unpack_inputs(x)
        y = ops.where(weight, ops.cast(y, "int32"), vocab.PAD_ID)  # a weight-0 target is no item
        both = ops.concatenate([ops.cast(ids, "int32"), y], axis=1)
        shape = ops.shape(both)
        rows = ops.broadcast_to(ops.arange(shape[0], dtype="int32")[:, None], shape)
        valid = both >= vocab.NUM_RESERVED
        # Reserved ids go to a spare column, dropped after: every shape stays static.
        columns = ops.where(valid, both - vocab.NUM_RESERVED, self.num_items)
        index = ops.stack([ops.reshape(rows, [-1]), ops.reshape(columns, [-1])], axis=1)
        counts = ops.scatter(index, ops.ones(ops.shape(index)[:1], "int32"), (shape[0], self.num_items + 1))
        return rows[:, : ops.shape(ids)[1]], counts[:, :-1] > 0

    def compile(self, optimizer="adam", metrics=None, **kwargs):
        """Like ``keras.Model.compile``; ``metrics`` are ranking metrics for validation.

        The loss is the model's own (``loss=`` at construction). ``metrics`` default to
        ``tfseqrec.metrics.default_metrics()`` (NDCG@10, HR@10, MRR), updated on
        validation data only, over the full catalogue.
        """
        if kwargs.pop("loss", None) is not None:
            raise ValueError("pass the loss to the model constructor (loss=...), not to compile")
        # Held outside Keras's state tracking (the model is built already) and listed
        # through the public `metrics` property, so fit/evaluate reset them as usual.
        object.__setattr__(
            self, "_ranking_metrics", list(metrics) if metrics is not None else metrics_lib.default_metrics()
        )
        super().compile(optimizer=optimizer, **kwargs)

    def compile_from_config(self, config):
        """Restores the optimizer (and its state, when loading) of a saved model."""
        config = keras.saving.deserialize_keras_object(config)
        metrics = config.pop("metrics", None)
        for key in ("loss", "loss_weights", "weighted_metrics"):
            config.pop(key, None)
        self.compile(metrics=metrics, **config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @property
    def metrics(self):
        return super().metrics + list(getattr(self, "_ranking_metrics", []))

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        # Training batches report the loss alone: ranking metrics are for validation.
        return {m.name: m.result() for m in self.metrics if m.name == "loss"}

    def validation_logs(self, x, y, sample_weight=None):
        """Validation of one batch: loss and ranking metrics of the next item ``y`` ``[batch]``.

        With ``exclude_seen_in_validation`` the items of ``x["history"]`` (the whole
        history, int ``[batch, any]`` padded with 0, as ``pipeline.eval_dataset``
        gives it; the input window when ``x`` has none) leave the candidates, the
        target excepted, by ``tfseqrec.ranking``: the rules of ``evaluation.evaluate``.
        ``test_step`` runs it on each backend.
        """
        history = None
        if isinstance(x, dict) and "history" in x:
            x = dict(x)
            history = x.pop("history")
        ids, _ = self.unpack_inputs(x)
        hidden = self(self.inference_inputs(x), training=False)
        scores = self.scores_from_hidden(hidden[:, -1])
        y = ops.reshape(ops.cast(y, "int32"), [-1])
        # A target outside the vocabulary has no logit: it is left out of the loss
        # (and ranks last in the metrics).
        known = ranking.known_targets(y, self.num_items)
        per_case = ops.sparse_categorical_crossentropy(
            ops.where(known, y - vocab.NUM_RESERVED, 0), scores, from_logits=True
        )
        weight = ops.cast(known, per_case.dtype)
        loss = ops.sum(per_case * weight) / ops.maximum(ops.sum(weight), 1.0)
        if self.exclude_seen_in_validation:
            scores = ranking.exclude_items(scores, ids if history is None else history, keep=y)
        for metric in self.metrics:
            if (
                metric.name == "loss"
            ):  # weighted by known targets: the mean over all cases, whatever the batching
                metric.update_state(loss, sample_weight=ops.sum(weight))
        for metric in getattr(self, "_ranking_metrics", []):
            metric.update_state(y, scores, sample_weight)
        return {m.name: m.result() for m in self.metrics}

    if ON_TENSORFLOW:

        def test_step(self, data):
            return self.step_logs(self.validation_logs(*keras.utils.unpack_x_y_sample_weight(data)))

        # --- several workers (MultiWorkerMirroredStrategy) ---------------------------
        # Keras 3's fit fails twice under that strategy (Keras 3.12 and 3.15 alike;
        # keras-team/keras#20585): the build (``keras_internals.MultiWorkerBuild``, a base
        # of this class) and the logs (``step_logs``). ``tests/test_multi_worker.py`` runs
        # two workers and checks the model against one worker's.

        def train_step(self, data):
            return self.step_logs(super().train_step(data))

        def step_logs(self, logs):
            """A step's logs as ``fit`` can reduce them: across workers it takes the mean
            over axis 0 of every log, which a scalar lacks; as ``[1]`` vectors their mean is
            the scalar again. Unchanged on one worker."""
            if not distribute.is_multi_worker(self.distribute_strategy):
                return logs
            return {name: tf.reshape(value, [1]) for name, value in logs.items()}

    else:

        def test_step(self, state, data):
            """JAX's stateless step: ``validation_logs`` with the model's state mapped in,
            the metrics' new state handed back."""
            trainable, non_trainable, metrics = state
            mapping = [
                *zip(self.trainable_variables, trainable),
                *zip(self.non_trainable_variables, non_trainable),
                *zip(self.metrics_variables, metrics),
            ]
            with keras.StatelessScope(state_mapping=mapping) as scope:
                logs = self.validation_logs(*keras.utils.unpack_x_y_sample_weight(data))
            metrics = [scope.get_current_value(v) for v in self.metrics_variables]
            return logs, (trainable, non_trainable, metrics)

    # --- scoring -------------------------------------------------------------------

    def score(self, inputs, exclude_seen=False):
        """Scores of every item as the next one: float32 ``[batch, num_items]``.

        Args:
            inputs: int ids ``[batch, length]`` (left-padded, newest last) or a dict
                with ``item_ids``.
            exclude_seen: give the items in ``inputs`` a score of ``-inf``.
        """
        ids, _ = self.unpack_inputs(inputs)
        scores = self.scores_from_hidden(self.query(inputs))
        return ranking.exclude_items(scores, ids) if exclude_seen else scores

    def query(self, inputs):
        """The vector ``[batch, d]`` each history scores items with: ``score(inputs)`` is
        ``scores_from_hidden(query(inputs))``, the dot products with ``output_table()``."""
        return self(self.inference_inputs(inputs), training=False)[:, -1]

    def recommend(self, histories, k=10, exclude_seen=True, batch_size=256, timestamps=None, events=None):
        """Top-``k`` next items for each history.

        Args:
            histories: int vocabulary ids ``[batch, length]`` (left-padded with 0), or
                a list of id lists of any lengths (the last ``max_sequence_length``
                are used; all of them are excluded when ``exclude_seen``).
            k: number of items.
            exclude_seen: never recommend an item of the history.
            batch_size: histories scored at once.
            timestamps: the items' times in seconds, shaped as ``histories``; for a
                model that ``uses_timestamps``, and only for it.
            events: ``{column: slots}`` of the events' context, each shaped as
                ``histories`` (``EventVocabulary.encode`` gives the slots); for a model
                with ``event_features``, and only for it.

        Returns:
            ``(ids, scores)``: int64 ``[batch, n]`` vocabulary ids and float32 scores,
            best first, ``n <= k``: only items that can be recommended (never one of
            the history when ``exclude_seen``), so ``n`` is less than ``k`` when fewer
            remain; a row with fewer items than another ends in ``vocab.PAD_ID`` (0)
            at ``-inf`` (``ranking.top_k``).
        """
        if (timestamps is not None) != self.uses_timestamps:
            raise ValueError(
                "this model reads the items' timestamps: give them"
                if self.uses_timestamps
                else "this model does not read timestamps (it was trained without a time bias)"
            )
        columns = list(self.event_features or ())
        if sorted(events or ()) != sorted(columns):
            raise ValueError(
                f"this model reads the events' context {columns}: give events= with those columns"
                if columns
                else "this model does not read event context (it was trained without event features)"
            )
        if not isinstance(histories, np.ndarray):
            seqs = splits.Sequences.from_list(
                range(len(histories)),
                [list(h) for h in histories],
                None if timestamps is None else [list(t) for t in timestamps],
                None if not columns else {c: [list(e) for e in events[c]] for c in columns},
            )
            width = max(1, int(seqs.lengths.max(initial=1)))
            full = numpy_pipeline.pad_left(seqs, width)
            times = None if timestamps is None else numpy_pipeline.pad_left_times(seqs, width)
            context = numpy_pipeline.pad_left_events(seqs, width, columns)
        else:
            full = histories.astype(np.int32)
            times = None if timestamps is None else np.asarray(timestamps, np.int64)
            context = {events_lib.input_name(c): np.asarray(events[c], np.int32) for c in columns}
            for name, value in context.items():
                if value.shape != full.shape:
                    raise ValueError(f"events {name!r} shaped {value.shape}, the histories {full.shape}")
        window = full[:, -self.max_sequence_length :]
        fn = self._compiled_top_k()
        ids_out, scores_out = [], []
        for start in range(0, len(full), batch_size):
            inputs = ops.convert_to_tensor(window[start : start + batch_size])
            side = dict(context)
            if times is not None:
                side["timestamps"] = times
            if side:
                inputs = {"item_ids": inputs}
                for name, value in side.items():
                    inputs[name] = ops.convert_to_tensor(
                        value[start : start + batch_size, -self.max_sequence_length :]
                    )
            top_scores, top_index = fn(
                inputs,
                ops.convert_to_tensor(full[start : start + batch_size]),
                # A static k where the backend needs one (JAX); a tensor for tf.function.
                tf.constant(min(k, self.num_items)) if ON_TENSORFLOW else min(k, self.num_items),
                bool(exclude_seen),
            )
            ids_out.append(ranking.vocabulary_ids(np.asarray(top_index)))
            scores_out.append(np.asarray(top_scores))
        return ranking.drop_padding(np.concatenate(ids_out), np.concatenate(scores_out))

    def compiled_score(self, window):
        """``score`` of an int ``[batch, length]`` window, compiled once per model (a
        ``tf.function`` on the TensorFlow backend)."""
        return self._run_compiled("_score_graph", self.score, window)

    def compiled_query(self, inputs):
        """``query`` of ``inputs``, compiled once per model (a ``tf.function`` on the TensorFlow
        backend), so that evaluating the model again does not trace again."""
        return self._run_compiled("_query_graph", self.query, inputs)

    def _run_compiled(self, name, method, inputs):
        """``method(inputs)`` through the ``tf.function`` this model keeps as ``name`` (made on
        first use; the method itself off the TensorFlow backend)."""
        if not ON_TENSORFLOW:
            return method(inputs)
        graph = getattr(self, name, None)
        if graph is None:
            graph = tf.function(method, reduce_retracing=True)
            object.__setattr__(self, name, graph)
        return graph(inputs)

    def _compiled_top_k(self):
        if not ON_TENSORFLOW:
            return self._top_k
        if self._score_fn is None:

            def top_k(window, full, k, exclude_seen):
                # exclude_seen is a Python bool: one trace per value. The catalogue is
                # scored a block at a time, as the exports score it (block_ranking.top_k_in_blocks).
                table, bias = self.output_table()
                blocks, _ = block_ranking.query_blocks(self.query(window), table, bias)
                batch = tf.shape(full)[0]
                return block_ranking.top_k_in_blocks(
                    blocks,
                    self.num_items,
                    batch,
                    k,
                    exclude=full if exclude_seen else None,
                    chunk_items=block_ranking.block_width(batch),
                )

            self._score_fn = tf.function(top_k, reduce_retracing=True)
        return self._score_fn

    def _top_k(self, window, full, k, exclude_seen):
        """``ranking.top_k`` of the whole score matrix (where the block version, TensorFlow's, is absent)."""
        return ranking.top_k(self.score(window), k, exclude=full if exclude_seen else None)

    # --- model files -----------------------------------------------------------------

    def load_own_variables(self, store):
        """Reads the task's part of a model file; also of one written before the task held its backbone.

        Such a file (the task inherited its backbone then) holds the backbone's weights
        at the task's own paths (``item_embedding/vars/0``, ...) where this layout has
        them under ``backbone/``: the store is told to read each ``backbone/...`` path
        from there for the rest of the load (``_flat_path``). The task itself has no
        variables; the file's at the task's entry are then the backbone's own.
        """
        here = keras_internals.store_entry_path(store)
        if here is None or store.has_path(posixpath.join(here, "backbone")):
            super().load_own_variables(store)
            return
        if not store.has_path(posixpath.join(here, "blocks")):
            raise ValueError(
                f"this model file has no weights of {type(self).__name__}'s backbone, neither under "
                f"'{posixpath.join(here, 'backbone')}' nor at '{here or '/'}' (as written before the "
                "task held its backbone). To convert it, load it with the tfseqrec that wrote it and "
                "keep its weights in order (numpy.savez('weights.npz', *model.get_weights())); here, "
                f"build {type(self).__name__}.from_config(config) with its configuration (config.json "
                "in the file), model.set_weights(list(numpy.load('weights.npz').values())), and "
                "model.save(...)"
            )
        keras_internals.read_moved_weights(store, lambda path: _flat_path(store, path))

    def get_config(self):
        config = super().get_config()  # the task's name, trainable and dtype
        config.update(
            {
                "backbone": keras.layers.serialize(self.backbone),
                "loss": keras.saving.serialize_keras_object(self.loss_fn),
                "exclude_seen_in_validation": self.exclude_seen_in_validation,
                "loss_normalizer": self.loss_normalizer,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["loss"] = keras.saving.deserialize_keras_object(config["loss"])
        if isinstance(config.get("backbone"), dict):
            config["backbone"] = keras.layers.deserialize(config["backbone"])
            return cls(**config)
        # Files written before the config nested the backbone's: its arguments flat beside the
        # task's; and before position_origin existed, positions counted from the newest item.
        config.setdefault("position_origin", "newest")
        return cls(**config)

    # --- presets (keras-hub's ``from_preset`` / ``save_to_preset``) -------------------

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """A model of a trained model directory, or of a named preset's architecture.

        Args:
            preset: a directory that ``tfseqrec train`` or ``save_to_preset`` wrote (its
                ``model.keras``, with the weights), or the name of a tuned configuration
                in ``tfseqrec.registry`` (``"sasrec_ml1m"``: its model options, new weights).
            **kwargs: with a name, the constructor's other arguments (``num_items`` at
                least), which override the preset's; with a directory, none.

        Example:

        >>> from tfseqrec.models import SASRec
        >>> model = SASRec.from_preset("sasrec_ml1m", num_items=20)
        >>> model.backbone.hidden_dim, model.max_sequence_length
        (64, 200)
        """
        if os.path.isdir(preset):
            if kwargs:
                raise ValueError(
                    f"{preset} is a trained model: its options are its own (got {sorted(kwargs)})"
                )
            model = keras.saving.load_model(os.path.join(preset, PRESET_MODEL_FILE), safe_mode=True)
            if not isinstance(model, cls):
                raise ValueError(f"{preset} holds a {type(model).__name__}, not a {cls.__name__}")
            return model
        spec, key = registry.find_preset(preset)
        if spec.class_name != cls.__name__:
            raise ValueError(
                f"preset {preset!r} is {spec.class_name}'s; {cls.__name__}'s presets: "
                f"{', '.join(cls.preset_names()) or 'none'}"
            )
        accepted = cls.constructor_arguments()
        options = {k: v for k, v in spec.presets[key].options.items() if k in accepted}
        return cls(**{**options, **kwargs})

    @classmethod
    def constructor_arguments(cls):
        """The keyword arguments the model takes: its own, its task's and its backbone's, read
        from each tfseqrec class's ``__init__`` up the hierarchy while one passes ``**kwargs`` on."""
        names = set()
        for top in (cls, cls.backbone_cls):
            for klass in top.__mro__:
                if klass.__module__.split(".")[0] != "tfseqrec":
                    break  # Keras's own: the task's signature names what it passes to them
                if "__init__" not in vars(klass):
                    continue
                parameters = inspect.signature(klass.__init__).parameters.values()
                names.update(
                    p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                )
                if all(p.kind != p.VAR_KEYWORD for p in parameters):
                    break  # passes nothing on to the classes above it
        return names - {"self"}

    @classmethod
    def preset_names(cls):
        """The names of this class's tuned configurations (``from_preset``)."""
        return sorted(
            registry.preset_name(spec.name, key)
            for spec in registry.MODELS.values()
            if spec.class_name == cls.__name__
            for key in spec.presets
        )

    def save_to_preset(self, preset_dir, vocabulary):
        """Writes the model (config and weights, ``model.keras``), its item vocabulary and a run
        file naming its kind to ``preset_dir``: a directory ``from_preset`` and ``tfseqrec.load``
        open, as they open one ``tfseqrec train`` wrote."""
        if vocabulary.num_items != self.num_items:
            raise ValueError(
                f"the vocabulary lists {vocabulary.num_items} items, the model scores {self.num_items}"
            )
        names = [spec.name for spec in registry.MODELS.values() if spec.class_name == type(self).__name__]
        if not names:
            raise ValueError(f"{type(self).__name__} is not a model kind of tfseqrec.registry")
        os.makedirs(preset_dir, exist_ok=True)
        self.save(os.path.join(preset_dir, PRESET_MODEL_FILE))
        vocabulary.save(preset_dir)
        run = {"config": {"model": names[0], "max_sequence_length": self.max_sequence_length}}
        with open(os.path.join(preset_dir, PRESET_RUN_FILE), "w") as f:
            json.dump({**run, "written_by": "save_to_preset"}, f, indent=2)


def _flat_path(store, path):
    """Where a model file written before the task held its backbone keeps ``path``.

    Without the first ``backbone`` part that the file has no group for: that file's
    task was its backbone (``backbone/blocks/...`` was ``blocks/...``; the entry
    ``backbone``, the backbone's own variables, was the task's own).
    """
    parts = path.split("/")
    for i, part in enumerate(parts):
        if part == "backbone" and not store.has_path("/".join(parts[: i + 1])):
            return "/".join(parts[:i] + parts[i + 1 :])
    return path


class ClozeTask(NextItemTask):
    """The Cloze task (BERT4Rec's) on a bidirectional backbone.

    When ``fit`` gets batches without labels (``pipeline.cloze_dataset`` serves
    unmasked windows), the task masks them itself inside the compiled training step
    with its ``ClozePreprocessor`` (``mask_prob`` of the items; 80% [MASK], 10%
    random, 10% kept; fresh each step, on the accelerator when there is one), and
    the loss covers masked positions only. At inference the last
    ``max_sequence_length - 1`` items get a [MASK] appended, and the scores of that
    last position rank the next item.

    Args:
        mask_prob: Cloze masking probability.
        mask_token_rate: share of chosen items replaced by [MASK].
        random_token_rate: share of chosen items replaced by a random item.
        last_item_only_prob: share of training sequences with only the last item masked.
        seed: masking seed.
        *args, **kwargs: ``NextItemTask``'s and the backbone's arguments.
    """

    def __init__(
        self,
        *args,
        mask_prob=0.2,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        last_item_only_prob=0.0,
        seed=None,
        **kwargs,
    ):
        # === Config === (read by make_task_layers, which NextItemTask's constructor calls; the
        # masking layer it builds there checks them)
        self.mask_prob = mask_prob
        self.mask_token_rate = mask_token_rate
        self.random_token_rate = random_token_rate
        self.last_item_only_prob = last_item_only_prob
        self.seed = seed
        super().__init__(*args, **kwargs)

    def make_task_layers(self):
        super().make_task_layers()
        # After the backbone (a seeded masking draws nothing from the global seed).
        self.masking = masking_lib.ClozePreprocessor(
            self.num_items,
            mask_prob=self.mask_prob,
            mask_token_rate=self.mask_token_rate,
            random_token_rate=self.random_token_rate,
            last_item_only_prob=self.last_item_only_prob,
            seed=self.seed,
            name="cloze_masking",
        )

    def masked_batch(self, data):
        """``data`` as the training step takes it: unlabelled windows masked (fresh draws)."""
        x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
        if y is not None:
            return data
        ids, mask = self.unpack_inputs(x)
        x, y, weight = self.masking({"item_ids": ids, "padding_mask": mask})
        return {**x, **_events_of(data)}, y, weight

    if ON_TENSORFLOW:

        def train_step(self, data):
            return super().train_step(self.masked_batch(data))

    else:

        def train_step(self, state, data):
            # JAX's stateless step: the masks are drawn inside it, the masking seed's
            # new state handed on in ``state``.
            trainable, non_trainable, *rest = state
            mapping = list(zip(self.non_trainable_variables, non_trainable))
            with keras.StatelessScope(state_mapping=mapping) as scope:
                data = self.masked_batch(data)
            non_trainable = [scope.get_current_value(v) for v in self.non_trainable_variables]
            return super().train_step((trainable, non_trainable, *rest), data)

    def _history(self, x, y, weight):
        """The sequence's items: a masked slot holds [MASK] or a random item, its label the real one."""
        ids, mask = self.unpack_inputs(x)
        ids = ops.where(weight, ops.cast(vocab.PAD_ID, ids.dtype), ids)
        return super()._history({"item_ids": ids, "padding_mask": mask}, y, weight)

    def inference_inputs(self, inputs):
        """The last ``max_sequence_length - 1`` items, left-padded, then a [MASK].

        The model fills in the masked slot: the next item. Histories shorter than the
        window lose nothing; longer ones keep their newest items.
        """
        ids, _ = self.unpack_inputs(inputs)
        # A window narrower than the model's (a length bucket) keeps its width plus
        # the [MASK]: positions do not depend on the padding, so scores are the same.
        width = ops.shape(ids)[1]
        last = self.max_sequence_length - 1
        keep = min(width, last) if isinstance(width, int) else ops.minimum(width, last)
        ids = ids[:, width - keep :]
        mask_col = ops.full((ops.shape(ids)[0], 1), vocab.MASK_ID, dtype=ids.dtype)
        ids = ops.concatenate([ids, mask_col], axis=1)
        shifted = {"item_ids": ids, "padding_mask": ops.not_equal(ids, vocab.PAD_ID)}
        # The events' context moves with their items; the [MASK]'s is unknown (padding).
        for name, value in _events_of(inputs).items():
            value = ops.convert_to_tensor(value)[:, width - keep :]
            shifted[name] = ops.concatenate([value, ops.zeros_like(value[:, :1])], axis=1)
        return shifted

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mask_prob": self.mask_prob,
                "mask_token_rate": self.mask_token_rate,
                "random_token_rate": self.random_token_rate,
                "last_item_only_prob": self.last_item_only_prob,
                "seed": self.seed,
            }
        )
        return config


def _events_of(inputs):
    """The event-context entries (``event_<column>``) of an input dict (or of ``x`` in ``(x, ...)``)."""
    if isinstance(inputs, (tuple, list)):
        inputs = inputs[0]
    if not isinstance(inputs, dict):
        return {}
    return {k: v for k, v in inputs.items() if k.startswith(events_lib.PREFIX)}
