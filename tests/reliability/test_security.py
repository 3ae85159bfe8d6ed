"""Model files are loaded safely: no code runs from a ``.keras`` file."""

import json

import keras
import pytest
from packaging import version

import tfseqrec
from tfseqrec import training


def test_keras_is_past_cve_2025_1550():
    # Keras < 3.9 could run code from a .keras file on load_model despite safe_mode.
    assert version.parse(keras.__version__) >= version.parse("3.9.0"), keras.__version__


def test_a_model_file_with_a_lambda_is_refused(tmp_path):
    inputs = keras.Input((2,))
    outputs = keras.layers.Lambda(lambda x: x * 2)(inputs)
    keras.Model(inputs, outputs).save(tmp_path / training.MODEL_FILE)
    (tmp_path / training.CONFIG_FILE).write_text(json.dumps({"config": {}}))
    with pytest.raises(ValueError, match="safe_mode"):
        tfseqrec.load(str(tmp_path))
