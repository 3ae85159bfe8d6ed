"""Readers and splits on hostile input: a clear error naming file and line, or the right answer."""

import numpy as np
import pytest

from tfseqrec.data import readers, splits


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e400"])
def test_non_finite_timestamps_are_refused_with_the_line(tmp_path, value):
    path = _write(tmp_path, "log.csv", f"user_id,item_id,timestamp\nu,a,1\nu,b,{value}\n")
    with pytest.raises(
        readers.DataError, match=r"log.csv:3: column 'timestamp': timestamp .* is not a finite number"
    ):
        readers.read_interactions(path)


def test_naive_iso_dates_are_utc_whatever_the_time_zone(tmp_path, monkeypatch):
    import time

    path = _write(
        tmp_path, "log.csv", "user_id,item_id,timestamp\nu,a,2020-01-01T00:00:00\nu,b,2020-01-01 01:00\n"
    )
    seen = []
    for zone in ("UTC", "America/New_York", "Asia/Kolkata"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        seen.append(readers.read_interactions(path).timestamps.tolist())
    monkeypatch.delenv("TZ")
    time.tzset()
    assert seen == [[1577836800, 1577840400]] * 3  # 2020-01-01T00:00Z, hand-computed


def test_one_timestamp_parser_for_readers_and_tfx():
    assert readers.parse_timestamp("2020-01-01T00:00:00") == 1577836800.0
    assert readers.parse_timestamp("2020-01-01T02:00:00+02:00") == 1577836800.0
    assert readers.parse_timestamp(" 12.5 ") == 12.5
    with pytest.raises(ValueError, match="not a finite number"):
        readers.parse_timestamp("nan")
    with pytest.raises(ValueError, match="cannot parse timestamp 'yesterday'"):
        readers.parse_timestamp("yesterday")


def test_utf8_bom_in_the_header(tmp_path):
    path = _write(tmp_path, "log.csv", b"\xef\xbb\xbfuser_id,item_id,timestamp\nu,a,1\nu,b,2\n")
    events = readers.read_interactions(path)
    assert events.items.tolist() == ["a", "b"]


def test_bare_carriage_returns_end_lines(tmp_path):
    path = _write(tmp_path, "log.csv", b"user_id,item_id,timestamp\ru,a,1\ru,b,2\r")
    assert readers.read_interactions(path).items.tolist() == ["a", "b"]


def test_quoted_newline_in_a_field(tmp_path):
    path = _write(tmp_path, "log.csv", 'user_id,item_id,timestamp\n"u\nv",a,1\nw,"b,c",2\n')
    events = readers.read_interactions(path)
    assert events.users.tolist() == ["u\nv", "w"] and events.items.tolist() == ["a", "b,c"]


def test_unterminated_quote_names_the_line(tmp_path):
    path = _write(tmp_path, "log.csv", 'user_id,item_id,timestamp\nu,a,1\nu,"b,2\n')
    with pytest.raises(readers.DataError, match=r"log.csv:3: "):
        readers.read_interactions(path)


def test_timestamps_beyond_int64_do_not_wrap(tmp_path):
    path = _write(tmp_path, "u.data", "1\t1\t5\t99999999999999999999\n")
    with pytest.raises(readers.DataError, match=r"u.data:1: timestamp .* out of the int64 range"):
        readers.read_interactions(path, format="movielens")
    path = _write(tmp_path, "log.csv", "user_id,item_id,timestamp\nu,a,1e3\nu,b,2e30\n")
    with pytest.raises(readers.DataError, match=r"log.csv:3: column 'timestamp': .* out of the int64 range"):
        readers.read_interactions(path)


def test_ids_beyond_int64_are_ids(tmp_path):
    big = "123456789012345678901234567890"
    path = _write(tmp_path, "log.csv", f"user_id,item_id,timestamp\nu,{big},1\nu,-1,2\nu,7,3\n")
    split, vocabulary, _ = splits.prepare(readers.read_interactions(path))
    assert big in vocabulary and "-1" in vocabulary and vocabulary.num_items == 3


def test_a_k_core_that_removes_everything_says_so(tmp_path):
    path = _write(tmp_path, "log.csv", "user_id,item_id,timestamp\nu,a,1\nu,b,2\nv,a,3\n")
    with pytest.raises(ValueError, match=r"removed all 3 interactions; lower the thresholds"):
        splits.prepare(readers.read_interactions(path), min_user_interactions=5, min_item_interactions=5)


@pytest.mark.parametrize("batch_size", [-3, 0, 2.5, True])
def test_evaluate_refuses_a_bad_batch_size(batch_size):
    from tfseqrec import evaluation

    cases = splits.Cases(splits.Sequences.from_list(["u"], [[3, 4]]), np.array([5]))
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        evaluation.evaluate(object(), cases, batch_size=batch_size)
