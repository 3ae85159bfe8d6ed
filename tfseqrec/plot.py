"""PNG figures of a trained model: training curves and attention over a history."""

import csv

import numpy as np


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only)."""
    import matplotlib  # optional heavy dependency: only `tfseqrec plot` and `report` draw

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    return plt


def training_curves(history_csv, path):
    """Plots loss and validation ranking metrics per epoch from ``history.csv``."""
    with open(history_csv) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{history_csv}: no epochs recorded")
    epochs = [int(r["epoch"]) + 1 for r in rows]
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for key in ("loss", "val_loss"):
        if key in rows[0]:
            left.plot(epochs, [float(r[key]) for r in rows], label=key)
    left.set(xlabel="epoch", ylabel="cross-entropy", title="Loss")
    left.legend()
    for key in sorted(k for k in rows[0] if k.startswith("val_") and k != "val_loss"):
        right.plot(epochs, [float(r[key]) for r in rows], label=key[4:])
    right.set(xlabel="epoch", ylabel="full-catalogue metric", title="Validation ranking")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def attention_map(model, history_ids, path, labels=None, timestamps=None):
    """Heat maps of each layer's attention (averaged over heads) over one history.

    Args:
        model: a trained ``SASRec``, ``BERT4Rec`` or ``HSTU``.
        history_ids: vocabulary ids, oldest first.
        path: output PNG.
        labels: optional tick labels (raw ids or titles) for the history items.
        timestamps: the items' times in seconds, for a model that reads them.
    """
    ids = np.asarray(history_ids, np.int32)[-model.max_sequence_length :]
    inputs = {"item_ids": ids[None]}
    if timestamps is not None:
        inputs["timestamps"] = np.floor(np.asarray(timestamps, np.float64)).astype(np.int64)[
            None, -len(ids) :
        ]
    inputs = model.inference_inputs(inputs)
    _, attention = model(inputs, training=False, return_attention_scores=True)
    length = int(np.asarray(inputs["item_ids"]).shape[1])
    real = np.asarray(inputs["item_ids"])[0] != 0
    plt = pyplot()
    fig, axes = plt.subplots(1, len(attention), figsize=(5.5 * len(attention), 5), squeeze=False)
    ticks = list(labels[-len(ids) :]) if labels is not None else [str(i) for i in ids]
    if length > len(ticks):  # BERT4Rec's appended [MASK]
        ticks = (ticks + ["[MASK]"])[-length:]
    for layer, (ax, scores) in enumerate(zip(axes[0], attention)):
        weights = np.asarray(scores)[0].mean(axis=0)[np.ix_(real, real)]
        image = ax.imshow(weights, cmap="viridis", aspect="auto")
        ax.set(title=f"block {layer + 1}", xlabel="attended item (key)", ylabel="item (query)")
        if len(ticks) <= 30:
            ax.set_xticks(range(len(ticks)), ticks, rotation=90, fontsize=7)
            ax.set_yticks(range(len(ticks)), ticks, fontsize=7)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(f"{type(model).__name__} attention over a {int(real.sum())}-item history")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
