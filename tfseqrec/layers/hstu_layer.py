"""One HSTU layer: gated pointwise attention with relative position and time bias."""

import math

import keras
from keras import ops

# The reference code buckets time gaps by log(gap) / 0.301 (about log2 of seconds).
TIME_BUCKET_DIVISOR = 0.301


@keras.saving.register_keras_serializable(package="tfseqrec")
class HSTULayer(keras.layers.Layer):
    """Hierarchical Sequential Transduction Unit (Zhai et al., 2024, equations 1-3).

    With ``X`` the layer's input ``[batch, n, d]`` and ``LN`` a layer norm without
    learned scale or shift::

        U, V, Q, K = Split(SiLU(LN(X) W1))                              (1)
        A = SiLU(Q K^T + rab^{p,t}) / N, causal and padded keys zeroed   (2)
        Y = X + W2 Dropout(LN(A V) * U) + b2                             (3)

    per head (``num_heads`` heads of ``attention_dim`` for ``Q, K`` and
    ``linear_dim`` for ``U, V``; the norm in (3) spans all heads). ``N`` is the fixed
    ``max_sequence_length``, not the width of the batch, so a history gives the same
    output however much padding its batch has. ``rab^{p,t}`` is the relative
    attention bias, shared by the heads: a learned weight per relative position
    ``j - i`` (``relative_position_bias``) plus, when ``timestamps`` are given, a
    learned weight per time bucket ``floor(log(max(|t_q(i) - t_j|, 1)) / 0.301)``
    (at most ``num_time_buckets``), where ``t_q(i)`` is the time of the item that
    position ``i`` predicts (the next item's; the last position uses its own), as
    the reference code does. ``attention="softmax"`` replaces (2) by the usual
    ``softmax(Q K^T / sqrt(attention_dim) + rab)`` (an ablation). There is no
    feed-forward network: the gate ``U`` takes its place.

    Padded positions are never attended to, and their outputs are zeroed.

    Args:
        num_heads: attention heads.
        attention_dim: width of ``Q`` and ``K`` per head.
        linear_dim: width of ``U`` and ``V`` per head.
        max_sequence_length: ``N`` of (2), and the span of the position bias.
        dropout: dropout rate before ``W2`` (the reference: 0.2).
        attention_dropout: dropout rate on the attention weights (the reference: 0).
        relative_position_bias: learn ``rab^p``.
        num_time_buckets: time buckets of ``rab^t`` (the reference: 128); 0 for no
            time bias (then ``timestamps`` cannot be given).
        attention: ``"silu"`` (HSTU's pointwise attention) or ``"softmax"``.
        causal: position ``i`` attends to positions ``<= i`` only.
        layer_norm_epsilon: epsilon of both layer norms.
        kernel_initializer: initializer of ``W1`` and ``W2`` (biases start at 0).

    Call arguments:
        inputs: float ``[batch, n, d]``.
        padding_mask: bool ``[batch, n]``, True for real items.
        timestamps: optional int or float ``[batch, n]``, seconds.
        training: dropout switch.
        return_attention_scores: also return ``A`` ``[batch, heads, n, n]``.
        attention_mask_bias: optional ``attention_mask_bias(padding_mask, n)``, and
        time_buckets: optional ``time_buckets(timestamps)``: what every layer of a
            stack would compute alike, computed once (``HSTUBackbone`` passes them).

    Example:

    >>> layer = HSTULayer(num_heads=2, attention_dim=4, linear_dim=4, max_sequence_length=5)
    >>> x = keras.random.normal((2, 5, 8))
    >>> mask = keras.ops.convert_to_tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], "bool")
    >>> tuple(layer(x, padding_mask=mask).shape)
    (2, 5, 8)

    Reference:
        Zhai et al., "Actions Speak Louder than Words: Trillion-Parameter Sequential
        Transducers for Generative Recommendations", ICML 2024.
    """

    def __init__(
        self,
        num_heads,
        attention_dim,
        linear_dim,
        max_sequence_length,
        dropout=0.0,
        attention_dropout=0.0,
        relative_position_bias=True,
        num_time_buckets=0,
        attention="silu",
        causal=True,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if attention not in ("silu", "softmax"):
            raise ValueError(f"attention must be 'silu' or 'softmax', got {attention!r}")
        self.num_heads = num_heads
        self.attention_dim = attention_dim
        self.linear_dim = linear_dim
        self.max_sequence_length = max_sequence_length
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.relative_position_bias = relative_position_bias
        self.num_time_buckets = num_time_buckets
        self.attention = attention
        self.causal = causal
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        heads = self.num_heads
        # === Layers ===
        self.input_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            center=False,
            scale=False,
            dtype=self.dtype_policy,
            name="input_norm",
        )
        self.uvqk = keras.layers.Dense(
            heads * (2 * self.linear_dim + 2 * self.attention_dim),
            use_bias=False,
            kernel_initializer=self._initializer(),
            dtype=self.dtype_policy,
            name="uvqk",
        )
        self.uvqk.build(input_shape)
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            center=False,
            scale=False,
            dtype=self.dtype_policy,
            name="attention_norm",
        )
        self.output_dense = keras.layers.Dense(
            hidden_dim, kernel_initializer=self._initializer(), dtype=self.dtype_policy, name="output"
        )
        self.output_dense.build(tuple(input_shape[:-1]) + (heads * self.linear_dim,))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.attention_dropout_layer = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy)
        # === Relative attention bias ===
        if self.relative_position_bias:
            self.position_bias = self.add_weight(
                shape=(2 * self.max_sequence_length - 1,), initializer="zeros", name="position_bias"
            )
        if self.num_time_buckets:
            self.time_bias = self.add_weight(
                shape=(self.num_time_buckets + 1,), initializer="zeros", name="time_bias"
            )
        self.built = True

    def _initializer(self):
        return self.kernel_initializer.__class__.from_config(self.kernel_initializer.get_config())

    def attention_bias(self, length, timestamps=None, time_buckets=None):
        """``rab`` ``[batch or 1, n, n]``: position bias plus time bias (when given).

        ``time_buckets``: ``time_buckets(timestamps)``, computed once for a stack of
        layers (then ``timestamps`` is not needed).
        """
        bias = ops.zeros((1, length, length), self.compute_dtype)
        rows = ops.arange(length)[:, None]
        cols = ops.arange(length)[None, :]
        if self.relative_position_bias:
            index = cols - rows + (self.max_sequence_length - 1)
            bias = bias + ops.cast(ops.take(self.position_bias, index), self.compute_dtype)[None]
        if time_buckets is None and timestamps is not None:
            time_buckets = self.time_buckets(timestamps)
        if time_buckets is not None:
            bias = bias + ops.cast(ops.take(self.time_bias, time_buckets), self.compute_dtype)
        return bias

    def time_buckets(self, timestamps):
        """int32 ``[batch, n, n]``: the time bucket of each query and key (the same for every layer)."""
        if not self.num_time_buckets:
            raise ValueError("timestamps given to an HSTULayer without time buckets (num_time_buckets=0)")
        # Gaps in the input's dtype (int64 seconds), then float: epoch seconds in
        # float32 would be off by up to 64 s before subtracting.
        t = ops.convert_to_tensor(timestamps)
        query_time = ops.concatenate([t[:, 1:], t[:, -1:]], axis=1)
        gap = ops.cast(ops.abs(query_time[:, :, None] - t[:, None, :]), "float32")
        bucket = ops.floor(ops.log(ops.maximum(gap, 1.0)) / TIME_BUCKET_DIVISOR)
        return ops.cast(ops.clip(bucket, 0, self.num_time_buckets), "int32")

    def attention_mask(self, padding_mask, length):
        """``[batch, 1, n, n]`` bool: query ``i`` may attend key ``j``."""
        mask = padding_mask[:, None, :]
        if self.causal:
            rows = ops.arange(length)[:, None]
            cols = ops.arange(length)[None, :]
            mask = ops.logical_and(mask, (cols <= rows)[None])
        return mask[:, None]

    def attention_mask_bias(self, padding_mask, length):
        """``attention_mask`` as a bias added to the logits: 0 where attended, else far below any logit.

        SiLU and softmax of a logit plus this bias are exactly 0 (``exp`` underflows), so
        the mask costs one addition, shared with the relative bias's, instead of a
        product with the weights; a stack of layers computes it once.
        """
        dtype = self.compute_dtype
        masked = -3e4 if keras.backend.standardize_dtype(dtype) == "float16" else -1e9
        return ops.cast(ops.where(self.attention_mask(padding_mask, length), 0.0, masked), dtype)

    def call(
        self,
        inputs,
        padding_mask=None,
        timestamps=None,
        training=None,
        return_attention_scores=False,
        attention_mask_bias=None,
        time_buckets=None,
    ):
        x = inputs
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        if padding_mask is None:
            padding_mask = ops.ones((batch, length), "bool")
        if attention_mask_bias is None:
            attention_mask_bias = self.attention_mask_bias(padding_mask, length)
        heads, a, v_dim = self.num_heads, self.attention_dim, self.linear_dim
        h = ops.silu(self.uvqk(self.input_norm(x)))
        u, v, q, k = ops.split(h, [heads * v_dim, 2 * heads * v_dim, 2 * heads * v_dim + heads * a], axis=-1)
        q = ops.reshape(q, (batch, length, heads, a))
        k = ops.reshape(k, (batch, length, heads, a))
        v = ops.reshape(v, (batch, length, heads, v_dim))
        if self.attention == "softmax":
            # Q scaled before the product, not the logits after it: on CPU, oneDNN fuses
            # BatchMatMul -> Mul -> Add(broadcast bias) into one kernel that ran the
            # ML-1M batch 250x slower (2.6 s against 0.01 s; docs/models/hstu.md, "Faithful to the paper, and where not").
            q = q * ops.cast(1.0 / math.sqrt(a), q.dtype)
        # The relative bias [batch or 1, n, n] and the mask bias [batch, 1, n, n] meet
        # first (half the size of the logits), then one addition to the logits.
        bias = self.attention_bias(length, timestamps, time_buckets)[:, None] + attention_mask_bias
        logits = ops.einsum("bnha,bmha->bhnm", q, k) + bias
        if self.attention == "silu":
            # 0 where masked; the 1 / N of (2) scales V (n x v_dim), not the n x n weights.
            weights = ops.silu(logits)
            v = v / ops.cast(self.max_sequence_length, v.dtype)
        else:
            weights = ops.softmax(logits, axis=-1)
            # A fully masked row (a padded query) would spread its weight over masked keys.
            weights = weights * ops.cast(attention_mask_bias == 0, weights.dtype)
        weights = self.attention_dropout_layer(weights, training=training)
        attended = ops.reshape(ops.einsum("bhnm,bmhv->bnhv", weights, v), (batch, length, heads * v_dim))
        gated = self.attention_norm(attended) * u
        y = x + self.output_dense(self.dropout_layer(gated, training=training))
        y = y * ops.cast(padding_mask[..., None], y.dtype)
        if not return_attention_scores:
            return y
        if self.attention == "silu":
            weights = weights / ops.cast(self.max_sequence_length, weights.dtype)
        return y, weights

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "attention_dim": self.attention_dim,
                "linear_dim": self.linear_dim,
                "max_sequence_length": self.max_sequence_length,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "relative_position_bias": self.relative_position_bias,
                "num_time_buckets": self.num_time_buckets,
                "attention": self.attention,
                "causal": self.causal,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
