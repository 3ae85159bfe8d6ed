import keras
import numpy as np
from absl.testing import parameterized

from tests import test_case
from tfseqrec.layers import TransformerBlock


class TransformerBlockTest(test_case.TestCase):
    def test_causal_outputs_ignore_the_future(self):
        block = TransformerBlock(num_heads=2, intermediate_dim=16, causal=True)
        x = keras.random.normal((2, 6, 8), seed=1)
        y1 = block(x)
        changed = keras.ops.concatenate([x[:, :3], keras.random.normal((2, 3, 8), seed=2)], axis=1)
        y2 = block(changed)
        self.assertAllClose(y1[:, :3], y2[:, :3], atol=1e-6)
        self.assertNotAllClose(y1[:, 3:], y2[:, 3:])

    def test_bidirectional_outputs_see_the_future(self):
        block = TransformerBlock(num_heads=2, intermediate_dim=16, causal=False, normalize_first=False)
        x = keras.random.normal((1, 4, 8), seed=1)
        y1 = block(x)
        y2 = block(keras.ops.concatenate([x[:, :3], keras.random.normal((1, 1, 8), seed=3)], axis=1))
        self.assertNotAllClose(y1[:, 0], y2[:, 0])

    def test_padding_is_ignored_and_zeroed(self):
        block = TransformerBlock(num_heads=1, intermediate_dim=8, causal=True)
        x = keras.random.normal((1, 5, 4), seed=1)
        mask = np.array([[False, False, True, True, True]])
        y1 = block(x, padding_mask=mask)
        noisy = keras.ops.concatenate([keras.random.normal((1, 2, 4), seed=9), x[:, 2:]], axis=1)
        y2 = block(noisy, padding_mask=mask)
        self.assertAllClose(y1, y2, atol=1e-6)
        self.assertAllClose(y1[:, :2], np.zeros((1, 2, 4)))

    def test_attention_scores_and_serialization(self):
        block = TransformerBlock(
            num_heads=2, intermediate_dim=16, dropout=0.1, activation="gelu", causal=True
        )
        out, scores = block(keras.random.normal((3, 4, 8)), return_attention_scores=True)
        self.assertEqual(tuple(scores.shape), (3, 2, 4, 4))
        # Causal: no weight above the diagonal; rows sum to 1.
        self.assertAllClose(np.triu(np.asarray(scores), k=1), np.zeros((3, 2, 4, 4)), atol=1e-7)
        self.assertAllClose(np.asarray(scores).sum(-1), np.ones((3, 2, 4)), atol=1e-5)
        self.run_serialization_test(block)


def _layer_norm(x, layer):
    gamma, beta = (np.asarray(w) for w in layer.weights)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + layer.epsilon) * gamma + beta


def _dense(x, layer):
    kernel, bias = (np.asarray(w) for w in layer.weights)
    return x @ kernel + bias


def _attention(query, value, layer, causal):
    """Single-head ``keras.layers.MultiHeadAttention`` in NumPy."""
    wq, bq, wk, bk, wv, bv, wo, bo = (np.asarray(w) for w in layer.weights)
    q = np.einsum("bld,dhk->blhk", query, wq) + bq
    k = np.einsum("bld,dhk->blhk", value, wk) + bk
    v = np.einsum("bld,dhk->blhk", value, wv) + bv
    logits = np.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1])
    if causal:
        length = query.shape[1]
        logits = np.where(np.tril(np.ones((length, length), bool)), logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhqs,bshk->bqhk", weights, v)
    return np.einsum("bqhk,hkd->bqd", out, wo) + bo


def _ln_residual(x, block, reference):
    q = _layer_norm(x, block.attention_norm)
    h = (q if reference else x) + _attention(q, x if reference else q, block.attention, causal=True)
    g = _layer_norm(h, block.ffn_norm)
    return (g if reference else h) + _ffn(g, block)


def _ffn(x, block):
    return _dense(np.maximum(_dense(x, block.ffn_in), 0.0), block.ffn_out)


class ReferenceBlockTest(test_case.TestCase, parameterized.TestCase):
    @parameterized.named_parameters(
        # The SASRec reference code's block:
        # Q = LN1(x); h = Q + MHA(Q, x, x); g = LN2(h); out = g + FFN(g).
        ("reference", True, lambda x, b: _ln_residual(x, b, reference=True)),
        # The textbook pre-LN block: h = x + MHA(LN1(x)); out = h + FFN(LN2(h)).
        ("textbook", False, lambda x, b: _ln_residual(x, b, reference=False)),
    )
    def test_block_equals_its_numpy_transcription(self, normalized_residual, oracle):
        block = TransformerBlock(
            num_heads=1,
            intermediate_dim=8,
            causal=True,
            normalized_residual=normalized_residual,
            attention_output_dropout=False,
        )
        x = np.asarray(keras.random.normal((2, 5, 8), seed=4))
        self.assertAllClose(np.asarray(block(x)), oracle(x, block), atol=1e-5)

    def test_kernel_initializer_reaches_every_kernel(self):
        block = TransformerBlock(
            num_heads=1, intermediate_dim=64, kernel_initializer=keras.initializers.RandomNormal(stddev=0.02)
        )
        block(np.zeros((1, 3, 64), np.float32))
        kernels = [w for w in block.weights if "kernel" in w.path]
        self.assertLen(kernels, 6)  # q, k, v, output, ffn_in, ffn_out
        for w in kernels:
            self.assertAllInRange(np.std(np.asarray(w)), 0.015, 0.025)
        self.assertNotAllClose(kernels[0], kernels[1])  # each kernel draws its own values
        self.run_serialization_test(block)

    def test_normalized_residual_needs_a_pre_ln_block(self):
        with self.assertRaisesRegex(ValueError, "normalize_first"):
            TransformerBlock(num_heads=1, intermediate_dim=8, normalize_first=False, normalized_residual=True)
