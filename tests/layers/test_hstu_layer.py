import keras
import numpy as np
from absl.testing import parameterized

from tests import test_case
from tfseqrec.layers import HSTULayer

LENGTH = 6


def _norm(x, eps=1e-6):
    """Layer norm without scale or shift."""
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def _hstu(x, layer, padding, timestamps=None):
    """Equations (1)-(3) of Zhai et al. (2024), one sequence and one head at a time, with loops."""
    w1 = np.asarray(layer.uvqk.kernel)
    w2, b2 = np.asarray(layer.output_dense.kernel), np.asarray(layer.output_dense.bias)
    heads, a, lin, big_n = layer.num_heads, layer.attention_dim, layer.linear_dim, layer.max_sequence_length
    out = np.zeros_like(x)
    for b in range(x.shape[0]):
        h = _silu(_norm(x[b]) @ w1)  # (1)
        u, v = h[:, : heads * lin], h[:, heads * lin : 2 * heads * lin]
        q, k = h[:, 2 * heads * lin : 2 * heads * lin + heads * a], h[:, 2 * heads * lin + heads * a :]
        n = x.shape[1]
        av = np.zeros((n, heads * lin))
        for head in range(heads):
            qh, kh = q[:, head * a : (head + 1) * a], k[:, head * a : (head + 1) * a]
            vh = v[:, head * lin : (head + 1) * lin]
            for i in range(n):
                keys = [j for j in range(i + 1) if padding[b, j]]
                rabs = [_rab(layer, b, i, j, timestamps) for j in keys]
                if layer.attention == "silu":
                    weights = [_silu(qh[i] @ kh[j] + rab) / big_n for j, rab in zip(keys, rabs)]  # (2)
                else:  # softmax(Q K^T / sqrt(a) + rab) over the keys attended
                    logits = np.array([qh[i] @ kh[j] / np.sqrt(a) + rab for j, rab in zip(keys, rabs)])
                    weights = _softmax(logits) if keys else []
                for j, weight in zip(keys, weights):
                    av[i, head * lin : (head + 1) * lin] += weight * vh[j]
        out[b] = x[b] + (_norm(av) * u) @ w2 + b2  # (3)
        out[b] *= padding[b][:, None]
    return out


def _rab(layer, b, i, j, timestamps):
    """The relative attention bias of query ``i`` and key ``j`` of sequence ``b``."""
    n, big_n = (timestamps.shape[1] if timestamps is not None else None), layer.max_sequence_length
    rab = np.asarray(layer.position_bias)[j - i + big_n - 1]
    if timestamps is not None:
        query_time = timestamps[b, min(i + 1, n - 1)]  # the predicted item's time
        gap = abs(query_time - timestamps[b, j])
        bucket = min(int(np.floor(np.log(max(gap, 1)) / 0.301)), layer.num_time_buckets)
        rab += np.asarray(layer.time_bias)[bucket]
    return rab


def _layer(**kwargs):
    layer = HSTULayer(
        **{"num_heads": 2, "attention_dim": 3, "linear_dim": 4, "max_sequence_length": 8, **kwargs}
    )
    layer.build((None, LENGTH, 8))
    test_case.set_numpy_weights(layer, seed=3, scale=0.5)
    return layer


class HSTULayerTest(test_case.TestCase, parameterized.TestCase):
    @parameterized.parameters("silu", "softmax")
    def test_layer_equals_the_papers_equations(self, attention):
        layer = _layer(attention=attention)
        x = np.random.default_rng(0).normal(size=(2, LENGTH, 8)).astype("float32")
        padding = np.ones((2, LENGTH), bool)
        padding[1, :2] = False  # left padding
        self.assertAllClose(np.asarray(layer(x, padding_mask=padding)), _hstu(x, layer, padding), atol=1e-5)

    def test_time_bias_equals_the_papers_buckets(self):
        layer = _layer(num_time_buckets=12)
        rng = np.random.default_rng(1)
        x = rng.normal(size=(2, LENGTH, 8)).astype("float32")
        # Gaps from 0 (same second) to about a year: buckets 0 to the cap.
        timestamps = np.sort(rng.integers(0, 3e7, size=(2, LENGTH)), axis=1)
        timestamps[0, 2] = timestamps[0, 1]
        padding = np.ones((2, LENGTH), bool)
        got = np.asarray(layer(x, padding_mask=padding, timestamps=timestamps))
        self.assertAllClose(got, _hstu(x, layer, padding, timestamps), atol=1e-5)
        self.assertNotAllClose(got, np.asarray(layer(x, padding_mask=padding, timestamps=timestamps * 0)))
        # As HSTUBackbone calls its layers: the mask and the buckets computed once, outside.
        shared = layer(
            x,
            padding_mask=padding,
            attention_mask_bias=layer.attention_mask_bias(padding, LENGTH),
            time_buckets=layer.time_buckets(timestamps),
        )
        self.assertAllClose(np.asarray(shared), _hstu(x, layer, padding, timestamps), atol=1e-5)

    def test_timestamps_need_time_buckets(self):
        with self.assertRaisesRegex(ValueError, "num_time_buckets"):
            _layer()(np.zeros((1, LENGTH, 8), "float32"), timestamps=np.zeros((1, LENGTH)))

    def test_causal_and_padding(self):
        layer = _layer()
        x = keras.random.normal((2, LENGTH, 8), seed=1)
        y1 = layer(x)
        changed = keras.ops.concatenate([x[:, :3], keras.random.normal((2, 3, 8), seed=2)], axis=1)
        self.assertAllClose(y1[:, :3], layer(changed)[:, :3], atol=1e-6)
        self.assertNotAllClose(y1[:, 3:], layer(changed)[:, 3:])
        mask = np.array([[False, False, True, True, True, True]] * 2)
        noisy = keras.ops.concatenate([keras.random.normal((2, 2, 8), seed=9), x[:, 2:]], axis=1)
        padded = layer(noisy, padding_mask=mask)
        self.assertAllClose(layer(x, padding_mask=mask), padded, atol=1e-6)
        self.assertAllClose(padded[:, :2], np.zeros((2, 2, 8)))

    def test_softmax_attention_rows_sum_to_one(self):
        layer = _layer(attention="softmax")
        mask = np.array([[False, True, True, True, True, True]])
        _, weights = layer(
            np.ones((1, LENGTH, 8), "float32"), padding_mask=mask, return_attention_scores=True
        )
        weights = np.asarray(weights)
        self.assertEqual(weights.shape, (1, 2, LENGTH, LENGTH))
        self.assertAllClose(weights[0, :, 1:].sum(-1), np.ones((2, LENGTH - 1)), atol=1e-5)
        self.assertAllClose(np.triu(weights[0], k=1), np.zeros((2, LENGTH, LENGTH)))
        self.assertAllClose(weights[0, :, :, 0], np.zeros((2, LENGTH)))  # the padded key

    @parameterized.parameters("float32", "mixed_float16", "mixed_bfloat16")
    def test_masked_weights_are_exactly_zero(self, policy):
        # The mask is a large negative bias before SiLU: exactly 0 after it, finite in float16.
        layer = _layer(dtype=policy)
        mask = np.array([[False, True, True, True, True, True]])
        x = 100.0 * np.random.default_rng(2).normal(size=(1, LENGTH, 8)).astype("float32")
        y, weights = layer(x, padding_mask=mask, return_attention_scores=True)
        weights = np.asarray(keras.ops.cast(weights, "float32"))
        self.assertTrue(np.isfinite(np.asarray(keras.ops.cast(y, "float32"))).all())
        self.assertTrue(np.isfinite(weights).all())
        self.assertAllEqual(np.triu(weights[0], k=1), np.zeros((2, LENGTH, LENGTH)))
        self.assertAllEqual(weights[0, :, :, 0], np.zeros((2, LENGTH)))  # the padded key
        self.assertGreater(np.abs(np.tril(weights[0, :, 1:, 1:])).sum(), 0.0)

    def test_without_position_bias_has_no_such_weight(self):
        layer = _layer(relative_position_bias=False)
        self.assertFalse(any("position_bias" in w.path for w in layer.weights))
        with self.assertRaisesRegex(ValueError, "attention"):
            HSTULayer(num_heads=1, attention_dim=2, linear_dim=2, max_sequence_length=4, attention="relu")
