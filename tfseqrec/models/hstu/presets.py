"""HSTU's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

# The values of the ``TrainConfig`` training options left ``None``, but for the learning rate
# (``HISTORY_TRAINING``). HSTU's sampled softmax (128 negatives per position, as the reference draws
# them) learns less per epoch than the full softmax on ML-1M (GPU probe: 0.161 against 0.188 after
# 40 epochs): full by default, the reference's when loss is "sampled_softmax" (for catalogues too
# large to score whole).
TRAINING = {
    "loss": "softmax",
    "num_negatives": 128,
    "negatives_per_position": True,
    "warmup_epochs": 0.0,
}

# Adam's rate, left to the data (``tfseqrec.training.config.history_training``) so that a smaller
# batch the data settle scales it (``batch_learning_rate``): 4e-3 at batches of 128, on short and
# long histories alike, so 2e-3 at ML-100K's batches of 32, the rate HSTU had there before. Pointwise
# attention sits at popularity's level for ~10 epochs at the reference's 1e-3 and ~5 at 2e-3
# (docs/models/hstu.md). On ML-1M 4e-3 leaves it sooner and keeps the lead: 0.2015 validation
# NDCG@10 after 56 epochs against 66 and 71 at 2e-3 (GPU, benchmarks/results/gpu-sasrec-plus.json);
# the CPU runs: benchmarks/README.md, "HSTU, defaults, 60 minutes" and "Probes: HSTU at Adam 4e-3 on
# Scientific".
HISTORY_TRAINING = {"long": {"learning_rate": 4e-3}, "short": {"learning_rate": 4e-3}}

# num_time_buckets, when the option is unset: this many log buckets of relative time bias (the
# reference's) when the data has event times, none otherwise (``tfseqrec.kinds`` settles it).
TIME_BUCKETS = 128

PRESETS = {
    # The ML-1M settings of benchmarks/ml1m.py and its stored runs (benchmarks/results/ml1m-*.json):
    # HSTU-large's sizes.
    "ml1m": {
        "max_sequence_length": 200,
        "hidden_dim": 50,
        "num_layers": 8,
        "num_heads": 2,
        "dropout": 0.2,
        "temperature": 0.05,
        "batch_size": 128,
        "bucket_boundaries": [50, 100],
        "loss": "softmax",
        "learning_rate": 4e-3,
        "warmup_epochs": 0.0,
    },
}
