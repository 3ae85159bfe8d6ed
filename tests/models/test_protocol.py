"""Every kind's model satisfies the model contract (``tfseqrec.models.protocol``)."""

import numpy as np
import pytest
import tensorflow as tf

from tfseqrec import kinds
from tfseqrec.models import Recformer, RecformerBackbone, RecformerRecommender
from tfseqrec.models.protocol import SequentialModel

CONTRACT = ("num_items", "max_sequence_length", "uses_timestamps", "score", "recommend")


def _id_model(name):
    kind = kinds.get(name)
    config = kind.options({"hidden_dim": 8, "num_layers": 1, "num_heads": 2, "max_sequence_length": 4})
    kwargs = {"text_dim": 4, "text_embeddings": np.ones((5, 4), "float32")} if name == "unisrec" else {}
    return kind.build(config, 5, **kwargs)


def _recformer():
    backbone = RecformerBackbone(
        vocabulary_size=40,
        hidden_dim=8,
        num_layers=1,
        num_heads=2,
        intermediate_dim=16,
        max_tokens=24,
        max_sequence_length=4,
        attention_window=4,
    )
    tokens = tf.ragged.constant([[], [], [], [5], [6], [7]], dtype=tf.int64, ragged_rank=1)
    return RecformerRecommender(Recformer(backbone, num_items=3), tokens, tokens, cls_id=2)


@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_every_kinds_model_satisfies_the_protocol(name):
    model = _recformer() if name == "recformer" else _id_model(name)
    assert kinds.for_model(model) is kinds.get(name)
    assert isinstance(model, SequentialModel)
    # Its own attributes, read plainly (no getattr default anywhere).
    assert {attr: hasattr(type(model), attr) or attr in vars(model) for attr in CONTRACT} == dict.fromkeys(
        CONTRACT, True
    )
    assert isinstance(model.uses_timestamps, bool) and model.max_sequence_length == 4
