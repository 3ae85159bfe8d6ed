"""Frozen item-text vectors: a pretrained BERT sentence encoder, mean-pooled."""

import os

import numpy as np
import tensorflow as tf

from tfseqrec.data import text as text_lib
from tfseqrec.models.recformer import RecformerBackbone, load_bert_weights, minilm_path
from tfseqrec.progress import progress_bar


class SentenceEncoder(tf.Module):
    """Item text to one L2-normalised vector per item (UniSRec's frozen text vectors).

    An item's attributes are flattened as ``key value key value ...`` (the tokenizer of
    ``tfseqrec.data.text``), read behind ``[CLS]`` by a BERT encoder, and the output
    states of its tokens (``[CLS]`` included, padding not) are averaged and
    L2-normalised: how all-MiniLM-L6-v2 makes sentence vectors. The encoder is a
    ``RecformerBackbone`` with one item per input and a window wider than the input,
    which computes exactly BERT's forward pass (tested against a NumPy BERT).

    Items are encoded in batches of ``batch_size`` (a catalogue of any size never
    needs more than one batch of token states in memory), with a progress bar.

    Args:
        backbone: a ``RecformerBackbone`` holding the pretrained weights.
        tokenizer: the ``ItemTextTokenizer`` of its WordPiece vocabulary.

    Example:

    >>> encoder = SentenceEncoder.from_pretrained(attributes=["title"])  # all-MiniLM-L6-v2
    >>> encoder.encode([["red pipette"], ["blue flask"]], progress=False).shape
    (2, 384)
    """

    def __init__(self, backbone, tokenizer):
        super().__init__(name="sentence_encoder")
        self.backbone = backbone
        object.__setattr__(self, "tokenizer", tokenizer)
        self.wordpiece = tokenizer.tokenizer
        # Not a tracked attribute: a SavedModel holding the encoder saves its own signatures only.
        object.__setattr__(self, "_encode_tokens", tf.function(self.encode_tokens, reduce_retracing=True))

    @classmethod
    def from_pretrained(cls, attributes, path=None, num_layers=6, max_attribute_tokens=32):
        """The encoder of a BERT checkpoint directory (default: all-MiniLM-L6-v2).

        Args:
            attributes: the attribute names, in text order.
            path: a directory with ``model.safetensors`` and ``vocab.txt``.
            num_layers: the first ``num_layers`` layers are kept.
            max_attribute_tokens: each attribute's value is cut to this many tokens.
        """
        path = path or minilm_path()
        tokenizer = text_lib.ItemTextTokenizer(
            os.path.join(path, "vocab.txt"), attributes, max_attribute_tokens
        )
        # [CLS] plus every attribute's key and value; the window spans all of it.
        width = 1 + sum(len(key) + max_attribute_tokens for key in tokenizer.key_tokens)
        window = 2 * width + (2 * width) % 2
        backbone = RecformerBackbone(
            num_layers=num_layers,
            max_tokens=width,
            max_sequence_length=1,
            attention_window=window,
            dropout=0.0,
        )
        backbone.build()
        load_bert_weights(backbone, path)
        return cls(backbone, tokenizer)

    @property
    def dim(self):
        """Width of the vectors."""
        return self.backbone.hidden_dim

    @property
    def attributes(self):
        return self.tokenizer.attributes

    def encode_tokens(self, tokens, types):
        """Vectors ``[n, dim]`` of tokenized items (ragged ``[n, (tokens)]``, as ``tokenize`` gives)."""
        inputs = text_lib.pack_histories(
            tf.expand_dims(tokens, 1),
            tf.expand_dims(types, 1),
            self.tokenizer.cls_id,
            1,
            self.backbone.max_tokens,
        )
        states = self.backbone(inputs, training=False)
        mask = tf.cast(inputs["padding_mask"], states.dtype)[..., None]
        mean = tf.reduce_sum(states * mask, axis=1) / tf.reduce_sum(mask, axis=1)
        return tf.math.l2_normalize(tf.cast(mean, tf.float32), axis=-1)

    def encode_text(self, texts):
        """Vectors ``[n, dim]`` of string ``[n, attributes]`` (in-graph: the export's path)."""
        return self.encode_tokens(*self.tokenizer.tokenize(texts))

    def encode(self, texts, batch_size=256, progress=None):
        """Vectors ``[n, dim]`` (float32 NumPy) of item texts ``[n, attributes]``.

        Args:
            texts: strings ``[n, len(attributes)]``; an item with no text at all gets
                the vector of ``[CLS]`` alone.
            batch_size: items encoded at once.
            progress: a progress bar (``None``: on a terminal).
        """
        texts = np.asarray(texts, dtype=object).reshape(len(texts), -1)
        if texts.shape[1] != len(self.attributes):
            raise ValueError(
                f"item texts have {texts.shape[1]} attributes; the encoder reads "
                f"{len(self.attributes)} ({self.attributes})"
            )
        out = np.zeros((len(texts), self.dim), np.float32)
        bar = progress_bar(-(-len(texts) // batch_size), progress, "encode items")
        for start in range(0, len(texts), batch_size):
            tokens, types = self.tokenizer.tokenize(texts[start : start + batch_size].astype(str))
            out[start : start + batch_size] = self._encode_tokens(tokens, types).numpy()
            bar.update(1)
        bar.close()
        return out
