"""BERT4Rec's backbone: bidirectional self-attention over the item history (the sequence output)."""

import functools

import keras

from tfseqrec import losses
from tfseqrec.checks import check_number
from tfseqrec.data import vocab
from tfseqrec.models.base import SequentialBackbone


def _initializer(initializer_range, kernel=False):
    """``N(0, initializer_range)`` truncated (BERT's); ``initializer_range=0``: Keras defaults for kernels."""
    if kernel and not initializer_range:
        return "glorot_uniform"
    return keras.initializers.TruncatedNormal(stddev=initializer_range or 0.02)


@keras.saving.register_keras_serializable(package="tfseqrec")
class BERT4RecBackbone(SequentialBackbone):
    """BERT4Rec's network: item ids to the sequence output (no loss; ``BERT4Rec`` trains it).

    Item plus position embeddings, layer norm and dropout feed ``num_layers``
    bidirectional post-LN blocks with GELU feed-forward layers. The output head is a
    GELU projection and layer norm, scored against the item embeddings (tied) plus a
    per-item bias. Padding (id 0) is masked out of attention.

    Args:
        num_items: number of real items.
        max_sequence_length: input length including the inference [MASK].
        hidden_dim: model width (64 in the paper for ML-1M).
        num_layers: transformer blocks (2).
        num_heads: attention heads (2).
        intermediate_dim: feed-forward width; defaults to ``4 * hidden_dim``.
        dropout: dropout rate (0.1).
        activation: feed-forward activation (``"gelu"``).
        normalize_first: pre-LN instead of BERT's post-LN.
        initializer_range: standard deviation of the truncated normal initializer of
            every embedding and kernel, as in BERT (biases start at 0); ``None``
            keeps Keras's Glorot kernels (embeddings stay at 0.02).
        position_origin: ``"newest"`` (the inference [MASK] always at the last
            position, as the original code's left padding) or ``"oldest"`` (position 0
            for the oldest item, as Hugging Face BERT with right padding); see
            ``SequentialBackbone.position_ids``.

    Call arguments:
        inputs: dict with ``item_ids`` int ``[batch, length]`` (left-padded) and
            optional ``padding_mask``; or the id tensor alone.
        training: dropout switch.

    Returns:
        ``[batch, length, hidden_dim]``: row ``i`` scores the item at slot ``i``.

    Example:

    >>> backbone = BERT4RecBackbone(num_items=20, max_sequence_length=6, hidden_dim=8)
    >>> backbone(keras.ops.convert_to_tensor([[0, 0, 3, 4, 5, 1]])).shape
    TensorShape([1, 6, 8])
    """

    def __init__(
        self,
        num_items,
        max_sequence_length=200,
        hidden_dim=64,
        num_layers=2,
        num_heads=2,
        intermediate_dim=None,
        dropout=0.1,
        activation="gelu",
        normalize_first=False,
        initializer_range=0.02,
        position_origin="newest",
        **kwargs,
    ):
        check_number("initializer_range", initializer_range, minimum=0, optional=True)
        super().__init__(
            num_items,
            max_sequence_length,
            hidden_dim,
            num_layers,
            num_heads,
            intermediate_dim,
            dropout,
            activation,
            normalize_first,
            position_origin=position_origin,
            **kwargs,
        )
        # === Layers ===
        init = functools.partial(_initializer, initializer_range)
        self.make_item_embeddings(init())
        self.position_embedding = keras.layers.Embedding(
            max_sequence_length, hidden_dim, embeddings_initializer=init(), name="position_embedding"
        )
        self.embedding_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="embedding_norm")
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.blocks = self.make_blocks(
            causal=False,
            default_intermediate_dim=4 * hidden_dim,
            layer_norm_epsilon=1e-12,
            kernel_initializer=init(True),
        )
        self.head_dense = keras.layers.Dense(
            hidden_dim, activation="gelu", kernel_initializer=init(True), name="head_dense"
        )
        self.head_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="head_norm")
        self.output_bias = self.add_weight(shape=(num_items,), initializer="zeros", name="output_bias")

        # === Config ===
        self.initializer_range = initializer_range
        self.build_weights()

    def call(self, inputs, training=None, return_attention_scores=False):
        ids, mask = self.unpack_inputs(inputs)
        x = self.with_context(self.lookup_items(ids), inputs, ids) + self.position_embedding(
            self.position_ids(mask)
        )
        x = self.embedding_dropout(self.embedding_norm(x), training=training)
        x, attention = self.run_blocks(x, mask, training, return_attention_scores)
        x = self.head_norm(self.head_dense(x))
        return (x, attention) if return_attention_scores else x

    def output_table(self, training=False):
        return self.item_table()[vocab.NUM_RESERVED :], self.output_bias

    def output_rows(self, training=False):
        return losses.ItemRows(self.item_table(), vocab.NUM_RESERVED), self.output_bias

    def get_config(self):
        config = super().get_config()
        config["initializer_range"] = self.initializer_range
        return config
