"""Longformer-style self-attention: a local sliding window plus global leading tokens."""

import math

import keras
from keras import ops

_NEG = -1e9


@keras.saving.register_keras_serializable(package="tfseqrec")
class WindowedSelfAttention(keras.layers.Layer):
    """Multi-head self-attention that is local for ordinary tokens and global for the first ones.

    Token ``i`` attends to tokens ``j`` with ``|i - j| <= attention_window // 2`` and
    to the ``num_global_tokens`` leading tokens (Recformer's ``[CLS]``); a global token
    attends to every token, through its own query/key/value projections (Longformer's
    ``query_global`` ...). Padded tokens are never attended to.

    The window is computed block by block: the sequence is cut into blocks of
    ``attention_window // 2`` tokens and each block scores only itself and its two
    neighbours, so scores take ``O(length * attention_window)`` memory rather than the
    ``O(length ** 2)`` of a dense mask, with the same result (tested against dense
    masked attention). Written in ``keras.ops``: it runs on every Keras backend.
    keras-hub has no windowed attention to reuse.

    Args:
        num_heads: attention heads.
        key_dim: width of each head.
        attention_window: the window's total width (even, >= 2), as in Longformer.
        num_global_tokens: how many leading tokens attend and are attended globally.
        dropout: dropout on the attention weights.

    Call arguments:
        inputs: float ``[batch, length, num_heads * key_dim]``.
        padding_mask: bool ``[batch, length]``, True for real tokens.
        training: dropout switch.

    Returns:
        ``[batch, length, num_heads * key_dim]``; padded positions are zero.

    Example:

    >>> layer = WindowedSelfAttention(num_heads=2, key_dim=4, attention_window=4)
    >>> x = keras.random.normal((1, 7, 8))
    >>> tuple(layer(x, padding_mask=keras.ops.ones((1, 7), "bool")).shape)
    (1, 7, 8)

    Reference:
        Beltagy et al., "Longformer: The Long-Document Transformer", 2020;
        Li et al., "Text Is All You Need: Learning Language Representations for
        Sequential Recommendation", KDD 2023.
    """

    def __init__(self, num_heads, key_dim, attention_window=64, num_global_tokens=1, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        if attention_window < 2 or attention_window % 2:
            raise ValueError(f"attention_window must be even and at least 2, got {attention_window}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.attention_window = attention_window
        self.num_global_tokens = num_global_tokens
        self.dropout = dropout

    def build(self, input_shape):
        hidden_dim = input_shape[-1]

        # === Layers ===
        def projection(name):
            layer = keras.layers.EinsumDense(
                "btd,dhk->bthk",
                output_shape=(None, self.num_heads, self.key_dim),
                bias_axes="hk",
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(input_shape)
            return layer

        self.query_dense = projection("query")
        self.key_dense = projection("key")
        self.value_dense = projection("value")
        self.query_global_dense = projection("query_global")
        self.key_global_dense = projection("key_global")
        self.value_global_dense = projection("value_global")
        self.output_dense = keras.layers.EinsumDense(
            "bthk,hkd->btd",
            output_shape=(None, hidden_dim),
            bias_axes="d",
            dtype=self.dtype_policy,
            name="output",
        )
        self.output_dense.build((input_shape[0], input_shape[1], self.num_heads, self.key_dim))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        if padding_mask is None:
            padding_mask = ops.ones(ops.shape(inputs)[:2], "bool")
        padding_mask = ops.cast(padding_mask, "bool")
        local = self._local_rows(inputs, padding_mask, training)
        global_out = self._global_rows(inputs, padding_mask, training)
        out = self.output_dense(ops.concatenate([global_out, local], axis=1))
        return out * ops.cast(padding_mask[:, :, None], out.dtype)

    def _local_rows(self, inputs, padding_mask, training):
        """Outputs of the ordinary tokens: blocks of ``radius`` tokens score themselves and both neighbours."""
        length = ops.shape(inputs)[1]
        g = self.num_global_tokens
        radius = self.attention_window // 2
        q = self.query_dense(inputs) * ops.cast(1.0 / math.sqrt(self.key_dim), inputs.dtype)
        k = self.key_dense(inputs)
        v = self.value_dense(inputs)
        pad = (-length) % radius
        blocks = (length + pad) // radius
        is_global = ops.arange(length + pad) < g
        # Global keys join every row through their own column, not through the band.
        local_key = ops.logical_and(
            ops.pad(padding_mask, [[0, 0], [0, pad]], constant_values=False),
            ops.logical_not(is_global)[None, :],
        )

        def to_blocks(t):
            t = ops.pad(t, [[0, 0], [0, pad], [0, 0], [0, 0]])
            return ops.reshape(t, (-1, blocks, radius, self.num_heads, self.key_dim))

        def neighbours(t):
            # [batch, blocks, 3 * radius, ...]: previous, own and next block of each block.
            t = ops.pad(t, [[0, 0], [radius, radius + pad]] + [[0, 0]] * (len(t.shape) - 2))
            parts = [t[:, i * radius : i * radius + blocks * radius] for i in range(3)]
            parts = [ops.reshape(p, (-1, blocks, radius) + tuple(t.shape[2:])) for p in parts]
            return ops.concatenate(parts, axis=2)

        band = ops.einsum("bnqhk,bnshk->bnhqs", to_blocks(q), neighbours(k))
        offset = (
            ops.arange(3 * radius)[None, :] - radius - ops.arange(radius)[:, None]
        )  # key minus query position
        band_ok = ops.logical_and(
            (ops.abs(offset) <= radius)[None, None, None, :, :],
            neighbours(local_key)[:, :, None, None, :],
        )
        band = ops.where(band_ok, band, ops.cast(_NEG, band.dtype))
        global_scores = ops.einsum("bthk,bghk->bhtg", q, k[:, :g])
        global_scores = ops.where(padding_mask[:, None, None, :g], global_scores, ops.cast(_NEG, band.dtype))
        global_scores = ops.pad(global_scores, [[0, 0], [0, 0], [0, pad], [0, 0]])
        global_scores = ops.transpose(
            ops.reshape(global_scores, (-1, self.num_heads, blocks, radius, g)), (0, 2, 1, 3, 4)
        )
        weights = ops.softmax(ops.concatenate([global_scores, band], axis=-1), axis=-1)
        weights = self.dropout_layer(weights, training=training)
        local = ops.einsum("bnhqs,bnshk->bnqhk", weights[..., g:], neighbours(v))
        local = local + ops.einsum("bnhqg,bghk->bnqhk", weights[..., :g], v[:, :g])
        return ops.reshape(local, (-1, length + pad, self.num_heads, self.key_dim))[:, g:length]

    def _global_rows(self, inputs, padding_mask, training):
        """Outputs of the leading global tokens: they attend to everything."""
        g = self.num_global_tokens
        qg = self.query_global_dense(inputs[:, :g]) * ops.cast(1.0 / math.sqrt(self.key_dim), inputs.dtype)
        kg = self.key_global_dense(inputs)
        vg = self.value_global_dense(inputs)
        scores = ops.einsum("bghk,bthk->bhgt", qg, kg)
        scores = ops.where(padding_mask[:, None, None, :], scores, ops.cast(_NEG, scores.dtype))
        global_weights = self.dropout_layer(ops.softmax(scores, axis=-1), training=training)
        return ops.einsum("bhgt,bthk->bghk", global_weights, vg)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "attention_window": self.attention_window,
                "num_global_tokens": self.num_global_tokens,
                "dropout": self.dropout,
            }
        )
        return config
