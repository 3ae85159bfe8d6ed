"""Recformer's encoder: embeddings and Longformer-style blocks, no task on top."""

import keras
from keras import ops

from tfseqrec.data import wordpiece
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

    With ``cached_layers = k > 0`` the embedding and the lower ``k`` blocks are frozen
    and read each item alone: ``item_states`` runs them over one-item inputs
    (``[CLS]`` and the item's tokens, as an item is encoded), once per item, and a
    history's input to block ``k`` is its items' token states laid out as
    ``pack_histories`` lays out the tokens (``[CLS]`` first: the state of a lone
    ``[CLS]``), plus a second item-position embedding (zeros at the start) that tells
    the upper blocks the order the frozen ones never saw. Only the upper blocks read
    the history, so fine-tuning costs ``num_layers - k`` blocks over it, while the
    item text still goes through all of the checkpoint's layers. Inputs then carry
    ``token_states`` (``tfseqrec.models.recformer.pack_inputs``).

    Args:
        vocabulary_size, hidden_dim, num_layers, num_heads, intermediate_dim: the
            BERT shape (all-MiniLM-L6-v2: 30522, 384, 6, 12, 1536).
        max_tokens: tokens per input, ``[CLS]`` included.
        max_sequence_length: items per history (item positions ``0 .. max_sequence_length``).
        attention_window: local attention window (tokens, even).
        dropout: dropout rate.
        layer_norm_epsilon: BERT's 1e-12.
        cached_layers: lower blocks that read each item alone, frozen (see above).

    Call arguments:
        inputs: dict from ``pack_histories``: ``token_ids``, ``token_type_ids``,
            ``item_position_ids``, ``padding_mask``; with ``cached_layers``, also
            ``token_states`` ``[batch, length, hidden_dim]``.

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
        cached_layers=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0 <= int(cached_layers) < num_layers:
            raise ValueError(
                f"cached_layers must be in [0, num_layers - 1] = [0, {num_layers - 1}], "
                f"got {cached_layers}: at least one block must read the history"
            )
        # === Layers ===
        self.embedding = RecformerEmbedding(
            vocabulary_size,
            hidden_dim,
            max_tokens,
            max_sequence_length,
            wordpiece.NUM_TOKEN_TYPES,
            dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            name="embedding",
        )
        self.blocks = [
            WindowedTransformerBlock(
                num_heads,
                intermediate_dim,
                attention_window,
                num_global_tokens=1,
                dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                name=f"block_{i}",
            )
            for i in range(num_layers)
        ]
        self.state_position_embedding = None
        if cached_layers:
            self.state_position_embedding = keras.layers.Embedding(
                max_sequence_length + 1,
                hidden_dim,
                embeddings_initializer="zeros",
                name="state_position_embedding",
            )

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
        self.cached_layers = int(cached_layers)

    def build(self, input_shape=None):
        self.embedding.build()
        for block in self.blocks:
            block.build((None, None, self.hidden_dim))
        if self.state_position_embedding is not None:
            self.state_position_embedding.build((None, None))
            # After building: a layer's trainable flag reaches only the variables it already has.
            for layer in [self.embedding] + self.blocks[: self.cached_layers]:
                layer.trainable = False
        self.built = True

    def call(self, inputs, training=None):
        mask = ops.cast(inputs["padding_mask"], "bool")
        if not self.cached_layers:
            return self._blocks(self.embedding(inputs, training=training), mask, self.blocks, training)
        if "token_states" not in inputs:
            raise ValueError(
                f"this backbone caches its lower {self.cached_layers} layers: its inputs carry "
                "token_states (tfseqrec.models.recformer.pack_inputs), not only token ids"
            )
        positions = ops.minimum(inputs["item_position_ids"], self.max_sequence_length)
        x = ops.cast(inputs["token_states"], self.compute_dtype) + self.state_position_embedding(positions)
        return self._blocks(x, mask, self.blocks[self.cached_layers :], training)

    def item_states(self, inputs):
        """The frozen lower layers' token states ``[batch, length, hidden_dim]`` of packed inputs.

        What the cached layers make of one-item inputs (or a lone ``[CLS]``); dropout off.
        """
        mask = ops.cast(inputs["padding_mask"], "bool")
        x = self.embedding(inputs, training=False)
        return self._blocks(x, mask, self.blocks[: self.cached_layers], False)

    @staticmethod
    def _blocks(x, mask, blocks, training):
        for block in blocks:
            x = block(x, padding_mask=mask, training=training)
        return x

    @property
    def token_embeddings(self):
        """The ``[vocabulary_size, hidden_dim]`` token table (tied to the MLM head)."""
        return self.embedding.token_embedding.embeddings

    def get_config(self):
        config = super().get_config()
        config.update(
            {
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
                "cached_layers": self.cached_layers,
            }
        )
        return config
