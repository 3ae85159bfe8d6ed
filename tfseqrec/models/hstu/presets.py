"""HSTU's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

# The values of the ``TrainConfig`` training options left ``None``. HSTU's sampled softmax (128
# negatives per position, as the reference draws them) learns less per epoch than the full softmax
# on ML-1M (GPU probe: 0.161 against 0.188 after 40 epochs): full by default, the reference's when
# loss is "sampled_softmax" (for catalogues too large to score whole). Adam at 2e-3, not the
# reference's 1e-3: pointwise attention sits at popularity level for ~10 epochs at 1e-3 and ~5 at
# 2e-3; validation NDCG@10 after 40 epochs 0.19 against 0.16 (a GPU probe; docs/models/hstu.md).
TRAINING = {
    "loss": "softmax",
    "num_negatives": 128,
    "negatives_per_position": True,
    "learning_rate": 2e-3,
    "warmup_epochs": 0.0,
}

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
        "learning_rate": 2e-3,
        "warmup_epochs": 0.0,
    },
}
