"""SASRec's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

# The values of the ``TrainConfig`` training options left ``None``. On ML-1M, 30 minutes,
# seed 0: best validation NDCG@10 0.1961 at 2e-3 against 0.1918 at 1e-3. Batches of 128 on any
# data (not the small-data rule of BERT4Rec and HSTU, ``training.default_batch_size``): on ML-100K,
# 4 CPU minutes, test NDCG@10 0.1152 with 128 against 0.1033 with 32 (best epoch 47 and 10).
TRAINING = {"loss": "softmax", "learning_rate": 2e-3, "warmup_epochs": 0.0, "batch_size": 128}

# The ML-1M settings of benchmarks/ml1m.py and its stored runs (benchmarks/results/ml1m-*.json):
# the sizes of Klenitskiy & Vasilev (RecSys 2023).
ML1M = {
    "max_sequence_length": 200,
    "hidden_dim": 64,
    "num_layers": 2,
    "batch_size": 128,
    "num_heads": 1,
    "dropout": 0.1,
    "bucket_boundaries": [50, 100],
    **TRAINING,
}

PRESETS = {
    "ml1m": ML1M,
    # ML-1M in a fixed 80 epochs (25-28 minutes on 2 CPU cores), for data like it: every 200-item
    # window of a long history trained on (not only the newest), Adam 4e-3 decayed to 0 by a
    # cosine after one warm-up epoch. Three seeds on ML-1M: test NDCG@10 0.19 and more
    # (benchmarks/results/ml1m-sasrec-window-stride-cosine-80-*.json). Not the defaults: each of
    # the two changes lowered SASRec on ML-100K (benchmarks/README.md, "Probes: every id model on
    # the earlier windows ..." and "Probes: SASRec's cosine decay over 60 epochs on ML-100K ...").
    "ml1m-cosine": {
        **ML1M,
        "learning_rate": 4e-3,
        "learning_rate_schedule": "cosine",
        "warmup_epochs": 1.0,
        "epochs": 80,
        "window_stride": 200,
    },
}
