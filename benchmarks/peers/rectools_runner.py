"""Trains one RecTools model on a split written by ``side_by_side.py`` and writes its score matrices.

Runs in ``.venv-peers`` (RecTools 0.19, PyTorch on the CPU), never in the package's
environment: it imports neither TensorFlow nor tfseqrec, and ranks nothing. The harness
ranks every score matrix this script writes with ``tfseqrec.evaluation``, the code path
tfseqrec's own models are scored with.

The conversation with the harness, over files in ``--work`` and lines on stdin/stdout:

- ``fit.npz`` (written by the harness): ``users`` and ``items`` (int64, the interactions
  RecTools fits on, each user's in time order), ``val_users`` (users whose last fitted
  item is their validation target; empty without a validation split), ``test_users``,
  ``num_items`` and ``num_reserved`` (item ``i`` is score column ``i - num_reserved``).
- After each epoch: with a validation split, ``val-E.npy`` (float32
  ``[len(val_users), num_items]``: the scores of each validation user's history, its
  fitted items less the validation item); then the line ``@@peer {"event": "epoch", ...}``
  with the fit seconds so far, and the harness answers ``continue`` or ``stop`` (its
  early stopping). The time budget and the epoch cap stop training here.
- After training: ``@@peer {"event": "trained", ...}``; the harness answers
  ``score E`` (the epoch to restore, its best by validation), and this script writes
  ``test.npy`` (``[len(test_users), num_items]``, each test user's history being its
  fitted items) and ``@@peer {"event": "test", ...}``.

Items RecTools cannot score (never in its training data) get ``-inf``, so such a target
ranks last; a user it cannot score (no known item) gets a row of ``-inf``.

Usage (the harness runs it):
    .venv-peers/bin/python benchmarks/peers/rectools_runner.py --work DIR --model sasrec --minutes 30
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
from rectools import Columns
from rectools.dataset import Dataset
from rectools.models import BERT4RecModel, HSTUModel, SASRecModel
from rectools.models.nn.item_net import IdEmbeddingsItemNet

warnings.simplefilter("ignore", UserWarning)
warnings.simplefilter("ignore", FutureWarning)

# RecTools' ML-1M settings, from its own notebooks (MobileTeleSystems/RecTools):
# - hstu: examples/tutorials/transformers_comparison.ipynb and transformers_HSTU_tutorial.ipynb,
#   the "paper config" for ML-1M, HSTU-large: session_max_len 200, n_factors 50, 8 blocks,
#   2 heads, dropout 0.2, sampled softmax with 128 uniform negatives per position, logits
#   scaled by 1/0.05, cosine similarity (HSTUModel's default), Adam at 1e-3, batch 128,
#   id embeddings only. Relative time attention is off: the ML-1M files here carry no
#   timestamps (the notebooks read them), so only the relative position attention stays.
# - sasrec: the same notebook config's size (the SASRec paper's ML-1M size: 50 wide,
#   2 blocks, 1 head, 200 items, dropout 0.2) with RecTools' default full softmax.
# - bert4rec: the BERT4Rec paper's ML-1M size (64 wide, 2 blocks, 2 heads, 200 items,
#   mask probability 0.2, dropout 0.1) with RecTools' default full softmax.
# (RecTools' library defaults, 256 wide, 4 heads, 100 items, are not an ML-1M setting.)
COMMON = {
    "session_max_len": 200,
    "item_net_block_types": (IdEmbeddingsItemNet,),
    "lr": 1e-3,
    "batch_size": 128,
}
# Users scored a batch (RecTools' ``recommend_batch_size`` default).
RECOMMEND_BATCH_SIZE = 256
MODELS = {
    "sasrec": (SASRecModel, {"n_factors": 50, "n_blocks": 2, "n_heads": 1, "dropout_rate": 0.2}),
    "bert4rec": (
        BERT4RecModel,
        {"n_factors": 64, "n_blocks": 2, "n_heads": 2, "dropout_rate": 0.1, "mask_prob": 0.2},
    ),
    "hstu": (
        HSTUModel,
        {
            "n_factors": 50,
            "n_blocks": 8,
            "n_heads": 2,
            "dropout_rate": 0.2,
            "loss": "sampled_softmax",
            "n_negatives": 128,
            "lightning_module_kwargs": {"logits_t": 0.05},
            "relative_time_attention": False,
            "relative_pos_attention": True,
        },
    ),
}

# What the module-level hooks read: RecTools names its ``get_val_mask_func`` and
# ``get_trainer_func`` in its config (so they are module functions), and Lightning
# deep-copies the trainer with its callbacks (so the epoch callback holds no data).
RUN = {"val_users": frozenset(), "callbacks": [], "max_epochs": 1}


def validation_mask(interactions):
    """RecTools' ``get_val_mask_func``: the last interaction of each validation user."""
    times = interactions[Columns.Datetime]
    last = times == times.groupby(interactions[Columns.User]).transform("max")
    return (last & interactions[Columns.User].isin(RUN["val_users"])).to_numpy()


def trainer():
    """RecTools' ``get_trainer_func``: CPU, no checkpoints or logs, this script's epoch callback."""
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=RUN["max_epochs"],
        min_epochs=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        callbacks=RUN["callbacks"],
    )


def interactions_frame(users, items):
    """RecTools' interaction table; the row order is the time order (one second apart)."""
    return pd.DataFrame(
        {
            Columns.User: users,
            Columns.Item: items,
            Columns.Weight: np.ones(len(users), np.float32),
            Columns.Datetime: pd.to_datetime(np.arange(len(users)), unit="s"),
        }
    )


def score_matrix(module, preparator, frame, users, num_items, num_reserved):
    """float32 ``[len(users), num_items]``: the model's scores of every item after each user's history in ``frame``.

    RecTools' own inference path (``transform_dataset_u2i``, its recommend data loader, the
    session and item towers, then the similarity module's logits: cosine for HSTU, dot
    product otherwise), without its top-k.
    """
    dataset = preparator.transform_dataset_u2i(Dataset.construct(frame), users)
    loader = preparator.get_dataloader_recommend(dataset, RECOMMEND_BATCH_SIZE)
    training = module.training
    user_embs, item_embs = module._get_user_item_embeddings(loader, "cpu")
    with torch.no_grad():
        logits = module.torch_model.similarity_module(user_embs, item_embs).numpy()
    module.train(training)
    external = preparator.train_dataset.item_id_map.external_ids
    internal = np.array([i for i, e in enumerate(external) if isinstance(e, (int, np.integer))])
    columns = np.array([external[i] for i in internal], np.int64) - num_reserved
    scores = np.full((len(users), num_items), -np.inf, np.float32)
    rows = pd.Index(dataset.user_id_map.external_ids).get_indexer(users)
    known = rows >= 0
    scores[np.ix_(np.flatnonzero(known), columns)] = logits[rows[known]][:, internal]
    return scores


def settings(options):
    """The model's settings as JSON values, for the harness's record."""
    named = {
        **COMMON,
        **options,
        "item_net_block_types": [t.__name__ for t in COMMON["item_net_block_types"]],
    }
    return {k: v for k, v in named.items() if isinstance(v, (int, float, str, bool, dict, list))}


def harness_says():
    """The harness's answer; its end of the pipe closed (it failed or was stopped) ends this run too."""
    line = sys.stdin.readline()
    if not line:
        raise SystemExit("rectools_runner: the harness is gone")
    return line.strip()


def emit(event, **values):
    print("@@peer " + json.dumps({"event": event, **values}), flush=True)


class EpochEnd(pl.Callback):
    """After each epoch: keeps the weights, writes the validation scores, asks the harness whether to go on."""

    def __init__(self, work, budget_seconds):
        self.work, self.budget, self.start = work, budget_seconds, None

    def on_train_start(self, trainer, pl_module):
        self.start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module):
        epoch = trainer.current_epoch + 1
        torch.save(pl_module.torch_model.state_dict(), os.path.join(self.work, f"state-{epoch}.pt"))
        path, scoring = None, time.perf_counter()
        if len(RUN["fit"]["val_users"]):
            path = os.path.join(self.work, f"val-{epoch}.npy")
            scores = scores_of(
                pl_module, pl_module.data_preparator, RUN["val_frame"], RUN["fit"]["val_users"]
            )
            np.save(path, scores)
        scoring = time.perf_counter() - scoring
        emit("epoch", epoch=epoch, elapsed=time.perf_counter() - self.start, scores=path, scoring=scoring)
        answer = harness_says()
        if answer == "stop" or time.perf_counter() - self.start >= self.budget:
            trainer.should_stop = True


def scores_of(module, preparator, frame, users):
    fit = RUN["fit"]
    return score_matrix(module, preparator, frame, users, int(fit["num_items"]), int(fit["num_reserved"]))


def validation_frame(fit):
    """The interactions less each validation user's last one: the validation histories."""
    users, items = fit["users"], fit["items"]
    last = np.r_[users[1:] != users[:-1], True]
    keep = ~(np.isin(users, fit["val_users"]) & last)
    return interactions_frame(users[keep], items[keep])


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", required=True, help="the harness's folder: fit.npz in, score matrices out")
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--minutes", type=float, required=True, help="fit time budget, validation included")
    parser.add_argument("--epochs", type=int, default=200, help="the most epochs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss", choices=["softmax", "sampled_softmax"], help="a loss the protocol fixes")
    parser.add_argument("--negatives", type=int, help="sampled softmax: uniform negatives per position")
    args = parser.parse_args()
    pl.seed_everything(args.seed, workers=True, verbose=False)
    fit = dict(np.load(os.path.join(args.work, "fit.npz")))
    frame = interactions_frame(fit["users"], fit["items"])
    RUN.update(
        fit=fit,
        val_frame=validation_frame(fit),
        val_users=frozenset(fit["val_users"].tolist()),
        callbacks=[EpochEnd(args.work, args.minutes * 60)],
        max_epochs=args.epochs,
    )
    cls, options = MODELS[args.model]
    if args.loss:  # RecTools samples uniform negatives per position (CatalogUniformSampler)
        options = {**options, "loss": args.loss, "n_negatives": args.negatives or 1}
    extra = {"get_val_mask_func": validation_mask} if len(fit["val_users"]) else {}
    model = cls(**COMMON, **options, **extra, get_trainer_func=trainer, recommend_torch_device="cpu")
    model.fit(Dataset.construct(frame))
    emit(
        "trained",
        epochs=model.fit_trainer.current_epoch,
        threads=torch.get_num_threads(),
        options=settings(options),
    )
    epoch = int(harness_says().split()[1])
    model.torch_model.load_state_dict(torch.load(os.path.join(args.work, f"state-{epoch}.pt")))
    path = os.path.join(args.work, "test.npy")
    np.save(path, scores_of(model.lightning_model, model.data_preparator, frame, fit["test_users"]))
    emit("test", epoch=epoch, scores=path)


if __name__ == "__main__":
    main()
