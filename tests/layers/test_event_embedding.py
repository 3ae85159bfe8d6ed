"""``EventEmbedding`` against a NumPy oracle, and its config round trip."""

import keras
import numpy as np
import pytest

from tfseqrec.layers import EventEmbedding


def test_vectors_are_the_sum_of_each_columns_row_and_zero_where_padded_or_left_out():
    layer = EventEmbedding({"type": 5, "device": 4}, 3)
    inputs = {"event_type": np.array([[0, 3, 4]]), "event_device": np.array([[0, 2, 3]])}
    keep = np.array([[True, True, False]])
    out = np.asarray(layer(inputs, keep=keep))
    tables = {name: np.asarray(layer.tables[name].embeddings) for name in ("type", "device")}
    expected = np.zeros((1, 3, 3))
    for column in (0, 1, 2):
        if keep[0, column]:
            for name in ("type", "device"):
                slot = inputs[f"event_{name}"][0, column]
                if slot:
                    expected[0, column] += tables[name][slot]
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match=r"inputs \['event_device'\] are missing"):
        layer({"event_type": inputs["event_type"]})


def test_config_round_trips():
    layer = EventEmbedding({"type": 5}, 3, name="context")
    copy = EventEmbedding.from_config(layer.get_config())
    assert copy.features == {"type": 5} and copy.output_dim == 3
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert restored.get_config() == layer.get_config()
    with pytest.raises(ValueError, match="at least one column"):
        EventEmbedding({}, 3)
