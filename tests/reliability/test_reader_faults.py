"""Issue 39's reader faults, on real files through the real readers: each is refused with
the file, the line and what was wrong, or read right.

Expected times are hand-computed: 2020-01-01T00:00:00Z is 1577836800 (18262 days of
86400 s after 1970-01-01); 2000-01-01T00:00:00Z is 946684800.
"""

import gzip
import json
import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf

from tfseqrec import cli
from tfseqrec.data import readers, splits, tfrecord

REPO = pathlib.Path(__file__).resolve().parents[2]


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _csv(rows, header="user_id,item_id,timestamp"):
    return header + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows)


# --- timestamps beyond int64 -------------------------------------------------------

BEYOND_INT64 = ["-1e30", "1e26", "100000000000000000000000000", "9223372036854775808", "-9223372036854775809"]


@pytest.mark.parametrize("value", BEYOND_INT64)
@pytest.mark.parametrize("name", ["log.csv", "log.tsv"])
def test_csv_times_beyond_int64_are_refused_with_file_and_line(tmp_path, value, name):
    sep = "\t" if name.endswith(".tsv") else ","
    rows = [("u", "a", 1), ("u", "b", 2), ("v", "a", value), ("v", "b", 4)]
    path = _write(
        tmp_path / name,
        "".join(sep.join(map(str, r)) + "\n" for r in [("user_id", "item_id", "timestamp"), *rows]),
    )
    with pytest.raises(readers.DataError, match=rf"{name}:4: column 'timestamp': .*out of the int64 range"):
        readers.read_interactions(path)


@pytest.mark.parametrize(
    "value", ["100000000000000000000000000", "9223372036854775808", "-9223372036854775809"]
)
def test_movielens_times_beyond_int64_are_refused(tmp_path, value):
    path = _write(tmp_path / "u.data", f"1\t2\t5\t100\n1\t3\t5\t{value}\n")
    with pytest.raises(readers.DataError, match=r"u\.data:2: timestamp .* out of the int64 range"):
        readers.read_interactions(path)


def test_times_at_the_int64_edge_reach_the_tfrecord_exactly(tmp_path):
    top, bottom = 2**63 - 1, -(2**63)
    path = _write(tmp_path / "u.data", f"1\t2\t5\t{bottom}\n1\t3\t5\t0\n1\t4\t5\t{top}\n")
    events = readers.read_interactions(path)
    assert events.timestamps.tolist() == [bottom, 0, top]
    example = tfrecord.make_example("1", [3, 4, 5], ["2", "3", "4"], timestamps=events.timestamps)
    parsed = tf.io.parse_single_example(example.SerializeToString(), tfrecord.FEATURE_SPEC)
    assert parsed["timestamps"].numpy().tolist() == [bottom, 0, top]


@pytest.mark.parametrize("bad", [1e30, -1e26, float("nan"), float("inf")])
def test_the_tfrecord_writer_never_wraps_a_time(bad):
    with pytest.raises(ValueError, match="not a finite number of seconds within int64"):
        tfrecord.make_example("u", [3, 4], ["a", "b"], timestamps=np.array([1.0, bad]))


def test_data_stats_refuses_a_time_beyond_int64_in_one_line(tmp_path, capsys):
    path = _write(tmp_path / "log.csv", _csv([("u", "a", 1), ("u", "b", "1e26"), ("u", "c", 3)]))
    assert cli.main(["data", "stats", str(path)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "log.csv:3: column 'timestamp'" in err, err
    assert "out of the int64 range" in err


# --- ids given as numbers ----------------------------------------------------------


@pytest.mark.parametrize("item", ["2.0", "1e30", "true", "1e400"])
def test_inter_json_items_that_are_not_strings_or_integers_are_refused(tmp_path, item):
    path = _write(tmp_path / "x.inter.json", '{"a": [1, ITEM, 3]}'.replace("ITEM", item))
    with pytest.raises(readers.DataError, match=r"x\.inter\.json: user 'a', position 1: bad item"):
        readers.read_interactions(path)


def test_huge_integer_ids_stay_exact_strings(tmp_path):
    big = 123456789012345678901234567890
    events = readers.read_interactions(_write(tmp_path / "x.inter.json", json.dumps({"a": [big, 7]})))
    assert events.items.tolist() == [str(big), "7"]
    events = readers.read_interactions(_write(tmp_path / "log.txt", f"{big} {big}\n{big} 1\n"))
    assert events.users.tolist() == [str(big)] * 2 and events.items.tolist() == [str(big), "1"]


# --- a header in a headerless format ------------------------------------------------


@pytest.mark.parametrize(
    "header", ["user item", "user_id item_id", "UserId MovieId", "uid iid", "session item"]
)
def test_a_header_line_in_a_sasrec_file_is_refused(tmp_path, header):
    path = _write(tmp_path / "shop.txt", f"{header}\n1 10\n1 11\n2 10\n")
    with pytest.raises(readers.DataError, match=r"shop\.txt:1: the first line .* looks like a header"):
        readers.read_interactions(path)


def test_a_word_over_integer_ids_is_a_header_too(tmp_path):
    with gzip.open(tmp_path / "shop.txt.gz", "wt") as f:
        f.write("customer article\n1 10\n1 11\n2 10\n")
    with pytest.raises(
        readers.DataError, match=r"shop\.txt\.gz:1: .*looks like a header.*sasrec format has none"
    ):
        readers.read_interactions(tmp_path / "shop.txt.gz")


def test_a_movielens_header_is_refused(tmp_path):
    path = _write(tmp_path / "u.data", "user_id\titem_id\trating\ttimestamp\n1\t2\t5\t100\n")
    with pytest.raises(
        readers.DataError, match=r"u\.data:1: .*looks like a header.*movielens format has none"
    ):
        readers.read_interactions(path)


def test_word_ids_are_not_mistaken_for_a_header(tmp_path):
    path = _write(tmp_path / "shop.txt", "alice apple\nalice pear\nbob apple\n")
    assert readers.read_interactions(path).users.tolist() == ["alice", "alice", "bob"]
    path = _write(tmp_path / "mixed.txt", "alice 10\nalice 11\n2 10\n")
    assert readers.read_interactions(path).items.tolist() == ["10", "11", "10"]


# --- a directory with several interaction files --------------------------------------


def test_a_directory_with_two_interaction_files_is_refused_naming_both(tmp_path):
    d = tmp_path / "ml-1m"
    d.mkdir()
    _write(d / "ml-1m.txt", "1 10\n1 11\n")
    _write(d / "ratings.dat", "1::10::5::100\n1::11::5::200\n")
    _write(d / "movies.dat", "10::Heat (1995)::Action\n")  # item text, not an interaction file
    with pytest.raises(readers.DataError) as error:
        readers.read_interactions(d)
    message = str(error.value)
    assert "ratings.dat" in message and "ml-1m.txt" in message and "none is read" in message
    assert re.search(r"give the path of the one to read \(e\.g\. .*ratings\.dat\)", message)
    (d / "ratings.dat").unlink()
    assert readers.read_interactions(d).path == str(d / "ml-1m.txt")


def test_train_refuses_a_directory_with_two_interaction_files(tmp_path, capsys):
    d = tmp_path / "shop"
    d.mkdir()
    _write(d / "a.csv", _csv([("u", "x", 1), ("u", "y", 2), ("u", "z", 3)]))
    _write(d / "b.csv", _csv([("v", "x", 1), ("v", "y", 2), ("v", "z", 3)]))
    assert cli.main(["train", "--data", str(d), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "'a.csv', 'b.csv'" in err and "none is read" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


# --- exact duplicate events ----------------------------------------------------------


def test_exact_duplicate_events_are_counted_and_kept_once(tmp_path):
    rows = [
        ("u", "a", 1),
        ("u", "b", 2),
        ("u", "c", 3),
        ("u", "d", 4),
        ("v", "a", 1),
        ("v", "c", 5),
        ("v", "d", 6),
    ]
    once = readers.read_interactions(_write(tmp_path / "once.csv", _csv(rows)))
    twice = readers.read_interactions(_write(tmp_path / "twice.csv", _csv(rows + rows)))
    split_once, vocab_once, report_once = splits.prepare(once)
    split_twice, vocab_twice, report_twice = splits.prepare(twice)
    assert report_once["removed_duplicates"] == 0 and report_twice["removed_duplicates"] == len(rows)
    assert report_twice["num_interactions"] == len(rows)
    assert vocab_twice.items == vocab_once.items
    assert [s.tolist() for s in split_twice.train.to_list()] == [
        s.tolist() for s in split_once.train.to_list()
    ]
    assert split_twice.test.targets.tolist() == split_once.test.targets.tolist()
    # Same user and item at another time is no duplicate: a re-watch stays.
    again = readers.read_interactions(_write(tmp_path / "again.csv", _csv(rows + [("u", "a", 9)])))
    assert splits.prepare(again)[2]["removed_duplicates"] == 0


def test_duplicates_among_ties_match_a_set_oracle(tmp_path):
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{i}", t) for u, i, t in rng.integers(0, [4, 5, 3], size=(200, 3)).tolist()]
    events = readers.read_interactions(_write(tmp_path / "log.csv", _csv(rows)))
    kept, report = splits.drop_duplicates(splits.sort_by_time(events))
    seen, first = set(), []
    for row in rows:  # the oracle: each (user, item, time) once, the first in file order
        if row not in seen:
            seen.add(row)
            first.append(row)
    assert report["removed_duplicates"] == len(rows) - len(first)
    got = list(zip(kept.users.tolist(), kept.items.tolist(), kept.timestamps.tolist()))
    assert sorted(got) == sorted(first) and len(got) == len(set(got))
    # Within a user and a time, the kept events keep their file order.
    by_key = {}
    for user, item, time in first:
        by_key.setdefault((user, time), []).append(item)
    for (user, time), items in by_key.items():
        assert [i for u, i, t in got if (u, t) == (user, time)] == items


def test_data_stats_reports_duplicates(tmp_path, capsys):
    rows = [("u", "a", 1), ("u", "b", 2), ("u", "c", 3)]
    path = _write(tmp_path / "log.csv", _csv(rows * 2))
    assert cli.main(["data", "stats", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["removed"]["removed_duplicates"] == 3 and out["num_interactions"] == 3


def test_repeats_without_times_are_kept(tmp_path):
    # Line order is the time here: the same item twice in a row is a repeat, not a duplicate.
    events = readers.read_interactions(_write(tmp_path / "shop.txt", "1 10\n1 10\n1 11\n1 11\n"))
    split, _, report = splits.prepare(events)
    assert report["removed_duplicates"] == 0 and report["num_interactions"] == 4


def test_the_benchmark_data_has_no_exact_duplicates(data_root):
    ml100k = splits.prepare(readers.read_interactions(data_root / "ml-100k" / "u.data"))[2]
    assert ml100k["removed_duplicates"] == 0 and ml100k["num_interactions"] == 100_000
    # ml-1m.txt has no times (no exact duplicate is possible) and no line twice either.
    lines = (data_root / "ml-1m" / "ml-1m.txt").read_text().splitlines()
    assert len(lines) == len(set(lines)) == 999_611


# --- truncated and corrupt gzip ------------------------------------------------------


def _truncated(path, text):
    data = gzip.compress(text.encode("utf-8"))
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize("name", ["log.txt.gz", "log.csv.gz", "log.tsv.gz"])
def test_a_truncated_gzip_is_one_clear_error(tmp_path, name):
    sep = {"txt": " ", "csv": ",", "tsv": "\t"}[name.split(".")[1]]
    header = "" if sep == " " else sep.join(["user_id", "item_id", "timestamp"]) + "\n"
    body = "".join(
        sep.join([str(i % 50), str(i % 97)] + ([] if sep == " " else [str(i)])) + "\n" for i in range(20_000)
    )
    path = _truncated(tmp_path / name, header + body)
    with pytest.raises(readers.DataError, match=rf"^{re.escape(str(path))}: truncated gzip file"):
        readers.read_interactions(path)


def test_a_file_that_is_not_gzip_is_one_clear_error(tmp_path):
    path = _write(tmp_path / "log.txt.gz", "1 2\n1 3\n")
    with pytest.raises(readers.DataError, match=r"log\.txt\.gz: corrupt gzip file"):
        readers.read_interactions(path, format="sasrec")


def test_data_stats_on_a_truncated_gzip_is_one_line(tmp_path, capsys):
    path = _truncated(tmp_path / "log.txt.gz", "".join(f"{i % 50} {i % 97}\n" for i in range(20_000)))
    assert cli.main(["data", "stats", str(path)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "log.txt.gz: truncated gzip file" in err, err


# --- a quoted newline in an id -------------------------------------------------------


def test_a_quoted_newline_in_an_item_id_names_file_and_line(tmp_path):
    path = _write(tmp_path / "log.csv", 'user_id,item_id,timestamp\nu,a,1\nu,"b\nc",2\nu,d,3\n')
    with pytest.raises(readers.DataError, match=r"log\.csv:3: 'item_id': item id 'b\\nc' holds a line break"):
        readers.read_interactions(path)


def test_a_tab_in_an_item_id_names_file_and_line(tmp_path):
    path = _write(tmp_path / "log.csv", "user_id,item_id,timestamp\nu,a,1\nu,b\tc,2\n")
    with pytest.raises(readers.DataError, match=r"log\.csv:3: 'item_id': item id 'b\\tc' holds a tab"):
        readers.read_interactions(path)
    path = _write(tmp_path / "x.inter.json", json.dumps({"u": ["a", "b\nc"]}))
    with pytest.raises(readers.DataError, match=r"x\.inter\.json: user 'u', position 1: .*line break"):
        readers.read_interactions(path)


def test_an_open_quote_names_the_line_it_opens_on(tmp_path):
    path = _write(tmp_path / "log.csv", 'user_id,item_id,timestamp\nu,a,1\nu,"b,2\nu,c,3\nu,d,4\n')
    with pytest.raises(readers.DataError, match=r"log\.csv:3: malformed CSV .*runs on to line 5"):
        readers.read_interactions(path)


# --- ISO 8601 on every Python ---------------------------------------------------------

ISO_TIMES = {
    "2020-01-01T00:00:02.5": 1577836802.5,  # one fraction digit: Python 3.10 refuses it
    "2020-01-01T00:00:00+0000": 1577836800,  # offset without a colon
    "2020-01-01T00:00:00Z": 1577836800,
    "2020-01-01T00:00:00z": 1577836800,
    "2020-01-01T05:30:00+05:30": 1577836800,
    "2019-12-31T19:00:00-0500": 1577836800,
    "2020-01-01T01:00:00+01": 1577836800,
    "2020-01-01 00:00": 1577836800,
    "2020-01-01T10": 1577836800 + 10 * 3600,
    "20200101T000002Z": 1577836802,  # basic format
    "2020-01-01T00:00:00,25Z": 1577836800.25,  # decimal comma
    "2020-01-01T00:00:00.123456789": 1577836800.123456789,  # more than 6 fraction digits
    "2020-W01-3": 1577836800,  # ISO week date: week 1 of 2020 began Monday 2019-12-30
    "2020-001": 1577836800,  # ordinal date
    "2000-02-29T12:00:00.5Z": 946684800 + 59 * 86400 + 12 * 3600 + 0.5,
    "1969-12-31T23:59:59Z": -1,
}


@pytest.mark.parametrize("text, seconds", ISO_TIMES.items(), ids=list(ISO_TIMES))
def test_iso_8601_times_parse_to_hand_computed_seconds(text, seconds):
    assert readers.parse_timestamp(text) == pytest.approx(seconds, abs=1e-6)


def test_iso_8601_times_in_a_file_read_alike_on_both_paths(tmp_path):
    texts = list(ISO_TIMES)
    header = "user_id\titem_id\ttimestamp\n"
    rows = "".join(f"u\ti{n}\t{text}\n" for n, text in enumerate(texts))
    read = readers.read_interactions(_write(tmp_path / "log.tsv", header + rows)).timestamps
    assert read.tolist() == pytest.approx([ISO_TIMES[t] for t in texts], abs=1e-6)
    # The line-by-line reader (a quote sends the file to it) reads the same.
    quoted = "".join(f'u\t"i{n}"\t{text}\n' for n, text in enumerate(texts))
    slow = readers.read_interactions(_write(tmp_path / "quoted.tsv", header + quoted)).timestamps
    assert slow.tolist() == read.tolist()


@pytest.mark.parametrize(
    "text",
    [
        "2020-02-30T00:00",
        "2020-01-01T25:00",
        "2021-366",
        "2020-01-01T00:60",
        "2020-W54-1",
        "2020-W00-1",
        "2020-W01-0",
        "2020-00-10",
        "2020-000",
        "9999-366",
        "2020-01-01X10:00",
    ],
)
def test_invalid_iso_8601_times_are_refused(text):
    with pytest.raises(ValueError, match=re.escape(f"cannot parse timestamp {text!r}")):
        readers.parse_timestamp(text)


def test_there_is_one_timestamp_parser():
    sources = [*(REPO / "tfseqrec").rglob("*.py"), *(REPO / "components").rglob("*.py")]
    parsers = [
        p for p in sources if re.search(r"fromisoformat\(|strptime\(|dateutil", p.read_text(encoding="utf-8"))
    ]
    assert parsers == []


def test_a_vocabulary_count_beyond_int64_names_the_line(tmp_path):
    from tfseqrec.data import vocab

    path = tmp_path / "item_vocab.tsv"
    path.write_text("a\t3\nb\t99999999999999999999\n")
    with pytest.raises(ValueError, match=r"item_vocab.tsv:2: count 99999999999999999999 is beyond int64"):
        vocab.ItemVocabulary.load(str(path))


def test_a_vocabulary_save_that_fails_leaves_the_previous_file(tmp_path, monkeypatch):
    import errno

    from tfseqrec.data import vocab

    path = tmp_path / "item_vocab.tsv"
    vocab.ItemVocabulary(["a", "b"], [2, 1]).save(str(path))
    before = path.read_bytes()

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(vocab.ItemVocabulary, "serialize", full)
    with pytest.raises(OSError, match="No space left"):
        vocab.ItemVocabulary(["c"], [5]).save(str(path))
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["item_vocab.tsv"]
