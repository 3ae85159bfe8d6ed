"""Shared test helpers, after keras-hub's ``tests/test_case.py``."""

import keras
import numpy as np
import tensorflow as tf


class TestCase(tf.test.TestCase):
    """``tf.test.TestCase`` plus round trips every public layer must pass."""

    # tf.test.TestCase.test_session is a deprecated helper that pytest would collect
    # and report as a skipped test.
    test_session = None

    def setUp(self):
        super().setUp()
        keras.utils.set_random_seed(1337)

    def run_serialization_test(self, layer):
        """get_config -> from_config and keras.saving (de)serialize give equal configs."""
        config = layer.get_config()
        clone = layer.__class__.from_config(config)
        self.assertEqual(config, clone.get_config())
        revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        self.assertIsInstance(revived, layer.__class__)
        self.assertEqual(config, revived.get_config())
        return clone

    def run_preprocessing_layer_test(self, make_layer, inputs, batch_size=None):
        """Direct calls equal the same layer mapped over a ``tf.data`` pipeline.

        ``make_layer`` builds a fresh, seeded layer: both paths start from the same
        random state and draw per batch in the same order.
        """
        batch_size = batch_size or len(inputs)
        direct_layer = make_layer()
        direct = [direct_layer(inputs[i : i + batch_size]) for i in range(0, len(inputs), batch_size)]
        mapped_layer = make_layer()
        ds = tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size).map(mapped_layer)
        for expected, got in zip(direct, ds):
            tf.nest.map_structure(lambda a, b: self.assertAllEqual(a, b), expected, got)
        return direct

    def assertAllInRange(self, values, low, high):  # noqa: N802 (unittest style)
        values = np.asarray(values)
        self.assertTrue(np.all((values >= low) & (values <= high)), f"values outside [{low}, {high}]")
