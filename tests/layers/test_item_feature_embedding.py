"""``ItemFeatureEmbedding`` against a NumPy oracle, and its config and weights round trip."""

import keras
import numpy as np
import pytest

from tfseqrec.layers import ItemFeatureEmbedding

FEATURES = {"genre": {"kind": "multi", "values": 6, "width": 2}, "year": {"kind": "numeric"}}
TABLES = {
    "genre": np.array([[0, 0], [1, 0], [3, 4], [5, 0], [4, 3]], np.int32),
    "year": np.array([[0, 0], [0, 1], [0.5, 0], [-1, 0], [2, 0]], np.float32),
}


def oracle(layer, ids):
    """Each id's vector by hand: the mean of its genres' rows (slot 0 pads) plus the year's projection."""
    genre = np.asarray(layer.tables[0].embeddings)
    kernel, bias = (np.asarray(w) for w in layer.tables[1].weights)
    out = []
    for i in ids:
        slots = [s for s in TABLES["genre"][i] if s != 0]
        mean = genre[slots].mean(axis=0) if slots else np.zeros(genre.shape[1])
        out.append(mean + TABLES["year"][i] @ kernel + bias)
    return np.array(out)


def test_vectors_are_the_mean_of_values_plus_the_numeric_projection():
    layer = ItemFeatureEmbedding(5, FEATURES, 4)
    layer.set_tables(TABLES)
    ids = np.array([2, 3, 4, 1])
    np.testing.assert_allclose(np.asarray(layer(ids)), oracle(layer, ids), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(layer.table()), oracle(layer, range(5)), rtol=1e-5, atol=1e-6)


def test_reserved_rows_get_vectors_of_their_own():
    layer = ItemFeatureEmbedding(5, FEATURES, 4, reserved_rows=2)
    layer.set_tables(TABLES)
    out = np.asarray(layer(np.array([0, 1])))
    np.testing.assert_allclose(out, np.asarray(layer.reserved.embeddings))
    np.testing.assert_allclose(np.asarray(layer(np.array([3]))), oracle(layer, [3]), rtol=1e-5, atol=1e-6)


def test_config_and_values_round_trip_through_a_saved_model(tmp_path):
    layer = ItemFeatureEmbedding(5, FEATURES, 4, name="features")
    layer.set_tables(TABLES)
    ids = keras.Input((3,), dtype="int32")
    model = keras.Model(ids, layer(ids))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = np.array([[1, 2, 4]])
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)))
    np.testing.assert_array_equal(np.asarray(loaded.get_layer("features").slots[0]), TABLES["genre"])


def test_bad_tables_and_kinds_are_refused():
    layer = ItemFeatureEmbedding(5, FEATURES, 4)
    with pytest.raises(ValueError, match=r"no values given for the attributes \['year'\]"):
        layer.set_tables({"genre": TABLES["genre"]})
    with pytest.raises(ValueError, match="attribute 'genre': values of shape"):
        layer.set_tables({**TABLES, "genre": TABLES["genre"][:3]})
    with pytest.raises(ValueError, match="kind of attribute 'x'"):
        ItemFeatureEmbedding(5, {"x": {"kind": "text"}}, 4)
