import pytest
import tensorflow as tf

from tfseqrec.data import text

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "title", "brand", "red", "pen", "acme", "blue", "##s", "ink"]


def _tokenizer(max_attribute_tokens=4):
    return text.ItemTextTokenizer(
        VOCAB, attributes=["title", "brand"], max_attribute_tokens=max_attribute_tokens
    )


def test_key_value_tokens_with_budget_unknowns_and_empty_values():
    tokens, types = _tokenizer(max_attribute_tokens=2).tokenize(
        [["Blue pens ink", "ACME"], ["Red", ""], ["Café", "acme"]]
    )
    # "pens" -> pen ##s; the title budget of 2 keeps "blue pen".
    assert tokens.to_list() == [[3, 8, 6, 4, 7], [3, 5], [3, 1, 4, 7]]
    assert types.to_list() == [[1, 2, 2, 1, 2], [1, 2], [1, 2, 1, 2]]


def test_vocabulary_without_special_tokens_is_refused():
    with pytest.raises(ValueError, match=r"no '\[CLS\]' token"):
        text.ItemTextTokenizer(["[PAD]", "[UNK]", "title"], attributes=["title"])


def test_histories_are_newest_first_behind_cls_and_capped():
    # Three items of 2, 3 and 1 tokens, oldest first; a second user with one item.
    items = tf.ragged.constant([[[10, 11], [20, 21, 22], [30]], [[40, 41]]], dtype=tf.int64, ragged_rank=2)
    types = tf.ragged.map_flat_values(lambda t: tf.cast(t % 2 + 1, tf.int32), items)
    packed = text.pack_histories(items, types, cls_id=2, max_sequence_length=2, max_tokens=4)
    # max_sequence_length=2 drops the oldest item; max_tokens=4 cuts the last token of the older one kept.
    assert packed["token_ids"].numpy().tolist() == [[2, 30, 20, 21], [2, 40, 41, 0]]
    assert packed["item_position_ids"].numpy().tolist() == [[0, 1, 2, 2], [0, 1, 1, 0]]
    assert packed["token_type_ids"].numpy().tolist() == [[0, 1, 1, 2], [0, 1, 2, 0]]
    assert packed["padding_mask"].numpy().tolist() == [[True] * 4, [True, True, True, False]]


def test_per_attribute_budgets():
    tokenizer = text.ItemTextTokenizer(
        VOCAB, attributes=["title", "brand"], max_attribute_tokens=1, attribute_tokens={"title": 3}
    )
    tokens, _ = tokenizer.tokenize([["Blue pens ink", "ACME blue"]])
    assert tokens.to_list() == [[3, 8, 6, 9, 4, 7]]  # title keeps 3 pieces, brand its 1
    with pytest.raises(ValueError, match=r"names \['colour'\], which are not among the attributes"):
        text.ItemTextTokenizer(VOCAB, attributes=["title"], attribute_tokens={"colour": 2})


def test_pad_to_the_longest_input_rounds_up_and_changes_nothing_else():
    items = tf.ragged.constant([[[10, 11], [20, 21, 22]], [[40]]], dtype=tf.int64, ragged_rank=2)
    types = tf.ragged.map_flat_values(lambda t: tf.ones_like(t, tf.int32), items)
    fixed = text.pack_histories(items, types, 2, max_sequence_length=5, max_tokens=16)
    narrow = text.pack_histories(items, types, 2, max_sequence_length=5, max_tokens=16, pad_multiple=4)
    assert narrow["token_ids"].shape == (2, 8)  # longest input: [CLS] + 5 tokens = 6, rounded up to 8
    for key in fixed:
        assert fixed[key][:, :8].numpy().tolist() == narrow[key].numpy().tolist()
        assert not fixed[key][:, 8:].numpy().any()
    capped = text.pack_histories(items, types, 2, max_sequence_length=5, max_tokens=5, pad_multiple=4)
    assert capped["token_ids"].shape == (2, 5)  # never wider than max_tokens


def test_common_values_are_dropped_and_others_kept():
    import numpy as np

    texts = np.array(
        [
            ["Red pen", "Industrial & Scientific,Lab,Pens"],
            ["Ink", "Industrial & Scientific,Ink"],
            ["Pad", "Industrial & Scientific,Lab"],
            ["", ""],
        ],
        dtype=object,
    )
    out, dropped = text.drop_common_values(texts, 0.9)
    assert dropped == {1: ["Industrial & Scientific"]}  # the empty (reserved) row is not counted
    assert out[:, 1].tolist() == ["Lab,Pens", "Ink", "Lab", ""] and out[:, 0].tolist() == texts[:, 0].tolist()
    _, two_thirds = text.drop_common_values(texts, 0.6)
    assert two_thirds == {1: ["Industrial & Scientific", "Lab"]}
