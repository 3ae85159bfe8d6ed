"""Shared test helpers, after keras-hub's ``tests/test_case.py``."""

import hashlib
import importlib.util
import json
import pathlib
import sys

import keras
import numpy as np
import tensorflow as tf

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def benchmark_script(name, relative=None):
    """``benchmarks/NAME.py`` (or ``relative`` under benchmarks/) imported as ``python benchmarks/NAME.py``
    runs it: its sibling scripts (``machine``, ``records``, ...) importable by name."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / (relative or f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The smallest Recformer the tests train: one layer over 48 tokens, one epoch of each stage.
TINY_RECFORMER = {
    "num_layers": 1,
    "max_tokens": 48,
    "max_sequence_length": 4,
    "attention_window": 16,
    "max_attribute_tokens": 6,
    "epochs": 1,
    "stage2_epochs": 1,
    "align_epochs": 1,
    "batch_size": 8,
    "validation_batch_size": 16,
}


def file_tree(path):
    """``{relative path: sha256}`` of every file under ``path`` (to show a folder left untouched)."""
    path = pathlib.Path(path)
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in path.rglob("*")
        if p.is_file()
    }


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

    def run_layer_test(
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        call_kwargs=None,
        expected_partial_output=None,
    ):
        """The checks every public layer passes (keras-hub's ``run_layer_test``).

        1. Config: ``get_config`` -> ``from_config`` and a JSON round trip.
        2. Symbolic call on ``keras.Input``s: the output shape (batch dimension free).
        3. Eager call: the output shape, finite values; ``expected_partial_output``
           (the first row's first values, pinned) when given.
        4. A compiled ``fit`` step of a functional model around the layer: finite loss,
           every trainable weight moves.
        5. Mixed precision (``mixed_bfloat16``): outputs in bfloat16, weights float32.

        Args:
            cls: the layer class; ``init_kwargs`` its arguments.
            input_data: an array or a dict of arrays (the first call argument).
            expected_output_shape: the eager output's shape.
            call_kwargs: arrays passed by keyword (for example ``padding_mask``).
            expected_partial_output: float values of ``output[0, ..., :n].ravel()[:n]``.
        """
        call_kwargs = call_kwargs or {}
        layer = cls(**init_kwargs)
        self.run_serialization_test(layer)
        revived = keras.saving.deserialize_keras_object(
            json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
        )
        self.assertEqual(layer.get_config(), revived.get_config())

        inputs, kw_inputs = _symbolic(input_data), {k: _symbolic(v, k) for k, v in call_kwargs.items()}
        outputs = cls(**init_kwargs)(inputs, **kw_inputs)
        self.assertEqual(tuple(outputs.shape), (None,) + tuple(expected_output_shape[1:]))

        output = layer(input_data, **call_kwargs)
        if expected_partial_output is not None:
            # Weights from NumPy, not the Keras initialisers: the pin then follows the
            # computation only, on every Keras version (their random streams differ).
            set_numpy_weights(layer)
            output = layer(input_data, **call_kwargs)
        self.last_output = np.asarray(output)
        self.assertEqual(tuple(output.shape), tuple(expected_output_shape))
        self.assertTrue(np.all(np.isfinite(np.asarray(output))))
        if expected_partial_output is not None:
            got = np.asarray(output)[0].ravel()[: len(expected_partial_output)]
            self.assertAllClose(got, expected_partial_output, atol=1e-4)

        self._run_fit_step(cls, init_kwargs, input_data, call_kwargs, expected_output_shape)
        mixed = cls(**init_kwargs, dtype="mixed_bfloat16")
        out = mixed(input_data, **call_kwargs)
        self.assertEqual(keras.backend.standardize_dtype(out.dtype), "bfloat16")
        for weight in mixed.weights:
            self.assertEqual(keras.backend.standardize_dtype(weight.dtype), "float32", weight.path)
        return layer

    def _run_fit_step(self, cls, init_kwargs, input_data, call_kwargs, expected_output_shape):
        inputs, kw_inputs = _symbolic(input_data), {k: _symbolic(v, k) for k, v in call_kwargs.items()}
        layer = cls(**init_kwargs)
        model = keras.Model([inputs, kw_inputs] if kw_inputs else inputs, layer(inputs, **kw_inputs))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=False)
        before = [np.array(w) for w in layer.trainable_weights]
        target = np.random.default_rng(0).normal(size=expected_output_shape).astype("float32")
        history = model.fit(
            [input_data, call_kwargs] if call_kwargs else input_data,
            target,
            epochs=1,
            batch_size=len(target),
            verbose=0,
        )
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        self.assertTrue(before, "the layer has no trainable weights")
        for old, weight in zip(before, layer.trainable_weights):
            self.assertFalse(np.array_equal(old, np.asarray(weight)), f"{weight.path} did not move")

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


def set_numpy_weights(model, seed=0, scale=0.2):
    """Assigns every weight of ``model`` a ``N(0, scale)`` draw of NumPy's generator ``seed``."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, scale, size=tuple(weight.shape)).astype(weight.dtype))


def _symbolic(value, name=None):
    """``keras.Input``s shaped like an array or a dict of arrays (named by their keys)."""
    if isinstance(value, dict):
        return {key: _symbolic(v, key) for key, v in value.items()}
    value = np.asarray(value)
    return keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name)


def train_text_model(model, data, output, config):
    """``(output, test metrics)`` of ``tfseqrec train --model MODEL`` on the tiny text dataset ``data``."""
    from tests.test_cli import _tfseqrec

    out = _tfseqrec(
        "train",
        "--model",
        model,
        "--data",
        data / "Tiny.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--output",
        output,
        "--config",
        json.dumps(config),
        "--quiet",
    )
    return output, json.loads(out.stdout.strip().splitlines()[-1])


def report_beside_export(model_dir, export_dir, data, output):
    """The models of ``tfseqrec report`` on a text model's run directory beside its export (a
    version's directory: other tests add versions to the base), on the tiny text dataset
    ``data`` (the summary's ``models``: label and metrics each)."""
    from tests.test_cli import _tfseqrec

    done = _tfseqrec(
        "report", "--model-dir", model_dir, "--model-dir", export_dir, "--data", data / "Tiny.inter.json",
        "--item-text", data / "Tiny.item.json", "--output", output, "--sample", "2",
    )  # fmt: skip
    return json.loads(done.stdout)["models"]
