"""WindowedSelfAttention equals dense attention under the equivalent mask."""

import numpy as np

from tests.test_case import TestCase
from tfseqrec.layers.windowed_attention import WindowedSelfAttention


def _dense_reference(layer, x, padding, radius, g):
    """Plain NumPy attention with a full [length, length] mask."""

    def proj(dense, t):
        kernel, bias = (w.numpy() for w in dense.weights)
        return np.einsum("btd,dhk->bthk", t, kernel) + bias

    scale = 1.0 / np.sqrt(layer.key_dim)
    q, k, v = proj(layer.query_dense, x) * scale, proj(layer.key_dense, x), proj(layer.value_dense, x)
    qg, kg, vg = (
        proj(layer.query_global_dense, x) * scale,
        proj(layer.key_global_dense, x),
        proj(layer.value_global_dense, x),
    )
    length = x.shape[1]
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    local_ok = (np.abs(i - j) <= radius) | (j < g)
    out = np.zeros(q.shape)
    for b in range(x.shape[0]):
        for t in range(length):
            query, keys, values = (qg, kg, vg) if t < g else (q, k, v)
            allowed = padding[b] & (True if t < g else local_ok[t])
            scores = np.einsum("hk,shk->hs", query[b, t], keys[b])
            scores = np.where(allowed[None, :], scores, -np.inf)
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            weights /= weights.sum(axis=-1, keepdims=True)
            out[b, t] = np.einsum("hs,shk->hk", weights, values[b])
    kernel, bias = (w.numpy() for w in layer.output_dense.weights)
    return (np.einsum("bthk,hkd->btd", out, kernel) + bias) * padding[..., None]


class WindowedSelfAttentionTest(TestCase):
    def test_equals_dense_masked_attention(self):
        rng = np.random.default_rng(0)
        for length, window, g in [(11, 4, 1), (16, 6, 1), (5, 8, 2), (9, 2, 1)]:
            x = rng.normal(size=(2, length, 8)).astype("float32")
            padding = np.ones((2, length), bool)
            padding[1, length - 3 :] = False  # a padded tail
            layer = WindowedSelfAttention(
                num_heads=2, key_dim=4, attention_window=window, num_global_tokens=g
            )
            got = layer(x, padding_mask=padding)
            expected = _dense_reference(layer, x, padding, window // 2, g)
            self.assertAllClose(got, expected, atol=1e-5)

    def test_serialization_and_memory_shape(self):
        layer = WindowedSelfAttention(num_heads=2, key_dim=4, attention_window=4, dropout=0.1)
        self.run_serialization_test(layer)
        # Scores are [blocks, block, 3 * block]: linear in the length for a fixed window.
        x = np.zeros((1, 1000, 8), "float32")
        self.assertEqual(tuple(layer(x).shape), (1, 1000, 8))
