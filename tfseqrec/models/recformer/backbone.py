"""Recformer's encoder: embeddings and Longformer-style blocks, no task on top."""

import keras
from keras import ops

from tfseqrec.data import text as text_lib
from tfseqrec.layers import RecformerEmbedding, WindowedTransformerBlock


@keras.saving.register_keras_serializable(package="tfseqrec")
class RecformerBackbone(keras.Model):
    """The Recformer encoder: packed item text in, one hidden state per token out.

    A history is packed as ``[CLS]`` followed by its items' ``key value`` tokens, the
    newest item first (``tfseqrec.data.text.pack_histories``). The embedding sums
    token, token-position, token-type (``[CLS]`` / key / value) and item-position
    embeddings; BERT-shaped blocks with Longformer attention (a local window for
    every token, global attention for ``[CLS]``) read it. Padding
    (``padding_mask`` false) is never attended to. The tasks
    (``tfseqrec.models.recformer.tasks``) take the ``[CLS]`` state (index 0) as the
    vector of the input.

    Args:
        vocabulary_size, hidden_dim, num_layers, num_heads, intermediate_dim: the
            BERT shape (all-MiniLM-L6-v2: 30522, 384, 6, 12, 1536).
        max_tokens: tokens per input, ``[CLS]`` included.
        max_sequence_length: items per history (item positions ``0 .. max_sequence_length``).
        attention_window: local attention window (tokens, even).
        dropout: dropout rate.
        layer_norm_epsilon: BERT's 1e-12.

    Call arguments:
        inputs: dict from ``pack_histories``: ``token_ids``, ``token_type_ids``,
            ``item_position_ids``, ``padding_mask``.

    Returns:
        float ``[batch, length, hidden_dim]``.

    Example:

    >>> backbone = RecformerBackbone(vocabulary_size=30, hidden_dim=8, num_layers=1, num_heads=2,
    ...                              intermediate_dim=16, max_tokens=12, max_sequence_length=3, attention_window=4)
    >>> ids = keras.ops.ones((2, 12), "int32")
    >>> inputs = {"token_ids": ids, "token_type_ids": ids, "item_position_ids": ids, "padding_mask": ids > 0}
    >>> tuple(backbone(inputs).shape)
    (2, 12, 8)

    Reference:
        Li et al., "Text Is All You Need: Learning Language Representations for
        Sequential Recommendation", KDD 2023.
    """

    def __init__(
        self,
        vocabulary_size=30522,
        hidden_dim=384,
        num_layers=6,
        num_heads=12,
        intermediate_dim=1536,
        max_tokens=512,
        max_sequence_length=50,
        attention_window=64,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # === Layers ===
        self.embedding = RecformerEmbedding(
            vocabulary_size, hidden_dim, max_tokens, max_sequence_length, text_lib.NUM_TOKEN_TYPES,
            dropout=dropout, layer_norm_epsilon=layer_norm_epsilon, name="embedding",
        )
        self.blocks = [
            WindowedTransformerBlock(
                num_heads, intermediate_dim, attention_window, num_global_tokens=1, dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon, name=f"block_{i}",
            )
            for i in range(num_layers)
        ]

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.max_tokens = max_tokens
        self.max_sequence_length = max_sequence_length
        self.attention_window = attention_window
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape=None):
        self.embedding.build()
        for block in self.blocks:
            block.build((None, None, self.hidden_dim))
        self.built = True

    def call(self, inputs, training=None):
        mask = ops.cast(inputs["padding_mask"], "bool")
        x = self.embedding(inputs, training=training)
        for block in self.blocks:
            x = block(x, padding_mask=mask, training=training)
        return x

    @property
    def token_embeddings(self):
        """The ``[vocabulary_size, hidden_dim]`` token table (tied to the MLM head)."""
        return self.embedding.token_embedding.embeddings

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "max_tokens": self.max_tokens,
            "max_sequence_length": self.max_sequence_length,
            "attention_window": self.attention_window,
            "dropout": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        })
        return config
