"""One self-attention block for item sequences, causal or bidirectional."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tfseqrec")
class TransformerBlock(keras.layers.Layer):
    """Multi-head self-attention plus a position-wise feed-forward network.

    ``causal=True`` lets position ``i`` attend to positions ``<= i`` only (SASRec);
    ``causal=False`` attends both ways (BERT4Rec). Padded positions are never attended
    to, and their outputs are zeroed so they carry nothing into the next block.

    ``normalize_first=True`` is the pre-LN block (``x + Attn(LN(x))``,
    ``x + FFN(LN(x))``); ``False`` is BERT's post-LN block (``LN(x + Attn(x))``,
    ``LN(x + FFN(x))``). ``normalized_residual=True`` (with ``normalize_first``) is the
    block of the SASRec reference code: only the queries are normalised, keys and
    values come from the un-normalised stream, and each residual starts from the
    normalised input (``h = LN(x); h + Attn(h, x, x)``, then ``g = LN(.); g + FFN(g)``).
    Attention is
    ``keras.layers.MultiHeadAttention``. Written here rather than taken from keras-hub's
    ``TransformerEncoder`` because keras-hub is not in the pinned TFX 1.16 stack and this
    block also zeroes padded outputs (as SASRec does) and can return attention maps.

    Args:
        num_heads: attention heads; ``hidden_dim`` must divide by it.
        intermediate_dim: width of the feed-forward layer.
        dropout: dropout rate on attention weights, after attention and in the FFN.
        attention_output_dropout: also drop out the attention output (the SASRec
            reference code drops out the attention weights only).
        normalized_residual: the SASRec reference block (see above); needs
            ``normalize_first``.
        kernel_initializer: initializer of the attention and feed-forward kernels
            (biases start at zero).
        activation: feed-forward activation (``"relu"`` in SASRec, ``"gelu"`` in BERT4Rec).
        normalize_first: pre-LN (True) or post-LN (False).
        causal: causal (True) or bidirectional (False) attention.
        layer_norm_epsilon: epsilon of the layer norms.

    Call arguments:
        inputs: float tensor ``[batch, length, hidden_dim]``.
        padding_mask: bool tensor ``[batch, length]``, True for real items.
        training: dropout switch.
        return_attention_scores: also return ``[batch, heads, length, length]`` weights.

    Example:

    >>> block = TransformerBlock(num_heads=2, intermediate_dim=16, causal=True)
    >>> x = keras.random.normal((2, 5, 8))
    >>> mask = keras.ops.convert_to_tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], "bool")
    >>> tuple(block(x, padding_mask=mask).shape)
    (2, 5, 8)

    Reference:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        activation="relu",
        normalize_first=True,
        causal=True,
        layer_norm_epsilon=1e-6,
        attention_output_dropout=True,
        normalized_residual=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if normalized_residual and not normalize_first:
            raise ValueError("normalized_residual=True needs normalize_first=True (a pre-LN block)")
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.activation = keras.activations.get(activation)
        self.normalize_first = normalize_first
        self.causal = causal
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_output_dropout = attention_output_dropout
        self.normalized_residual = normalized_residual
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={self.num_heads}")
        # === Layers ===
        self.attention = keras.layers.MultiHeadAttention(
            self.num_heads,
            hidden_dim // self.num_heads,
            dropout=self.dropout,
            kernel_initializer=self._initializer(),
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention.build(input_shape, input_shape)
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="attention_norm"
        )
        self.attention_norm.build(input_shape)
        self.ffn_in = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=self._initializer(),
            dtype=self.dtype_policy,
            name="ffn_in",
        )
        self.ffn_in.build(input_shape)
        self.ffn_out = keras.layers.Dense(
            hidden_dim, kernel_initializer=self._initializer(), dtype=self.dtype_policy, name="ffn_out"
        )
        self.ffn_out.build(tuple(input_shape[:-1]) + (self.intermediate_dim,))
        self.ffn_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="ffn_norm"
        )
        self.ffn_norm.build(input_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def _initializer(self):
        # One initializer object per sub-layer, as keras-hub's clone_initializer.
        return self.kernel_initializer.__class__.from_config(self.kernel_initializer.get_config())

    def attention_mask(self, padding_mask, length):
        """``[batch, length, length]`` bool: query ``i`` may attend key ``j``."""
        mask = ops.expand_dims(padding_mask, 1)
        if self.causal:
            rows = ops.arange(length)[:, None]
            cols = ops.arange(length)[None, :]
            mask = ops.logical_and(mask, ops.expand_dims(cols <= rows, 0))
        return mask

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        x = inputs
        length = ops.shape(x)[1]
        if padding_mask is None:
            padding_mask = ops.ones(ops.shape(x)[:2], "bool")
        mask = self.attention_mask(padding_mask, length)
        keep = ops.cast(ops.expand_dims(padding_mask, -1), x.dtype)

        if self.normalized_residual:
            x = self.attention_norm(x)  # the queries; keys and values stay un-normalised
            attended, scores = self.attention(
                x, inputs, attention_mask=mask, training=training, return_attention_scores=True
            )
        else:
            h = self.attention_norm(x) if self.normalize_first else x
            attended, scores = self.attention(
                h, h, attention_mask=mask, training=training, return_attention_scores=True
            )
        if self.attention_output_dropout:
            attended = self.dropout_layer(attended, training=training)
        x = x + attended
        if not self.normalize_first:
            x = self.attention_norm(x)

        if self.normalized_residual:
            x = h = self.ffn_norm(x)
        else:
            h = self.ffn_norm(x) if self.normalize_first else x
        h = self.ffn_out(self.dropout_layer(self.ffn_in(h), training=training))
        x = x + self.dropout_layer(h, training=training)
        if not self.normalize_first:
            x = self.ffn_norm(x)
        x = x * keep
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "normalize_first": self.normalize_first,
                "causal": self.causal,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_output_dropout": self.attention_output_dropout,
                "normalized_residual": self.normalized_residual,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
