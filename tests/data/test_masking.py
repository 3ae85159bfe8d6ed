import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import test_case
from tfseqrec.data import masking, vocab

NUM_ITEMS = 500
FIRST = vocab.NUM_RESERVED
# tf.data and tf.function are the TensorFlow backend's; tests/backends runs this file on JAX too.
ON_TENSORFLOW = keras.backend.backend() == "tensorflow"


def _batch(num_rows=10_000, length=50, seed=0):
    """Left-padded rows with lengths 1..length, real ids only."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(FIRST, FIRST + NUM_ITEMS, size=(num_rows, length)).astype(np.int32)
    lengths = rng.integers(1, length + 1, size=num_rows)
    ids[np.arange(length)[None, :] < (length - lengths)[:, None]] = vocab.PAD_ID
    return ids


class ClozeMaskingTest(test_case.TestCase):
    def test_rates_over_10k_sequences(self):
        ids = _batch()
        layer = masking.ClozeMasking(NUM_ITEMS, mask_prob=0.2, seed=7)
        masked, labels, weights = (np.asarray(t) for t in layer(ids))
        real = ids != vocab.PAD_ID
        chosen = weights == 1.0
        # Masked share: within 0.5 percentage points of the probability.
        self.assertAllClose(chosen[real].mean(), 0.2, atol=0.005)
        # 80 / 10 / 10 among chosen items, within 1 point each.
        became_mask = masked[chosen] == vocab.MASK_ID
        kept = masked[chosen] == ids[chosen]
        random = ~became_mask & ~kept
        self.assertAllClose(became_mask.mean(), 0.8, atol=0.01)
        # A random draw can hit the original item (1 / NUM_ITEMS of the 10%).
        self.assertAllClose(random.mean(), 0.1 * (1 - 1 / NUM_ITEMS), atol=0.01)
        self.assertAllClose(kept.mean(), 0.1 + 0.1 / NUM_ITEMS, atol=0.01)
        # Random replacements are real items.
        self.assertAllInRange(masked[chosen & (masked != vocab.MASK_ID)], FIRST, FIRST + NUM_ITEMS - 1)

    def test_padding_never_masked_and_outputs_consistent(self):
        ids = _batch(num_rows=2000)
        masked, labels, weights = (np.asarray(t) for t in masking.ClozeMasking(NUM_ITEMS, 0.3, seed=1)(ids))
        pad = ids == vocab.PAD_ID
        self.assertTrue(np.all(masked[pad] == vocab.PAD_ID))
        self.assertTrue(np.all(weights[pad] == 0))
        # Labels hold the original id exactly where the weight is 1, else 0.
        np.testing.assert_array_equal(labels, np.where(weights == 1, ids, 0))
        # Unchosen positions are untouched.
        np.testing.assert_array_equal(masked[weights == 0], ids[weights == 0])
        self.assertEqual(masked.dtype, ids.dtype)
        self.assertEqual(weights.dtype, np.float32)

    def test_at_least_one_per_non_empty_sequence(self):
        ids = _batch(num_rows=3000, length=8)
        ids[:10] = vocab.PAD_ID  # empty rows stay empty
        _, _, weights = masking.ClozeMasking(NUM_ITEMS, mask_prob=0.0, seed=3)(ids)
        weights = np.asarray(weights)
        np.testing.assert_array_equal(weights[:10].sum(axis=1), 0)
        # mask_prob=0: exactly the one forced position per non-empty row.
        np.testing.assert_array_equal(weights[10:].sum(axis=1), 1)

    def test_mask_prob_one_all_mask_token(self):
        ids = _batch(num_rows=100, length=12)
        layer = masking.ClozeMasking(NUM_ITEMS, mask_prob=1.0, mask_token_rate=1.0, random_token_rate=0.0)
        masked, labels, weights = (np.asarray(t) for t in layer(ids))
        real = ids != vocab.PAD_ID
        np.testing.assert_array_equal(masked, np.where(real, vocab.MASK_ID, vocab.PAD_ID))
        np.testing.assert_array_equal(labels, ids)
        np.testing.assert_array_equal(weights, real.astype(np.float32))

    def test_last_item_only(self):
        ids = np.array([[0, 0, 5, 6, 7], [4, 5, 6, 7, 8], [0, 0, 0, 0, 9]], np.int32)
        layer = masking.ClozeMasking(NUM_ITEMS, mask_prob=0.5, last_item_only_prob=1.0, seed=0)
        masked, labels, weights = (np.asarray(t) for t in layer(ids))
        expected_w = np.zeros_like(ids, np.float32)
        expected_w[:, -1] = 1
        np.testing.assert_array_equal(weights, expected_w)
        np.testing.assert_array_equal(masked[:, -1], [vocab.MASK_ID] * 3)
        np.testing.assert_array_equal(labels[:, -1], [7, 8, 9])
        np.testing.assert_array_equal(masked[:, :-1], ids[:, :-1])

    def test_last_item_share(self):
        ids = _batch(num_rows=10_000, length=20)
        layer = masking.ClozeMasking(NUM_ITEMS, mask_prob=0.0, last_item_only_prob=0.25, seed=5)
        _, _, weights = layer(ids)
        weights = np.asarray(weights)
        # mask_prob=0: every row has one chosen item; in a quarter of rows it is the last.
        last_share = (weights[:, -1] == 1).mean()
        lengths = (ids != 0).sum(axis=1)
        by_chance = np.mean(1.0 / lengths)  # the forced pick lands on the last item anyway
        self.assertAllClose(last_share, 0.25 + 0.75 * by_chance, atol=0.015)

    def test_fresh_each_call_and_reproducible_under_seed(self):
        ids = _batch(num_rows=64, length=30)
        a = masking.ClozeMasking(NUM_ITEMS, 0.2, seed=11)
        first, second = a(ids)[2], a(ids)[2]
        self.assertFalse(np.array_equal(first, second))
        b = masking.ClozeMasking(NUM_ITEMS, 0.2, seed=11)
        np.testing.assert_array_equal(b(ids)[2], first)
        np.testing.assert_array_equal(b(ids)[2], second)

    @pytest.mark.skipif(not ON_TENSORFLOW, reason="tf.data maps run the TensorFlow backend's ops")
    def test_tf_data_map_equals_direct_call(self):
        ids = _batch(num_rows=96, length=16)
        self.run_preprocessing_layer_test(
            lambda: masking.ClozeMasking(NUM_ITEMS, 0.25, seed=2), ids, batch_size=32
        )

    @pytest.mark.skipif(not ON_TENSORFLOW, reason="a tf.function; the JAX step is the next test")
    def test_runs_inside_compiled_step(self):
        layer = masking.ClozeMasking(NUM_ITEMS, 0.2, seed=4)
        ids = _batch(num_rows=256, length=20)

        @tf.function(jit_compile=True)
        def step(x):
            masked, labels, weights = layer(x)
            return weights, tf.reduce_sum(tf.cast(masked == vocab.MASK_ID, tf.float32))

        weights, mask_tokens = step(tf.constant(ids))
        chosen = float(tf.reduce_sum(weights))
        self.assertGreater(chosen, 0)
        self.assertLess(float(mask_tokens), chosen + 1)
        # A second compiled call draws other masks (the seed state lives in a variable):
        # 256 x 20 positions at rate 0.2 never repeat by chance.
        again, _ = step(tf.constant(ids))
        self.assertGreater(float(tf.reduce_sum(again)), 0)
        self.assertFalse(np.array_equal(np.asarray(weights), np.asarray(again)))

    @pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX backend's compiled step")
    def test_runs_inside_a_jitted_stateless_step(self):
        # As Keras's JAX trainer runs a layer: jitted, the seed state passed in and out.
        import jax  # only installed where the JAX backend runs (the latest stack)

        layer = masking.ClozeMasking(NUM_ITEMS, 0.2, seed=4)
        ids = _batch(num_rows=256, length=20)
        state = layer.seed_generator.state

        @jax.jit
        def step(seed, x):
            with keras.StatelessScope(state_mapping=[(state, seed)]) as scope:
                masked, _, weights = layer(x)
            return weights, (masked == vocab.MASK_ID).sum(), scope.get_current_value(state)

        weights, mask_tokens, seed = step(state.value, ids)
        again, _, _ = step(seed, ids)
        chosen = float(np.sum(weights))
        self.assertGreater(chosen, 0)
        self.assertLess(float(mask_tokens), chosen + 1)
        self.assertFalse(np.array_equal(np.asarray(weights), np.asarray(again)))  # fresh masks each step

    def test_symbolic_call_and_serialization(self):
        layer = masking.ClozeMasking(NUM_ITEMS, 0.15, last_item_only_prob=0.1, seed=9)
        self.run_serialization_test(layer)
        inputs = keras.Input((None,), dtype="int32")
        masked, labels, weights = layer(inputs)
        self.assertEqual(masked.dtype, "int32")
        self.assertEqual(weights.dtype, "float32")
        self.assertEqual(layer.mask_token_id, vocab.MASK_ID)

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="mask_prob"):
            masking.ClozeMasking(10, mask_prob=1.5)
        with pytest.raises(ValueError, match="sum <= 1"):
            masking.ClozeMasking(10, mask_token_rate=0.9, random_token_rate=0.2)
        with pytest.raises(ValueError, match="inside the item id range"):
            masking.ClozeMasking(10, mask_token_id=5)
        with pytest.raises(ValueError, match="shape"):
            masking.ClozeMasking(10)(np.array([1, 2, 3]))
