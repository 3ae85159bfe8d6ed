"""The models: SASRec, BERT4Rec and HSTU (item ids), Recformer (item text), UniSRec (both).

Each id model is a task (``tasks.NextItemTask``, ``tasks.ClozeTask``) holding its backbone
(``SASRecBackbone``, ...: the sequence output), as keras-hub splits them; one package
per model (``sasrec/``: ``backbone.py``, ``sasrec.py``). Each model's training defaults and
named presets are its entry in ``tfseqrec.registry``.

The id models and UniSRec (over text vectors computed beforehand) are ``keras.ops`` and
import on any Keras backend. Recformer and the sentence encoder need TensorFlow
(tensorflow-text's tokenizer, ``tf.Module``): on the TensorFlow backend they are imported
with the package, as before (loading a model file needs its classes registered); on
another they are imported on first use, so that ``import tfseqrec.models`` on the JAX
backend imports no TensorFlow.
"""

import importlib

import keras

from tfseqrec.models.base import SequentialBackbone, SequentialRecommender, exclude_items
from tfseqrec.models.bert4rec import BERT4Rec, BERT4RecBackbone
from tfseqrec.models.hstu import HSTU, HSTUBackbone
from tfseqrec.models.sasrec import SASRec, SASRecBackbone
from tfseqrec.models.tasks import ClozeTask, NextItemTask
from tfseqrec.models.unisrec import UniSRec, UniSRecBackbone, UniSRecPretrainer

_LAZY = {
    "tfseqrec.models.recformer": [
        "Recformer",
        "RecformerAligner",
        "RecformerBackbone",
        "RecformerPretrainer",
        "RecformerRecommender",
    ],
    "tfseqrec.models.sentence_encoder": ["SentenceEncoder"],
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}
if keras.backend.backend() == "tensorflow":
    from tfseqrec.models.recformer import (
        Recformer,
        RecformerAligner,
        RecformerBackbone,
        RecformerPretrainer,
        RecformerRecommender,
    )
    from tfseqrec.models.sentence_encoder import SentenceEncoder
__all__ = sorted(
    [
        "BERT4Rec",
        "BERT4RecBackbone",
        "ClozeTask",
        "HSTU",
        "HSTUBackbone",
        "NextItemTask",
        "SASRec",
        "SASRecBackbone",
        "SequentialBackbone",
        "SequentialRecommender",
        "UniSRec",
        "UniSRecBackbone",
        "UniSRecPretrainer",
        "exclude_items",
        *_WHERE,
    ]
)


def __getattr__(name):
    # PEP 562: the text models are imported on first access (TensorFlow with them).
    if name not in _WHERE:
        raise AttributeError(f"module 'tfseqrec.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])
