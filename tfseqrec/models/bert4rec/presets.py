"""BERT4Rec's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

# The values of the ``TrainConfig`` training options left ``None``. On ML-1M, 10 minutes, seed 0:
# best validation NDCG@10 0.1177 at 4e-3, 0.1079 at 2e-3, 0.0807 at 1e-3. Without a warm-up, 4e-3
# left seeds 1 and 2 near chance for 12 and 25+ epochs; 5 epochs of warm-up lift seed 2 to 0.1250
# in 10 minutes (0.0202 without).
TRAINING = {"loss": "softmax", "learning_rate": 4e-3, "warmup_epochs": 5.0}

PRESETS = {
    # The ML-1M settings of benchmarks/ml1m.py and its stored runs (benchmarks/results/ml1m-*.json):
    # the sizes of Klenitskiy & Vasilev (RecSys 2023).
    "ml1m": {
        "max_sequence_length": 200,
        "hidden_dim": 64,
        "num_layers": 2,
        "batch_size": 128,
        "num_heads": 2,
        "dropout": 0.1,
        "mask_prob": 0.2,
        **TRAINING,
    },
}
