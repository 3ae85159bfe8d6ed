"""SASRec's backbone: causal self-attention over the item history (the sequence output)."""

import math

import keras
from keras import ops

from tfseqrec import losses
from tfseqrec.checks import check_number
from tfseqrec.data import vocab
from tfseqrec.models.base import SequentialBackbone


@keras.saving.register_keras_serializable(package="tfseqrec")
class SASRecBackbone(SequentialBackbone):
    """SASRec's network: item ids to the sequence output (no loss; ``SASRec`` trains it).

    Item embeddings (scaled by ``sqrt(hidden_dim)``) plus learnable position
    embeddings go through ``num_layers`` causal transformer blocks and a final layer
    norm. The blocks are those of the reference code (``normalized_residual=True``):
    the queries are layer-normalised, keys and values are not, each residual starts
    from the normalised input, and dropout falls on the attention weights and in the
    feed-forward layer. Embeddings and kernels start from ``N(0, initializer_range)``.
    Position ids count from the oldest item of the window (``position_origin``).
    Every position predicts the next item; scores are dot products with
    the same item embeddings (tied weights). Padding (id 0) is masked out of attention
    and its outputs are zeroed.

    Args:
        num_items: number of real items (ids ``NUM_RESERVED ..``).
        max_sequence_length: longest history the model reads (positions learned).
        hidden_dim: embedding and model width.
        num_layers: transformer blocks.
        num_heads: attention heads (the paper uses 1).
        intermediate_dim: feed-forward width; defaults to ``hidden_dim`` (the paper).
        dropout: dropout rate (0.2 for ML-1M in the paper; 0.1 in the full-softmax
            configuration of Klenitskiy & Vasilev, RecSys 2023).
        activation: feed-forward activation (``"relu"`` in the paper).
        normalize_first: pre-LN blocks (the paper) or post-LN.
        normalized_residual: the reference code's block (see above); ``False`` gives
            the textbook pre-LN block ``x + Attn(LN(x))`` with dropout on the
            attention output as well.
        initializer_range: standard deviation of the normal initializer of every
            embedding and kernel (biases start at 0); ``None`` for Keras defaults
            (Glorot kernels) and item embeddings of standard deviation 1 after the
            ``sqrt(hidden_dim)`` scaling.
        position_origin: ``"newest"``: the newest item always has position
            ``max_sequence_length - 1`` (the original code's left padding);
            ``"oldest"``: the oldest item of the window has position 0 (the reference
            code's right padding).
        attribute_shrinkage: with ``item_features``, an item of ``n`` training events
            weighs its attributes ``k / (k + n)`` against its id embedding
            (``SequentialBackbone.attribute_weights``); 0 weighs every item's fully.
    Call arguments:
        inputs: dict with ``item_ids`` int ``[batch, length]`` (left-padded, newest
            last) and optional ``padding_mask``; or the id tensor alone.
        training: dropout switch.

    Returns:
        Hidden states ``[batch, length, hidden_dim]``: row ``i`` predicts item ``i + 1``.

    Example:

    >>> backbone = SASRecBackbone(num_items=20, max_sequence_length=5, hidden_dim=8)
    >>> backbone(keras.ops.convert_to_tensor([[0, 0, 3, 4, 5]])).shape
    TensorShape([1, 5, 8])

    Reference:
        Kang & McAuley, "Self-Attentive Sequential Recommendation", ICDM 2018.
    """

    def __init__(
        self,
        num_items,
        max_sequence_length=200,
        hidden_dim=64,
        num_layers=2,
        num_heads=1,
        intermediate_dim=None,
        dropout=0.1,
        activation="relu",
        normalize_first=True,
        normalized_residual=True,
        initializer_range=0.02,
        position_origin="oldest",
        attribute_shrinkage=10.0,
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
            attribute_shrinkage=attribute_shrinkage,
            **kwargs,
        )
        # === Config ===
        self.normalized_residual = normalized_residual
        self.initializer_range = initializer_range

        # === Layers ===
        def init(stddev):
            return keras.initializers.RandomNormal(stddev=stddev)

        self.make_item_layers(init)
        self.position_embedding = keras.layers.Embedding(
            max_sequence_length,
            hidden_dim,
            embeddings_initializer=init(initializer_range or 0.02),
            name="position_embedding",
        )
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.blocks = self.make_blocks(
            causal=True,
            default_intermediate_dim=hidden_dim,
            layer_norm_epsilon=1e-8,
            normalized_residual=normalized_residual,
            attention_output_dropout=not normalized_residual,
            kernel_initializer=init(initializer_range) if initializer_range else "glorot_uniform",
        )
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-8, name="final_norm")

        self.build_weights()

    def call(self, inputs, training=None, return_attention_scores=False):
        ids, mask = self.unpack_inputs(inputs)
        # Scaled as the items' vectors are (embed_items).
        x = self.with_context(self.embed_items(ids, training), inputs, ids, math.sqrt(self.hidden_dim))
        return self.encode(x, mask, training, return_attention_scores)

    def encode(self, x, mask, training=None, return_attention_scores=False):
        """The encoder over item vectors ``x`` ``[batch, length, hidden_dim]`` (``call`` after the embedding)."""
        x += self.position_embedding(self.position_ids(mask))
        x = self.embedding_dropout(x, training=training) * ops.cast(mask[..., None], x.dtype)
        x, attention = self.run_blocks(x, mask, training, return_attention_scores)
        x = self.final_norm(x)
        return (x, attention) if return_attention_scores else x

    def make_item_layers(self, init):
        """Creates the layers that embed items (``init(stddev)`` gives an initializer)."""
        self.make_item_embeddings(init(self.initializer_range or self.hidden_dim**-0.5))

    def embed_items(self, ids, training=None):
        """Input vectors ``[..., hidden_dim]`` of item ids (scaled by ``sqrt(hidden_dim)``)."""
        return self.lookup_items(ids) * math.sqrt(self.hidden_dim)

    def output_table(self, training=False):
        return self.item_table()[vocab.NUM_RESERVED :], None

    def output_rows(self, training=False):
        return losses.ItemRows(self.item_table(), vocab.NUM_RESERVED), None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "normalized_residual": self.normalized_residual,
                "initializer_range": self.initializer_range,
            }
        )
        return config
