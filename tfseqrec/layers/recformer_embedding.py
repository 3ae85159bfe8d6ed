"""Recformer's input embedding: token + token position + token type + item position."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tfseqrec")
class RecformerEmbedding(keras.layers.Layer):
    """``LayerNorm(token + token_position + token_type + item_position)``, then dropout.

    The token, token-position and layer-norm weights have BERT's shapes, so a BERT
    checkpoint loads into them; token types are Recformer's three (``[CLS]``, key,
    value) and item positions say which item of the history (newest first) a token
    belongs to.

    Args:
        vocabulary_size: WordPiece vocabulary size.
        hidden_dim: embedding width.
        max_tokens: token positions.
        max_sequence_length: items of a history; item positions are ``0`` for
            ``[CLS]``, ``1`` for the newest item, ... up to ``max_sequence_length``.
        num_token_types: token types (3 in Recformer).
        dropout: dropout after the layer norm.
        layer_norm_epsilon: epsilon of the layer norm (BERT: 1e-12).

    Call arguments:
        inputs: dict of int ``[batch, length]``: ``token_ids``, ``token_type_ids``,
            ``item_position_ids``.

    Example:

    >>> layer = RecformerEmbedding(vocabulary_size=10, hidden_dim=4, max_tokens=6, max_sequence_length=2)
    >>> ids = keras.ops.ones((1, 6), "int32")
    >>> tuple(layer({"token_ids": ids, "token_type_ids": ids, "item_position_ids": ids}).shape)
    (1, 6, 4)

    Reference:
        Li et al., "Text Is All You Need: Learning Language Representations for
        Sequential Recommendation", KDD 2023.
    """

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        max_tokens=512,
        max_sequence_length=50,
        num_token_types=3,
        dropout=0.0,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.max_tokens = max_tokens
        self.max_sequence_length = max_sequence_length
        self.num_token_types = num_token_types
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon

        # === Layers ===
        init = keras.initializers.TruncatedNormal(stddev=0.02)

        def embedding(n, name):
            return keras.layers.Embedding(
                n, hidden_dim, embeddings_initializer=init, dtype=self.dtype_policy, name=name
            )

        self.token_embedding = embedding(vocabulary_size, "token_embedding")
        self.position_embedding = embedding(max_tokens, "position_embedding")
        self.token_type_embedding = embedding(num_token_types, "token_type_embedding")
        self.item_position_embedding = embedding(max_sequence_length + 1, "item_position_embedding")
        self.norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        for layer in (
            self.token_embedding,
            self.position_embedding,
            self.token_type_embedding,
            self.item_position_embedding,
        ):
            layer.build((None, None))
        self.norm.build((None, None, self.hidden_dim))
        self.built = True

    def call(self, inputs, training=None):
        ids = inputs["token_ids"]
        length = ops.shape(ids)[1]
        x = (
            self.token_embedding(ids)
            + self.position_embedding(ops.arange(length))[None]
            + self.token_type_embedding(inputs["token_type_ids"])
            + self.item_position_embedding(ops.minimum(inputs["item_position_ids"], self.max_sequence_length))
        )
        return self.dropout_layer(self.norm(x), training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape["token_ids"]) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "hidden_dim": self.hidden_dim,
                "max_tokens": self.max_tokens,
                "max_sequence_length": self.max_sequence_length,
                "num_token_types": self.num_token_types,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
