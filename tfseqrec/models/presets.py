"""Each model's training defaults and its named presets (tuned configurations).

A model option's default lives in the model's constructor only. What the constructor
does not hold, how the model is trained by default, is the model's
``default_training`` (``TRAINING`` below): the values of the ``TrainConfig``
training options left ``None`` (loss, learning rate, warm-up). A preset is a tuned
configuration by name, ``Model.presets[name]``: model options and training options
together, applied by ``tfseqrec train --preset NAME`` (or ``{"preset": NAME}`` in
the options), explicit options overriding it. A preset pins the values it was
measured with, so that it still reproduces its figures if a default changes.

The keys are the ``--model`` names; ``tfseqrec.cli.PRESETS`` lists the preset
names for help (a test checks that it matches).
"""

TRAINING = {
    # SASRec on ML-1M, 30 minutes, seed 0: best validation NDCG@10 0.1961 at 2e-3 against 0.1918 at 1e-3.
    "sasrec": {"loss": "softmax", "learning_rate": 2e-3, "warmup_epochs": 0.0},
    # BERT4Rec on ML-1M, 10 minutes, seed 0: best validation NDCG@10 0.1177 at 4e-3, 0.1079 at 2e-3,
    # 0.0807 at 1e-3. Without a warm-up, 4e-3 left seeds 1 and 2 near chance for 12 and 25+ epochs;
    # 5 epochs of warm-up lift seed 2 to 0.1250 in 10 minutes (0.0202 without).
    "bert4rec": {"loss": "softmax", "learning_rate": 4e-3, "warmup_epochs": 5.0},
    # UniSRec: SASRec's training defaults (its encoder is SASRec's).
    "unisrec": {"loss": "softmax", "learning_rate": 2e-3, "warmup_epochs": 0.0},
    # HSTU: its sampled softmax (128 negatives per position, as the reference draws them) learns less
    # per epoch than the full softmax on ML-1M (GPU probe: 0.161 against 0.188 after 40 epochs): full by
    # default, the reference's when loss is "sampled_softmax" (for catalogues too large to score whole).
    # Adam at 2e-3, not the reference's 1e-3: pointwise attention sits at popularity level for ~10 epochs
    # at 1e-3 and ~5 at 2e-3; validation NDCG@10 after 40 epochs 0.19 against 0.16 (a GPU probe;
    # docs/models/hstu.md).
    "hstu": {
        "loss": "softmax",
        "num_negatives": 128,
        "negatives_per_position": True,
        "learning_rate": 2e-3,
        "warmup_epochs": 0.0,
    },
}

# The ML-1M settings of benchmarks/ml1m.py and its stored runs (benchmarks/results/ml1m-*.json):
# the sizes of Klenitskiy & Vasilev (RecSys 2023) for SASRec and BERT4Rec, HSTU-large's for HSTU.
_ML1M_ID = {"max_sequence_length": 200, "hidden_dim": 64, "num_layers": 2, "batch_size": 128}

PRESETS = {
    "sasrec": {
        "ml1m": {**_ML1M_ID, "num_heads": 1, "dropout": 0.1, **TRAINING["sasrec"]},
    },
    "bert4rec": {
        "ml1m": {**_ML1M_ID, "num_heads": 2, "dropout": 0.1, "mask_prob": 0.2, **TRAINING["bert4rec"]},
    },
    "hstu": {
        "ml1m": {
            "max_sequence_length": 200,
            "hidden_dim": 50,
            "num_layers": 8,
            "num_heads": 2,
            "dropout": 0.2,
            "temperature": 0.05,
            "batch_size": 128,
            "loss": "softmax",
            "learning_rate": 2e-3,
            "warmup_epochs": 0.0,
        },
    },
    "unisrec": {
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
            **TRAINING["unisrec"],
        },
    },
}
