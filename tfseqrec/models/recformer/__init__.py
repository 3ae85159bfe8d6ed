"""Recformer (Li et al., KDD 2023): the backbone, its tasks, the serving recommender, weight conversion.

The backbone, the tasks and the weight conversion are ``keras.ops`` and import on any Keras
backend; the serving recommender (``RecformerRecommender``, ``item_token_states``,
``pack_inputs``) runs tensorflow-text's tokenizer in the graph and is imported on first use,
so that training on the JAX backend imports no TensorFlow.
"""

import importlib

from tfseqrec.models.recformer.backbone import RecformerBackbone
from tfseqrec.models.recformer.convert import load_bert_weights, minilm_path
from tfseqrec.models.recformer.tasks import Recformer, RecformerAligner, RecformerPretrainer

_SERVING = ("RecformerRecommender", "item_token_states", "pack_inputs")


def __getattr__(name):
    if name in _SERVING:  # TensorFlow: serving and evaluation only
        return getattr(importlib.import_module("tfseqrec.models.recformer.recommender"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
