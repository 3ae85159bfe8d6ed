import keras
import numpy as np

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
        block = TransformerBlock(num_heads=2, intermediate_dim=16, dropout=0.1, activation="gelu", causal=True)
        out, scores = block(keras.random.normal((3, 4, 8)), return_attention_scores=True)
        self.assertEqual(tuple(scores.shape), (3, 2, 4, 4))
        # Causal: no weight above the diagonal; rows sum to 1.
        self.assertAllClose(np.triu(np.asarray(scores), k=1), np.zeros((3, 2, 4, 4)), atol=1e-7)
        self.assertAllClose(np.asarray(scores).sum(-1), np.ones((3, 2, 4)), atol=1e-5)
        self.run_serialization_test(block)
