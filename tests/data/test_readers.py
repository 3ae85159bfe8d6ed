import gzip
import pickle

import numpy as np
import pytest

from tfseqrec.data import readers


def _write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def test_sasrec_format_keeps_line_order(tmp_path):
    path = _write(tmp_path / "toy.txt", "1 10\n1 11\n2 10\n\n1 12\n")
    data = readers.read_interactions(path)
    assert data.format == "sasrec" and not data.has_time
    assert data.users.tolist() == ["1", "1", "2", "1"]
    assert data.items.tolist() == ["10", "11", "10", "12"]
    assert data.timestamps.tolist() == [0, 1, 2, 3]


def test_sasrec_gzip(tmp_path):
    path = tmp_path / "seq.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("7 1\n7 2\n")
    data = readers.read_interactions(path, format="sasrec")
    assert data.items.tolist() == ["1", "2"]


def test_movielens_tab_and_double_colon(tmp_path):
    tab = readers.read_interactions(
        _write(tmp_path / "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n")
    )
    assert tab.format == "movielens" and tab.has_time
    assert tab.timestamps.tolist() == [881250949, 891717742]
    colon = readers.read_interactions(_write(tmp_path / "ratings.dat", "1::1193::5::978300760\n"))
    assert (colon.users[0], colon.items[0], colon.timestamps[0]) == ("1", "1193", 978300760)


def test_movielens_bad_timestamp_names_line(tmp_path):
    path = _write(tmp_path / "u.data", "1\t2\t3\t100\n1\t3\t3\tsoon\n")
    with pytest.raises(readers.DataError, match=r"u\.data:2: timestamp 'soon' is not an integer"):
        readers.read_interactions(path)


def test_csv_named_columns_and_iso_dates(tmp_path):
    path = _write(
        tmp_path / "log.csv",
        "who,what,when,extra\nu1,i1,2024-01-02T00:00:00Z,x\nu1,i2,2024-01-01T00:00:00Z,y\n",
    )
    data = readers.read_interactions(path, user_col="who", item_col="what", time_col="when")
    assert data.has_time
    assert data.timestamps[0] > data.timestamps[1]


def test_tsv_without_time_column(tmp_path):
    path = _write(tmp_path / "log.tsv", "user_id\titem_id\nu\ta\nu\tb\n")
    data = readers.read_interactions(path, time_col=None)
    assert data.format == "tsv" and not data.has_time
    assert data.timestamps.tolist() == [0, 1]


def test_csv_missing_column_names_it(tmp_path):
    path = _write(tmp_path / "log.csv", "user_id,item\nu,a\n")
    with pytest.raises(
        readers.DataError, match=r"log\.csv:1: missing column\(s\) \['item_id', 'timestamp'\]"
    ):
        readers.read_interactions(path)


def test_csv_unparsable_timestamp_names_column_and_line(tmp_path):
    path = _write(tmp_path / "log.csv", "user_id,item_id,timestamp\nu,a,5\nu,b,yesterday\n")
    with pytest.raises(readers.DataError, match=r"log\.csv:3: column 'timestamp': cannot parse"):
        readers.read_interactions(path)


def test_csv_wrong_field_count(tmp_path):
    path = _write(tmp_path / "log.csv", "user_id,item_id,timestamp\nu,a\n")
    with pytest.raises(readers.DataError, match=r"log\.csv:2: expected 3 fields"):
        readers.read_interactions(path)


def test_empty_file(tmp_path):
    for name in ("empty.txt", "empty.csv", "empty.inter.json"):
        with pytest.raises(readers.DataError, match="empty"):
            readers.read_interactions(_write(tmp_path / name, "\n"))


def test_wrong_encoding_names_line(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes("user_id,item_id,timestamp\nu,caf\u00e9,1\n".encode("latin-1"))
    with pytest.raises(readers.DataError, match=r"log\.csv:2: not valid utf-8.*latin-1"):
        readers.read_interactions(path)
    assert readers.read_interactions(path, encoding="latin-1").items.tolist() == ["caf\u00e9"]


def test_sasrec_wrong_field_count(tmp_path):
    path = _write(tmp_path / "toy.txt", "1 2\n1 2 3\n")
    with pytest.raises(readers.DataError, match=r"toy\.txt:2: expected 'user item'"):
        readers.read_interactions(path, format="sasrec")


def test_inter_json(tmp_path):
    path = _write(tmp_path / "x.inter.json", '{"0": [5, 3], "1": [3]}')
    data = readers.read_interactions(path)
    assert data.users.tolist() == ["0", "0", "1"]
    assert data.items.tolist() == ["5", "3", "3"]
    with pytest.raises(readers.DataError, match="invalid JSON"):
        readers.read_interactions(_write(tmp_path / "bad.inter.json", '{"0": [5, }'))


def test_directory_resolution(tmp_path):
    d = tmp_path / "shop"
    d.mkdir()
    _write(d / "shop.txt", "1 2\n")
    assert readers.resolve_interactions_path(d) == (str(d / "shop.txt"), "sasrec")
    (d / "shop.txt").unlink()
    with pytest.raises(readers.DataError, match="no interaction file found"):
        readers.resolve_interactions_path(d)


def test_item_text_from_shared_data(data_root):
    amazon = readers.read_item_text(data_root / "amazon-scientific-text" / "Scientific.item.json")
    assert len(amazon) == 4344
    assert list(amazon["0"]) == ["title", "description", "brand", "categories"]
    movies = readers.read_item_text(data_root / "ml-1m" / "movies.dat")
    assert len(movies) == 3883
    assert movies["1"] == {"title": "Toy Story (1995)", "genres": "Animation, Children's, Comedy"}
    ml100k = readers.read_item_text(data_root / "ml-100k" / "u.item")
    assert len(ml100k) == 1682
    assert ml100k["1"]["title"] == "Toy Story (1995)"
    assert ml100k["1"]["genres"] == "Animation, Children's, Comedy"


def test_id_map(data_root):
    mapping = readers.read_id_map(data_root / "ml-1m" / "sas_to_original_items.txt")
    assert len(mapping) == 3416
    assert len(set(mapping.values())) == 3416


def test_interactions_select():
    data = readers.Interactions(
        np.array(["a", "b"], dtype=object), np.array(["x", "y"], dtype=object), np.array([1, 2])
    )
    assert data.select(np.array([False, True])).items.tolist() == ["y"]


# The columnar fast path against the line-by-line reader (Python's csv module), on the
# same bytes: equal arrays, or the same DataError. ``fast`` says whether the fast path
# must take the file (True) or leave it to the line-by-line reader (False); None where
# that depends on the pyarrow version (10 refuses "+1" as a number, 26 reads it as 1).
_CSV_CASES = {
    "integers": (b"user_id,item_id,timestamp\n1,10,5\n2,11,3\n1,007,4\n1,7,4\n", {}, True),
    "iso dates": (b"user_id,item_id,timestamp\nu,a,2024-01-02T00:00:00Z\nu,b,2024-01-01 12:00\n", {}, True),
    "decimal and huge times": (
        b"user_id,item_id,timestamp\nu,a,1.5\nu,b,-2\nv,c,1234567890123456789\n",
        {},
        True,
    ),
    "extra columns, other names": (
        b"r,who,what,when\n5,u,a,3\n4,v,b,2\n",
        dict(user_col="who", item_col="what", time_col="when"),
        True,
    ),
    "byte-order mark, CRLF, bare CR, blank lines": (
        b"\xef\xbb\xbfuser_id,item_id,timestamp\r\nu,a,1\r\n\nu,b,2\rv,c,3",
        {},
        True,
    ),
    "no time column": (b"user_id,item_id\nu,a\nu,b\n", dict(time_col=None), True),
    "unicode ids": ("user_id,item_id,timestamp\nzoë,中文,1\nzoë,b c,2\n".encode(), {}, True),
    "tsv": (b"user_id\titem_id\ttimestamp\nu\ta,b\t1\n", dict(format="tsv"), True),
    "quoted field": (b'user_id,item_id,timestamp\nu,"a,b",1\nu,b,2\n', {}, False),
    "quote in an unused column": (b'user_id,item_id,timestamp,x\nu,a,1,"y\nz"\n', {}, False),
    "spaces around an id": (b"user_id,item_id,timestamp\nu, a ,1\n", {}, False),
    "no-break space": ("user_id,item_id,timestamp\nu,a\xa0,1\n".encode(), {}, False),
    "signed number": (b"user_id,item_id,timestamp\nu,a,+1\n", {}, None),
    "latin-1": ("user_id,item_id,timestamp\nzoë,a,1\n".encode("latin-1"), dict(encoding="latin-1"), False),
    "empty item": (b"user_id,item_id,timestamp\nu,a,1\nu,,2\n", {}, False),
    "field count": (b"user_id,item_id,timestamp\nu,a,1\nu,b\n", {}, False),
    "word in a number column": (b"user_id,item_id,timestamp\nu,a,1\nu,b,soon\n", {}, False),
    "non-finite time": (b"user_id,item_id,timestamp\nu,a,1\nu,b,inf\n", {}, False),
    "time beyond int64": (b"user_id,item_id,timestamp\nu,a,1\nu,b,1e26\n", {}, False),
    "tab in an item id": (b"user_id,item_id,timestamp\nu,a\tb,1\n", {}, False),
    "number in a date column": (b"user_id,item_id,timestamp\nu,a,2024-01-01\nu,b,5\n", {}, False),
}


@pytest.mark.parametrize("name", list(_CSV_CASES))
def test_columnar_csv_reads_as_the_line_reader(tmp_path, name):
    content, kwargs, fast = _CSV_CASES[name]
    path = tmp_path / ("log.tsv" if kwargs.get("format") == "tsv" else "log.csv")
    path.write_bytes(content)
    options = dict(user_col="user_id", item_col="item_id", time_col="timestamp", encoding="utf-8")
    options.update({k: v for k, v in kwargs.items() if k != "format"})
    delimiter = "\t" if kwargs.get("format") == "tsv" else ","
    columnar = readers._read_csv_columnar(
        str(path),
        delimiter,
        options["user_col"],
        options["item_col"],
        options["time_col"],
        options["encoding"],
    )
    if fast is not None:
        assert (columnar is not None) == fast
    try:
        expected = readers._read_csv(
            str(path),
            delimiter,
            options["user_col"],
            options["item_col"],
            options["time_col"],
            options["encoding"],
            False,
        )
    except readers.DataError as e:
        with pytest.raises(readers.DataError) as raised:
            readers.read_interactions(path, **kwargs)
        assert str(raised.value) == str(e)
        return
    data = readers.read_interactions(path, **kwargs)
    assert data.users.tolist() == expected[0] and data.items.tolist() == expected[1]
    assert data.timestamps.dtype == expected[2].dtype and data.timestamps.tolist() == expected[2].tolist()
    assert data.has_time == expected[3]


def test_columnar_csv_reads_gzip(tmp_path):
    path = tmp_path / "log.csv.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"user_id,item_id,timestamp\nu,a,2\nu,b,1\n")
    assert readers._read_csv_columnar(str(path), ",", "user_id", "item_id", "timestamp", "utf-8") is not None
    data = readers.read_interactions(path)
    assert data.items.tolist() == ["a", "b"] and data.timestamps.tolist() == [2, 1]


def test_a_data_error_crosses_processes_whole():
    # Beam and Dask workers pickle a task's error back to the launching process.
    error = pickle.loads(
        pickle.dumps(readers.DataError("log.csv", 3, "timestamp 'nan' is not a finite number"))
    )
    assert type(error) is readers.DataError and (error.path, error.line) == ("log.csv", 3)
    assert str(error) == "log.csv:3: timestamp 'nan' is not a finite number"
