"""tfseqrec: transformer sequential recommenders (SASRec, BERT4Rec, HSTU, UniSRec, Recformer) in Keras.

The public surface, importable from the top package:

- models: ``SASRec``, ``BERT4Rec``, ``HSTU``, ``UniSRec``, ``Recformer``,
  ``RecformerRecommender``, ``SequentialRecommender`` (their base);
- modules: ``data`` (readers, splits, vocabulary, tf.data pipelines, Cloze masking),
  ``layers``, ``losses``, ``metrics``, ``ranking``, ``export`` (SavedModels for
  TensorFlow Serving), ``serving`` (request helpers);
- ``load(model_dir)``: ``(model, vocabulary, info)`` of any directory ``tfseqrec train``
  wrote, whatever the model kind;
- ``export_model(model, vocabulary, base_path)``: the next TensorFlow Serving version
  of a model, ``(path, version)``;
- ``evaluate(model, cases)``: full-catalogue NDCG@K / HR@K / MRR.

Names load on first use, so ``import tfseqrec`` (and ``tfseqrec --help``) does not
import TensorFlow until a model, layer or pipeline is asked for.

Example:

>>> import tfseqrec
>>> sorted(n for n in tfseqrec.__all__ if n[0].isupper())  # doctest: +NORMALIZE_WHITESPACE
['BERT4Rec', 'HSTU', 'Recformer', 'RecformerRecommender', 'SASRec', 'SequentialRecommender', 'UniSRec']
"""

import importlib

from tfseqrec.version import __version__

_EXPORTS = {
    "tfseqrec.models": [
        "BERT4Rec",
        "HSTU",
        "Recformer",
        "RecformerRecommender",
        "SASRec",
        "SequentialRecommender",
        "UniSRec",
    ],
    "tfseqrec.kinds": ["export_model", "load"],
    "tfseqrec.evaluation": ["evaluate"],
}
_MODULES = ["data", "export", "layers", "losses", "metrics", "ranking", "serving"]
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted([*_WHERE, *_MODULES])


def __getattr__(name):
    # PEP 562: the public names are imported on first access (TensorFlow with them).
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(f"tfseqrec.{name}")
    else:
        raise AttributeError(f"module 'tfseqrec' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])
