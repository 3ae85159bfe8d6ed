"""The id models' backbones give the sequence output; the tasks that hold them add nothing to it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfseqrec.data import ClozePreprocessor, vocab
from tfseqrec.models import (
    HSTU,
    BERT4Rec,
    BERT4RecBackbone,
    HSTUBackbone,
    SASRec,
    SASRecBackbone,
    UniSRec,
    UniSRecBackbone,
)

IDS = np.array([[0, 0, 3, 4, 5], [2, 7, 9, 11, 4]], np.int32)
PAIRS = [
    (SASRecBackbone, SASRec, {}),
    (BERT4RecBackbone, BERT4Rec, {}),
    (HSTUBackbone, HSTU, {}),
    (UniSRecBackbone, UniSRec, {"text_dim": 6}),
]


@pytest.mark.parametrize("backbone_cls, task_cls, extra", PAIRS)
def test_backbone_gives_the_tasks_sequence_output(backbone_cls, task_cls, extra):
    sizes = {"num_items": 12, "max_sequence_length": 5, "hidden_dim": 8, "num_layers": 1, **extra}
    keras.utils.set_random_seed(0)
    backbone = backbone_cls(**sizes)
    task = task_cls(**sizes)
    hidden = np.asarray(backbone(IDS))
    assert hidden.shape == (2, 5, 8)

    # The task's weights are its backbone's, in the same order (then the task's own).
    def local(weights):  # a weight's path without the model's name
        return [w.path.split("/", 1)[1] for w in weights]

    assert local(backbone.weights) == local(task.weights[: len(backbone.weights)])
    for mine, theirs in zip(task.weights, backbone.weights):
        mine.assign(theirs)
    np.testing.assert_allclose(hidden, np.asarray(task(IDS)), atol=1e-6)
    restored = backbone_cls.from_config(backbone.get_config())
    restored.set_weights(backbone.get_weights())
    np.testing.assert_allclose(np.asarray(restored(IDS)), hidden, atol=1e-6)
    table, _ = backbone.output_table()
    assert table.shape == (12, 8)


@pytest.mark.parametrize("backbone_cls, task_cls, extra", PAIRS)
def test_task_holds_a_given_backbone_and_scores_with_its_table(backbone_cls, task_cls, extra):
    sizes = {"num_items": 12, "max_sequence_length": 5, "hidden_dim": 8, "num_layers": 1, **extra}
    backbone = backbone_cls(**sizes)
    task = task_cls(backbone=backbone, loss="softmax")
    assert task.backbone is backbone and task.backbone.hidden_dim == 8 and task.num_items == 12
    assert not hasattr(task, "hidden_dim")  # the backbone's own attributes are read on it
    assert task.weights and all(any(w is b for b in backbone.weights) for w in task.trainable_weights)
    # The oracle: the last position's output against the table, in NumPy.
    inputs = np.asarray(task.inference_inputs(IDS)["item_ids"]) if task_cls is BERT4Rec else IDS
    hidden = np.asarray(backbone(inputs))[:, -1]
    table, bias = (None if t is None else np.asarray(t) for t in backbone.output_table())
    expected = hidden @ table.T + (0 if bias is None else bias)
    np.testing.assert_allclose(np.asarray(task.score(IDS)), expected, rtol=1e-5, atol=1e-5)
    # The config nests the backbone's (keras.layers.serialize) beside the task's own options.
    config = task.get_config()
    assert config["backbone"]["class_name"] == backbone_cls.__name__
    assert config["backbone"]["config"] == backbone.get_config()
    restored = task_cls.from_config(config)
    assert type(restored.backbone) is backbone_cls and restored.get_config() == config
    with pytest.raises(ValueError, match="a backbone or the backbone's arguments, not both"):
        task_cls(backbone=backbone, hidden_dim=8)


def test_cloze_preprocessor_packs_x_y_sample_weight_same_in_tf_data():
    # Rates pinned to 0 or 1 so the output is exact: every real item becomes [MASK].
    layer = ClozePreprocessor(num_items=12, mask_prob=1.0, mask_token_rate=1.0, random_token_rate=0.0)
    x, y, weight = layer({"item_ids": tf.constant(IDS)})
    real = IDS >= vocab.NUM_RESERVED
    np.testing.assert_array_equal(x["item_ids"], np.where(real, vocab.MASK_ID, IDS))
    np.testing.assert_array_equal(x["padding_mask"], IDS != vocab.PAD_ID)
    np.testing.assert_array_equal(y, np.where(real, IDS, 0))
    np.testing.assert_array_equal(weight, real.astype(np.float32))
    mapped = next(iter(tf.data.Dataset.from_tensors({"item_ids": IDS}).map(layer)))
    for a, b in zip(tf.nest.flatten(mapped), tf.nest.flatten((x, y, weight))):
        np.testing.assert_array_equal(a, b)
