"""``tfseqrec.data.features``: item-attribute files read, checked and encoded (hand-computed cases)."""

import json

import numpy as np
import pytest

from tfseqrec.data import features
from tfseqrec.data.readers import DataError
from tfseqrec.data.vocab import ItemVocabulary

CSV = "item_id,genres,year,brand\n1,Action|Comedy,1995,a\n2,Drama,,b\n3,Comedy,1999,a\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_kinds_are_inferred_and_values_parsed(tmp_path):
    read = features.read_item_features(write(tmp_path, "f.csv", CSV))
    assert read.kinds == {"genres": "multi", "year": "numeric", "brand": "categorical"}
    assert read.rows["1"] == {"genres": ["Action", "Comedy"], "year": 1995.0, "brand": "a"}
    assert read.rows["2"]["year"] is None  # an empty field is missing


def test_tsv_and_json_lines_read_as_csv(tmp_path):
    tsv = features.read_item_features(write(tmp_path, "f.tsv", CSV.replace(",", "\t")))
    lines = [
        {"item_id": 1, "genres": ["Action", "Comedy"], "year": 1995, "brand": "a"},
        {"item_id": 2, "genres": ["Drama"], "brand": "b"},
        {"item_id": 3, "genres": ["Comedy"], "year": 1999, "brand": "a"},
    ]
    jsonl = features.read_item_features(write(tmp_path, "f.jsonl", "\n".join(map(json.dumps, lines))))
    csv_rows = features.read_item_features(write(tmp_path, "f.csv", CSV)).rows
    assert tsv.rows == csv_rows == jsonl.rows and jsonl.kinds["genres"] == "multi"


def test_encoding_against_a_vocabulary(tmp_path):
    read = features.read_item_features(write(tmp_path, "f.csv", CSV))
    vocabulary = ItemVocabulary(["3", "1", "4", "2"])  # ids 3, 4, 5, 6; item 4 has no row
    encoded = features.encode(read, vocabulary)
    # Values in sorted order from slot 3: Action 3, Comedy 4, Drama 5.
    assert encoded.values["genres"] == ["Action", "Comedy", "Drama"]
    assert encoded.spec["genres"] == {"kind": "multi", "values": 6, "width": 2}
    np.testing.assert_array_equal(
        encoded.tables["genres"], [[0, 0], [0, 0], [0, 0], [4, 0], [3, 4], [1, 0], [5, 0]]
    )
    np.testing.assert_array_equal(encoded.tables["brand"][3:, 0], [3, 3, 1, 4])
    # Year over the items that have one (1995, 1999): mean 1997, standard deviation 2.
    np.testing.assert_allclose(
        encoded.tables["year"], [[0, 0], [0, 0], [0, 0], [1, 0], [-1, 0], [0, 1], [0, 1]]
    )
    assert encoded.report["items_without_row"] == 1 and encoded.report["missing"]["year"] == 2


def test_a_value_the_model_never_saw_is_unknown(tmp_path):
    read = features.read_item_features(write(tmp_path, "f.csv", CSV + "9,Horror|Comedy,2001,c\n"))
    trained = features.encode(read, ItemVocabulary(["1", "2", "3"]))
    grown = features.encode(read, ItemVocabulary(["1", "2", "3", "9"]), values=trained.values)
    np.testing.assert_array_equal(grown.tables["genres"][6], [features.UNKNOWN_SLOT, 4])
    assert grown.tables["brand"][6, 0] == features.UNKNOWN_SLOT
    assert grown.report["unknown_values"] == {"genres": 1, "year": 0, "brand": 1}
    assert grown.tables["year"][6, 0] == pytest.approx((2001 - 1997) / 2)  # the trained scaling


@pytest.mark.parametrize(
    "text, message",
    [
        (CSV + "2,Comedy,,b\n", r"f.csv:5: item '2' has another row at line 3 that disagrees"),
        (CSV + "4,Drama,soon,b\n", r"f.csv:5: column 'year' holds numbers but item '4' has 'soon'"),
        ("item_id,kind,brand\n1,x,a\n2,x,b\n", r"column 'kind' has one value only \('x'\)"),
        ("item_id,brand\n1,a\n,b\n", r"f.csv:3: no item id"),
        ("item_id\n1\n", r"no attribute columns"),
        ("item_id,brand\n1,a,b\n", r"f.csv:2: 3 fields, the header has 2"),
    ],
)
def test_bad_files_are_refused_naming_the_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        features.read_item_features(write(tmp_path, "f.csv", text))


def test_a_file_of_another_catalogue_is_refused(tmp_path):
    read = features.read_item_features(write(tmp_path, "f.csv", CSV))
    with pytest.raises(DataError, match="none of the 3 items of the file"):
        features.encode(read, ItemVocabulary(["x", "y"]))
