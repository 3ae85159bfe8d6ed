"""UniSRec's training defaults and named presets (``tfseqrec.models.presets`` gathers every model's)."""

from tfseqrec.models.sasrec import presets as sasrec_presets

# SASRec's training defaults (its encoder is SASRec's).
TRAINING = dict(sasrec_presets.TRAINING)

PRESETS = {
    # Amazon Scientific with ids added to the text vectors, 384 wide (benchmarks/results/text-seeds.json,
    # text-unisrec-384*.json; benchmarks/text.py's ID_CONFIG with these overrides).
    "scientific": {
        "max_sequence_length": 50,
        "hidden_dim": 384,
        "num_layers": 2,
        "num_heads": 2,
        "dropout": 0.5,
        "use_id_embeddings": True,
        "batch_size": 128,
        "epochs": 8,
        "patience": 10,
        **TRAINING,
    },
}
