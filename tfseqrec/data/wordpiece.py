"""BERT's uncased WordPiece tokenization in plain Python: no TensorFlow.

The ids are those of tensorflow-text's ``BertTokenizer(lower_case=True)``, which the
exported Recformer runs in its graph (``tfseqrec.data.text``), step by step:

1. case folding with NFKC (ICU's ``NFKC_Casefold``: NFKC of the case-folded NFKD, default
   ignorable code points removed), then NFD, then the non-spacing marks (``Mn``) removed:
   lower case, accents stripped;
2. control and format characters (``Cc``, ``Cf``) become spaces;
3. words split on runs of ASCII whitespace (RE2's ``\\s``: tab, newline, form feed,
   carriage return, space), and on each ASCII punctuation character, Unicode punctuation
   (``P*``) and CJK ideograph, which are words of their own;
4. each word, greedily, into its longest vocabulary prefix, then its longest ``##``
   continuations; a word with no such split, or of more than 100 UTF-8 bytes, is ``[UNK]``.

So training on a backend without TensorFlow (JAX) tokenizes item text as data
preparation, to the ids the served model computes from raw text
(``tests/data/test_wordpiece.py`` compares them on every Amazon Scientific item).

Example:

>>> tokenizer = WordPiece(["[PAD]", "[UNK]", "the", "great", "##est", "!", "cafe"])
>>> tokenizer.ids("The GREATEST!  Café greatness")
[2, 3, 4, 5, 6, 1]
"""

import unicodedata

import numpy as np

from tfseqrec.data import vocab

# Recformer's token types: the leading [CLS], attribute names (keys), their values.
CLS_TYPE, KEY_TYPE, VALUE_TYPE = 0, 1, 2
NUM_TOKEN_TYPES = 3

# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt), which
# NFKC_Casefold removes.
_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# CJK ideographs, each a word of its own (tensorflow-text's delimiters).
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_WHITESPACE = frozenset("\t\n\f\r ")
MAX_BYTES_PER_WORD = 100
SUFFIX = "##"
CACHE_WORDS = 1_000_000  # words whose pieces are kept; the cache starts over past it


def _in(code, ranges):
    return any(low <= code <= high for low, high in ranges)


def normalized(text):
    """Steps 1 and 2: case-folded, accents stripped, control characters as spaces."""
    folded = unicodedata.normalize("NFKD", text).casefold()
    folded = "".join(c for c in folded if not _in(ord(c), _IGNORABLE))
    decomposed = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", folded))
    out = []
    for c in decomposed:
        category = unicodedata.category(c)
        if category == "Mn":
            continue
        out.append(" " if category in ("Cc", "Cf") else c)
    return "".join(out)


def _alone(c):
    """Whether ``c`` is a word of its own: ASCII or Unicode punctuation, or a CJK ideograph."""
    code = ord(c)
    ascii_punct = 0x21 <= code <= 0x2F or 0x3A <= code <= 0x40 or 0x5B <= code <= 0x60 or 0x7B <= code <= 0x7E
    return ascii_punct or unicodedata.category(c).startswith("P") or _in(code, _CJK)


def words(text):
    """Steps 1 to 3: the words of ``text``."""
    out, word = [], []
    for c in normalized(text):
        if c in _WHITESPACE or _alone(c):
            if word:
                out.append("".join(word))
                word = []
            if c not in _WHITESPACE:
                out.append(c)
        else:
            word.append(c)
    if word:
        out.append("".join(word))
    return out


class WordPiece:
    """Uncased BERT WordPiece over ``vocabulary`` (a list of tokens, or a ``vocab.txt`` path):
    ``ids(text)`` are tensorflow-text ``BertTokenizer(lower_case=True)``'s ids of ``text``."""

    def __init__(self, vocabulary, unk_token="[UNK]"):
        if isinstance(vocabulary, str):
            with open(vocabulary, encoding="utf-8") as f:
                vocabulary = [line.rstrip("\n") for line in f]
        self.index = {token: i for i, token in enumerate(vocabulary)}
        if unk_token not in self.index:
            raise ValueError(f"the vocabulary has no {unk_token!r} token")
        self.unk_id = self.index[unk_token]
        self._cache = {}

    def ids(self, text):
        """The token ids of ``text`` (a ``str``)."""
        out = []
        for word in words(text):
            pieces = self._cache.get(word)
            if pieces is None:
                if len(self._cache) >= CACHE_WORDS:
                    self._cache.clear()
                pieces = self._cache[word] = self._pieces(word)
            out.extend(pieces)
        return out

    def _pieces(self, word):
        if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD:
            return [self.unk_id]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else SUFFIX + word[start:end]
                if piece in self.index:
                    pieces.append(self.index[piece])
                    start = end
                    break
            else:
                return [self.unk_id]
        return pieces


def item_texts(item_text, vocabulary, attributes):
    """``([vocabulary.size, len(attributes)]`` strings, items without text``)``: each item's
    ``attributes`` from ``item_text`` (``{raw id: {attribute: text}}``); reserved ids and
    items without text are empty (their count is the second value)."""
    table = np.full((vocabulary.size, len(attributes)), "", dtype=object)
    missing = 0
    for i, raw in enumerate(vocabulary.items):
        attrs = item_text.get(raw)
        if attrs is None:
            missing += 1
            continue
        table[vocab.NUM_RESERVED + i] = [attrs.get(a, "") or "" for a in attributes]
    return table, missing


def item_tokens(texts, tokenizer, attributes, budgets):
    """Token ids and types of items as ``tfseqrec.data.text.ItemTextTokenizer.tokenize``
    gives them: per attribute, its name's tokens (``KEY_TYPE``) then at most its budget of
    its value's tokens (``VALUE_TYPE``); an empty value drops its key too.

    Args:
        texts: strings ``[items, len(attributes)]``.
        tokenizer: a ``WordPiece``.
        attributes: the attribute names (their tokens are the keys: ``_`` read as a space).
        budgets: each attribute's most value tokens.

    Returns:
        ``(tokens, types)``: a list of int64 arrays and a list of int32 arrays, one per item.
    """
    keys = [tokenizer.ids(a.replace("_", " ")) for a in attributes]
    all_tokens, all_types = [], []
    for row in texts:
        tokens, types = [], []
        for key, budget, value in zip(keys, budgets, row):
            pieces = tokenizer.ids(str(value))[:budget]
            if pieces:
                tokens += key + pieces
                types += [KEY_TYPE] * len(key) + [VALUE_TYPE] * len(pieces)
        all_tokens.append(np.asarray(tokens, np.int64))
        all_types.append(np.asarray(types, np.int32))
    return all_tokens, all_types


# More than this share of the items' word pieces [UNK]: the text is in a script (or a language)
# the vocabulary does not cover, and a model would read little but [UNK].
MAX_UNKNOWN_SHARE = 0.5


def check_item_tokens(tokens, types, unk_id, max_tokens, first_id=0):
    """Refuses item tokens a Recformer cannot read; returns the share of [UNK] word pieces.

    Refused, each in one line: an item longer than a packed input holds beside its
    ``[CLS]`` (attribute budgets that do not fit ``max_tokens``), and text whose word
    pieces are mostly ``[UNK]`` (over ``MAX_UNKNOWN_SHARE``). Empty items are the caller's
    to refuse or count (``Catalogue.of_texts``, ``tfseqrec.training.directory.require_text``).

    Args:
        tokens, types: one array (or list) per item, as ``item_tokens`` gives them.
        unk_id: the ``[UNK]`` token id; ``max_tokens`` the packed input's length.
        first_id: the id of the first item, for the messages (``vocab.NUM_RESERVED`` when
            ``tokens`` hold the reserved rows first).

    >>> check_item_tokens([[4, 1, 5], [6, 7]], [[1, 2, 2], [1, 2]], unk_id=1, max_tokens=8)
    0.3333333333333333
    """
    lengths = [len(t) for t in tokens]
    longest = max(lengths, default=0)
    if longest + 1 > max_tokens:
        raise ValueError(
            f"item {first_id + lengths.index(longest)} takes {longest} tokens with these attribute budgets, "
            f"and [CLS] one more: max_tokens {max_tokens} holds no whole item (lower the budgets or raise max_tokens)"
        )
    values = [np.asarray(t)[np.asarray(y) == VALUE_TYPE] for t, y in zip(tokens, types)]
    total = sum(len(v) for v in values)
    unknown = sum(int(np.sum(v == unk_id)) for v in values)
    share = unknown / total if total else 0.0
    if share > MAX_UNKNOWN_SHARE:
        raise ValueError(
            f"{unknown:,} of the items' {total:,} word pieces are [UNK] ({share:.0%}): the item text is in "
            "a script the vocabulary does not cover; use a checkpoint whose vocabulary covers it"
        )
    return share


def pack_histories(histories, tokens, types, cls_id, max_sequence_length, max_tokens, pad_multiple=None):
    """Recformer inputs of histories, as ``tfseqrec.data.text.pack_histories`` makes them.

    Args:
        histories: per history, its item rows in ``tokens`` and ``types``, oldest first.
        tokens, types: ``item_tokens``'s lists.
        cls_id: the ``[CLS]`` token id.
        max_sequence_length: the newest items kept.
        max_tokens: the most tokens of an input, ``[CLS]`` included (the oldest items'
            tokens past it are cut).
        pad_multiple: ``None``: every input is ``max_tokens`` wide; else the batch is as
            wide as its longest input rounded up to a multiple of this (at most ``max_tokens``).

    Returns:
        ``{"token_ids": int64, "token_type_ids": int32, "item_position_ids": int32,
        "padding_mask": bool}``, each ``[len(histories), width]``: the newest item first
        behind ``[CLS]`` (item position 0; the newest item 1, the one before it 2, ...).
    """
    kept = [list(history)[::-1][:max_sequence_length] for history in histories]
    width = max_tokens
    if pad_multiple:
        longest = 1 + max([sum(len(tokens[i]) for i in newest) for newest in kept], default=0)
        width = min(max_tokens, -(-longest // pad_multiple) * pad_multiple)
    n = len(histories)
    out = {
        "token_ids": np.zeros((n, width), np.int64),
        "token_type_ids": np.zeros((n, width), np.int32),
        "item_position_ids": np.zeros((n, width), np.int32),
        "padding_mask": np.zeros((n, width), bool),
    }
    for row, newest in enumerate(kept):
        ids = np.concatenate([[cls_id], *(tokens[i] for i in newest)]).astype(np.int64)
        kinds = np.concatenate([[CLS_TYPE], *(types[i] for i in newest)]).astype(np.int32)
        positions = np.concatenate([[0], *(np.full(len(tokens[i]), p + 1) for p, i in enumerate(newest))])
        size = min(len(ids), width)
        out["token_ids"][row, :size] = ids[:size]
        out["token_type_ids"][row, :size] = kinds[:size]
        out["item_position_ids"][row, :size] = positions[:size]
        out["padding_mask"][row, :size] = True
    return out
