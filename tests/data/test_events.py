"""Event context in the data: read from the log, encoded by the training events' values, carried
through splits and windows aligned with the item ids."""

import numpy as np
import pytest

from tfseqrec.data import events, numpy_pipeline, readers, splits

# user, item, time, type: "cart" only after 2020-01-05 (the test period of the temporal split).
LOG = """user_id,item_id,timestamp,type,device
u1,a,2020-01-01,view,phone
u1,b,2020-01-02,buy,
u1,c,2020-01-03,view,laptop
u1,d,2020-01-06,cart,phone
u2,b,2020-01-01,view,phone
u2,c,2020-01-02,view,phone
u2,a,2020-01-03,buy,laptop
u2,d,2020-01-07,view,phone
"""


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(LOG)
    return path


@pytest.mark.parametrize("quoted", [False, True])  # the columnar reader, and the line reader
def test_event_columns_are_read_as_text(log, quoted):
    if quoted:
        log.write_text(LOG.replace("u1,a,", '"u1",a,'))
    read = readers.read_interactions(log, event_columns=["type", "device"])
    assert read.events["type"].tolist() == ["view", "buy", "view", "cart", "view", "view", "buy", "view"]
    assert read.events["device"].tolist()[:3] == ["phone", "", "laptop"]
    assert readers.read_interactions(log).events is None


def test_a_missing_event_column_is_refused_naming_the_file_and_header(log, tmp_path):
    with pytest.raises(readers.DataError, match=r"log.csv:1: missing event column\(s\) \['channel'\]"):
        readers.read_interactions(log, event_columns=["channel"])
    movielens = tmp_path / "u.data"
    movielens.write_text("1\t10\t5\t100\n1\t11\t3\t200\n")
    assert readers.read_interactions(movielens, event_columns=["rating"]).events["rating"].tolist() == [
        "5",
        "3",
    ]
    with pytest.raises(readers.DataError, match="user, item, rating, timestamp"):
        readers.read_interactions(movielens, event_columns=["device"])
    sasrec = tmp_path / "log.txt"
    sasrec.write_text("1 10\n1 11\n")
    with pytest.raises(readers.DataError, match="no columns besides user and item"):
        readers.read_interactions(sasrec, format="sasrec", event_columns=["type"])


def test_the_vocabulary_counts_values_and_reserves_slots():
    vocabulary = events.EventVocabulary.from_values(
        {"type": np.array(["b", "a", "b", "", "c", "a", "b"], object)}
    )
    assert vocabulary.values == {"type": ["b", "a", "c"]}  # by count, ties by value
    assert vocabulary.sizes == {"type": 6}  # padding, missing, unknown, then the values
    encoded = vocabulary.encode({"type": np.array([["a", "zz"], ["", "b"]], object)})["type"]
    assert encoded.tolist() == [[4, 2], [1, 3]]
    with pytest.raises(ValueError, match="1 distinct value"):
        events.EventVocabulary.from_values({"type": np.array(["view", "view", ""], object)})
    with pytest.raises(ValueError, match="not identifiers"):
        events.check_names("type,two words")


def test_a_split_keeps_the_training_values_only(log):
    read = readers.read_interactions(log, event_columns=["type"])
    split, _, report = splits.prepare(read, split="temporal", test_start=1578182400)  # 2020-01-05
    # "cart" occurs only in the test period: unknown to the model, not a slot of its own.
    assert split.event_vocabulary.values == {"type": ["view", "buy"]}
    assert report["event_features"] == {"type": 2}
    view, buy = 3, 4
    # Each user's last event before the test period validates; the ones before it train.
    assert split.train.events["type"].tolist() == [view, buy, view, view]
    assert split.test.histories.events["type"].tolist() == [view, buy, view, view, view, buy]
    # A value seen in validation or test events only reads as unknown.
    loo, _, _ = splits.prepare(read)
    assert loo.event_vocabulary.values == {"type": ["view", "buy"]}
    shifted = readers.read_interactions(log, event_columns=["type"])
    shifted.events["type"][2] = "cart"  # u1's validation item, only there
    loo, _, _ = splits.prepare(shifted)
    assert loo.test.histories.events["type"].tolist() == [view, buy, 2, view, view, buy]


def test_windows_carry_the_context_of_their_items():
    seqs = splits.Sequences.from_list(["u", "v"], [[3, 4, 5], [6, 7]], events={"type": [[3, 4, 5], [6, 7]]})
    x, y, _ = numpy_pipeline.causal_windows(seqs, 3, events=["type"])
    assert x["item_ids"].tolist() == [[0, 3, 4], [0, 0, 6]]
    assert x["event_type"].tolist() == [[0, 3, 4], [0, 0, 6]]  # the inputs' context, never the targets'
    cloze = numpy_pipeline.cloze_windows(seqs, 2, events=["type"])
    assert cloze["event_type"].tolist() == cloze["item_ids"].tolist() == [[4, 5], [6, 7]]
    assert numpy_pipeline.pad_left_events(seqs, 4, ["type"])["event_type"].tolist() == [
        [0, 3, 4, 5],
        [0, 0, 6, 7],
    ]
    with pytest.raises(ValueError, match=r"reads event features \['device'\]"):
        numpy_pipeline.causal_windows(seqs, 3, events=["device"])
    # Every selection keeps ids and context together.
    picked = seqs.select([1]).drop_last(1)
    assert picked.values.tolist() == picked.events["type"].tolist() == [6]
