"""SASRec's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

# The values of the ``TrainConfig`` training options left ``None``. On ML-1M, 30 minutes,
# seed 0: best validation NDCG@10 0.1961 at 2e-3 against 0.1918 at 1e-3. Batches of 128 on any
# data (not the small-data rule of BERT4Rec and HSTU, ``training.default_batch_size``): on ML-100K,
# 4 CPU minutes, test NDCG@10 0.1152 with 128 against 0.1033 with 32 (best epoch 47 and 10).
TRAINING = {"loss": "softmax", "learning_rate": 2e-3, "warmup_epochs": 0.0, "batch_size": 128}

PRESETS = {
    # The ML-1M settings of benchmarks/ml1m.py and its stored runs (benchmarks/results/ml1m-*.json):
    # the sizes of Klenitskiy & Vasilev (RecSys 2023).
    "ml1m": {
        "max_sequence_length": 200,
        "hidden_dim": 64,
        "num_layers": 2,
        "batch_size": 128,
        "num_heads": 1,
        "dropout": 0.1,
        "bucket_boundaries": [50, 100],
        **TRAINING,
    },
}
