"""Warm start: a trained model carried onto a log that grew, instead of training from zero.

``warm_start`` grows a model's vocabulary by the items a new log adds (known items keep
their ids and rows, new ones get fresh rows as a new model would, items no longer seen
stay known) and keeps every other weight; ``carry`` copies those weights into the model a
run builds, ``carry_moments`` the optimizer's state where the shapes allow (``id_models.train(..., warm_start=DIR)``, ``tfseqrec train --warm-start DIR``),
``architecture`` takes the trained run's architecture, which a warm start cannot change, and
``catalogue_changes`` counts the items a grown log adds and those it no longer has.
"""

import keras
import numpy as np

from tfseqrec.data import vocab as vocab_lib

# Options a warm start keeps from the trained run: the weights' shapes depend on them.
ARCHITECTURE_FIELDS = ("max_sequence_length",)


def warm_start(model, vocabulary, new_vocabulary, seed=0):
    """``(model, vocabulary)``: ``model`` over ``vocabulary`` grown by the items of
    ``new_vocabulary`` it lacks (appended after the known ones, in natural order).

    The added items' rows (id embeddings, output bias) start as a new model's of the same
    options and ``seed``; every other weight, and every known item's row, is ``model``'s.

    >>> from tfseqrec.models import SASRec
    >>> model = SASRec(num_items=2, max_sequence_length=4, hidden_dim=8)
    >>> old = vocab_lib.ItemVocabulary(["a", "b"])
    >>> grown, merged = warm_start(model, old, vocab_lib.ItemVocabulary(["b", "c"]))
    >>> merged.items, grown.num_items
    (['a', 'b', 'c'], 3)
    """
    if getattr(model.backbone, "feature_embedding", None) is not None or getattr(
        model.backbone, "reads_item_inputs", False
    ):
        raise ValueError(
            "a warm start grows id models without item attributes or text; this model reads its "
            "items' attributes or text, which new items would need (train it anew)"
        )
    merged, added = vocabulary.with_items(new_vocabulary.items)
    if not added:
        return model, merged
    grown = model.with_items(merged.num_items)
    keras.utils.set_random_seed(seed)
    fresh = type(grown).from_config(grown.get_config())
    old_rows = vocab_lib.NUM_RESERVED + vocabulary.num_items
    for before, mine, new in zip(model.weights, grown.weights, fresh.weights):
        if tuple(before.shape) != tuple(mine.shape):  # a table of item rows: its new rows start fresh
            value = np.asarray(mine).copy()
            start = (
                old_rows
                if mine.shape[0] == vocab_lib.NUM_RESERVED + merged.num_items
                else vocabulary.num_items
            )
            value[start:] = np.asarray(new)[start:]
            mine.assign(value)
    return grown, merged


def catalogue_changes(vocabulary, new_vocabulary):
    """``{"new_items", "vanished_items"}``: the items of ``new_vocabulary`` (a grown log's) the trained
    ``vocabulary`` lacks, and the trained items the log no longer has (renamed, or retired: they
    stay known). A log that shares no item with the trained model is another catalogue, refused.

    >>> catalogue_changes(vocab_lib.ItemVocabulary(["a", "b"]), vocab_lib.ItemVocabulary(["b", "c", "d"]))
    {'new_items': 2, 'vanished_items': 1}
    """
    trained, logged = set(vocabulary.items), set(new_vocabulary.items)
    if not trained & logged:
        raise ValueError(
            f"the log's {len(logged):,} items include none of the trained model's {len(trained):,} "
            f"(theirs: {sorted(trained)[:3]}..., the log's: {sorted(logged)[:3]}...): a warm start "
            "carries a model onto the same catalogue grown; train anew for another"
        )
    return {"new_items": len(logged - trained), "vanished_items": len(trained - logged)}


def change_line(changes, trained_items):
    """The training log's line on a warm start's catalogue (``catalogue_changes``)."""
    line = f"warm start: {changes['new_items']:,} new items beside the trained {trained_items:,}"
    if changes["vanished_items"]:
        line += (
            f"; {changes['vanished_items']:,} trained items are not in this log (renamed or retired: "
            "they stay known, and a renamed item starts anew under its new id)"
        )
    return line


def carry(source, target):
    """Copies every weight of ``source`` into ``target``, a model of the same options (the one a
    run builds); a weight of another name or shape is an error naming it."""
    if len(source.weights) != len(target.weights):
        raise ValueError(
            f"the trained model has {len(source.weights)} weights, the new one {len(target.weights)}: "
            "they are not built alike"
        )
    for mine, theirs in zip(target.weights, source.weights):
        if tuple(mine.shape) != tuple(theirs.shape) or mine.path.split("/")[-1] != theirs.path.split("/")[-1]:
            raise ValueError(
                f"cannot carry {theirs.path} {tuple(theirs.shape)} into {mine.path} {tuple(mine.shape)}"
            )
        mine.assign(np.asarray(theirs))


def carry_moments(source, target, variables):
    """Copies a trained optimizer's state (``source``, Adam's moments) into ``target``, built here
    over ``variables``: a table that gained rows keeps its known rows' state (the new rows start at
    zero). Returns the number of arrays carried. Matched by order, as both optimizers list a state
    array per variable; when the lists differ (another optimizer), nothing is carried.

    When every array is carried, so is the step count: Adam's bias correction divides the
    moments by ``1 - beta ** step``, which suits moments grown over ``step`` steps; counted
    from zero, it would shrink the first thousand updates to between 0.15 and 0.8 of the
    learning rate. The learning rate stays ``target``'s (a schedule starts over from the
    carried step: ``tfseqrec.schedules.FromStep``)."""
    target.build(variables)
    old = [v for v in source.variables if len(v.shape)]
    new = [v for v in target.variables if len(v.shape)]
    if len(old) != len(new):
        return 0
    carried = 0
    for theirs, mine in zip(old, new):
        value = np.asarray(theirs)
        if value.shape[1:] != tuple(mine.shape[1:]) or value.shape[0] > mine.shape[0]:
            continue
        if value.shape[0] < mine.shape[0]:
            value = np.concatenate(
                [value, np.zeros((mine.shape[0] - value.shape[0], *value.shape[1:]), value.dtype)]
            )
        mine.assign(value)
        carried += 1
    if carried == len(new):
        target.iterations.assign(source.iterations)
    return carried


def architecture(config, trained):
    """``config`` (a ``TrainConfig``) with the architecture of a trained run's config (its
    ``train_config.json`` ``config``): its model options and ``ARCHITECTURE_FIELDS``. An option
    ``config`` sets otherwise is an error saying what differs."""
    options = dict(trained.get("model_options") or {})
    differs = [
        f"{name} {value!r} (trained with {options[name]!r})"
        for name, value in config.model_options.items()
        if name in options and options[name] != value
    ]
    differs += [
        f"{name} {getattr(config, name)!r} (trained with {trained[name]!r})"
        for name in ARCHITECTURE_FIELDS
        if getattr(config, name) is not None
        and trained.get(name) is not None
        and getattr(config, name) != trained[name]
    ]
    if trained.get("model") != config.model:
        differs.insert(0, f"model {config.model!r} (trained: {trained.get('model')!r})")
    if differs:
        raise ValueError(
            f"a warm start keeps the trained model's architecture; these differ: {'; '.join(differs)}"
        )
    config.model_options = {**options, **config.model_options}
    for name in ARCHITECTURE_FIELDS:
        setattr(config, name, trained.get(name))
    return config
