"""A BERT (post-LN) encoder block whose attention is ``WindowedSelfAttention``."""

import keras

from tfseqrec.layers.windowed_attention import WindowedSelfAttention


@keras.saving.register_keras_serializable(package="tfseqrec")
class WindowedTransformerBlock(keras.layers.Layer):
    """``x = LN(x + Attn(x)); x = LN(x + FFN(x))`` with Longformer-style attention.

    The weights have BERT's layout (query/key/value/output, intermediate and output
    dense, two layer norms), so BERT checkpoints load; Longformer's separate global
    projections start as copies of the local ones.

    Args:
        num_heads: attention heads.
        intermediate_dim: feed-forward width.
        attention_window: local window width (even), see ``WindowedSelfAttention``.
        num_global_tokens: leading tokens with global attention.
        dropout: dropout rate.
        activation: feed-forward activation (BERT: exact GELU).
        layer_norm_epsilon: epsilon of the layer norms.

    Call arguments:
        inputs: float ``[batch, length, hidden_dim]``.
        padding_mask: bool ``[batch, length]``.
        training: dropout switch.

    Example:

    >>> block = WindowedTransformerBlock(num_heads=2, intermediate_dim=16, attention_window=4)
    >>> tuple(block(keras.random.normal((2, 9, 8))).shape)
    (2, 9, 8)
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        attention_window=64,
        num_global_tokens=1,
        dropout=0.0,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.attention_window = attention_window
        self.num_global_tokens = num_global_tokens
        self.dropout = dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={self.num_heads}")
        # === Layers ===
        self.attention = WindowedSelfAttention(
            self.num_heads,
            hidden_dim // self.num_heads,
            self.attention_window,
            self.num_global_tokens,
            dropout=self.dropout,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention.build(input_shape)
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="attention_norm"
        )
        self.attention_norm.build(input_shape)
        activation = (
            (lambda x: keras.activations.gelu(x, approximate=False))
            if self.activation == "gelu"
            else self.activation
        )
        self.intermediate = keras.layers.Dense(
            self.intermediate_dim, activation=activation, dtype=self.dtype_policy, name="intermediate"
        )
        self.intermediate.build(input_shape)
        self.output_dense = keras.layers.Dense(hidden_dim, dtype=self.dtype_policy, name="output")
        self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_dim,))
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="output_norm"
        )
        self.output_norm.build(input_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        attended = self.attention(inputs, padding_mask=padding_mask, training=training)
        x = self.attention_norm(inputs + self.dropout_layer(attended, training=training))
        ffn = self.output_dense(self.intermediate(x))
        return self.output_norm(x + self.dropout_layer(ffn, training=training))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "attention_window": self.attention_window,
                "num_global_tokens": self.num_global_tokens,
                "dropout": self.dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
