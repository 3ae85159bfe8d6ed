"""Every public layer through the shared harness (``TestCase.run_layer_test``).

Config and JSON round trips, symbolic and eager calls, a compiled ``fit`` step and
mixed precision for each; pinned first outputs of tiny layers whose weights come from
NumPy's generator, so a silent numerical change fails on either stack (values recorded
from this code once, as keras-hub pins its backbones' ``expected_partial_output``;
correctness itself is checked against NumPy references in the layer's own test file).
"""

import numpy as np

from tests.test_case import TestCase
from tfseqrec.layers import (
    HSTULayer,
    RecformerEmbedding,
    TransformerBlock,
    WindowedSelfAttention,
    WindowedTransformerBlock,
)


def _x(batch=2, length=9, dim=8, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, length, dim)).astype("float32")


def _padding(batch=2, length=9):
    mask = np.ones((batch, length), bool)
    mask[1, length - 3 :] = False
    return mask


class LayerHarnessTest(TestCase):
    def test_transformer_block(self):
        self.run_layer_test(
            TransformerBlock,
            {"num_heads": 2, "intermediate_dim": 16, "dropout": 0.0, "causal": True},
            _x(),
            (2, 9, 8),
            call_kwargs={"padding_mask": _padding()},
            expected_partial_output=PINNED["transformer_block"],
        )

    def test_windowed_self_attention(self):
        self.run_layer_test(
            WindowedSelfAttention,
            {"num_heads": 2, "key_dim": 4, "attention_window": 4},
            _x(),
            (2, 9, 8),
            call_kwargs={"padding_mask": _padding()},
            expected_partial_output=PINNED["windowed_self_attention"],
        )

    def test_windowed_transformer_block(self):
        self.run_layer_test(
            WindowedTransformerBlock,
            {"num_heads": 2, "intermediate_dim": 16, "attention_window": 4},
            _x(),
            (2, 9, 8),
            call_kwargs={"padding_mask": _padding()},
            expected_partial_output=PINNED["windowed_transformer_block"],
        )

    def test_hstu_layer(self):
        timestamps = np.cumsum(np.random.default_rng(2).integers(0, 10**5, size=(2, 9)), axis=1)
        self.run_layer_test(
            HSTULayer,
            {
                "num_heads": 2,
                "attention_dim": 4,
                "linear_dim": 4,
                "max_sequence_length": 9,
                "num_time_buckets": 16,
            },
            _x(),
            (2, 9, 8),
            call_kwargs={"padding_mask": _padding(), "timestamps": timestamps},
            expected_partial_output=PINNED["hstu_layer"],
        )

    def test_recformer_embedding(self):
        rng = np.random.default_rng(1)
        inputs = {
            "token_ids": rng.integers(0, 30, size=(2, 9)).astype("int32"),
            "token_type_ids": rng.integers(0, 3, size=(2, 9)).astype("int32"),
            "item_position_ids": rng.integers(0, 4, size=(2, 9)).astype("int32"),
        }
        self.run_layer_test(
            RecformerEmbedding,
            {"vocabulary_size": 30, "hidden_dim": 8, "max_tokens": 9, "max_sequence_length": 3},
            inputs,
            (2, 9, 8),
            expected_partial_output=PINNED["recformer_embedding"],
        )


PINNED = {
    "transformer_block": [0.266436, -0.000646, 0.318531, -0.293720, -0.887374, -0.214235],
    "windowed_self_attention": [0.019327, 0.342640, -0.232449, 0.197857, 0.153767, 0.209903],
    "windowed_transformer_block": [-0.061284, 0.089489, 0.141518, 0.038809, 0.345551, -0.201370],
    "hstu_layer": [0.346327, -0.113959, 0.640783, 0.113099, -0.351711, 0.488948],
    "recformer_embedding": [0.187745, 0.113940, 0.149243, 0.347587, -0.175794, -0.517826],
}
