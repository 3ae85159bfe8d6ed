"""HSTU's backbone: stacked gated pointwise-attention layers over the item history (the sequence output)."""

import math

import keras
from keras import ops

from tfseqrec import losses
from tfseqrec.checks import check_choice, check_number
from tfseqrec.data import vocab
from tfseqrec.layers import HSTULayer
from tfseqrec.models.base import SequentialBackbone, l2_normalize


@keras.saving.register_keras_serializable(package="tfseqrec")
class HSTUBackbone(SequentialBackbone):
    """HSTU's network: item ids to the sequence output (no loss; ``HSTU`` trains it).

    Item embeddings (scaled by ``sqrt(hidden_dim)``) plus learned absolute position
    embeddings, dropout, then ``num_layers`` causal ``HSTULayer``s (gated pointwise
    attention with a relative position bias; no feed-forward network). The output at
    each position and the item embeddings are L2-normalised and their dot product is
    divided by ``temperature``: items are scored by cosine similarity, as in the
    reference code (``L2NormEmbeddingPostprocessor``). Every position predicts the
    next item; padding (id 0) is masked out of attention and its outputs are zeroed.

    Sizes are the reference ML-1M configuration (HSTU-large of the paper): width 50,
    8 layers, 2 heads of 25, dropout 0.2, temperature 0.05. The loss is the full
    softmax without the sequence's other items, as the other id models'; the paper's
    sampled softmax (``SampledSoftmaxCrossEntropy(num_negatives=128, per_position=True)``,
    logQ-corrected) is for catalogues too large to score whole; on ML-1M it learned
    less per epoch (a GPU probe: validation NDCG@10 0.161 after 40 epochs against 0.188).

    Args:
        num_items: number of real items (ids ``NUM_RESERVED ..``).
        max_sequence_length: longest history the model reads (``N`` of the
            attention's normaliser, positions learned).
        hidden_dim: embedding and model width ``d``.
        num_layers: HSTU layers.
        num_heads: attention heads.
        attention_dim: ``Q``/``K`` width per head (default ``hidden_dim // num_heads``).
        linear_dim: ``U``/``V`` width per head (default ``hidden_dim // num_heads``).
        dropout: dropout of the input embeddings and inside each layer.
        relative_position_bias: each layer learns a bias per relative position.
        num_time_buckets: time buckets of each layer's relative time bias; 0 for
            none. With a time bias every input must carry ``timestamps`` (the
            trainer turns it on, 128 buckets, when the data has event times).
        attention: ``"silu"`` (HSTU's pointwise attention, normalised by
            ``max_sequence_length``) or ``"softmax"``.
        temperature: divides the cosine scores; ``None`` scores by the plain dot
            product of un-normalised vectors.
        initializer_range: standard deviation of the item and position embeddings'
            normal initializer. The layers' kernels are Glorot; the reference draws
            its ``W_uvqk`` from N(0, 0.02).
        position_origin: ``"oldest"`` (the reference) or ``"newest"``; see
            ``SequentialBackbone.position_ids``.
    Call arguments:
        inputs: dict with ``item_ids`` int ``[batch, length]`` (left-padded, newest
            last), optional ``padding_mask`` and optional ``timestamps`` (seconds,
            ``[batch, length]``; needs ``num_time_buckets``); or the id tensor alone.
        training: dropout switch.

    Returns:
        ``[batch, length, hidden_dim]``: row ``i`` predicts item ``i + 1``
        (normalised and divided by ``temperature`` when it is set).

    Example:

    >>> backbone = HSTUBackbone(num_items=20, max_sequence_length=5, hidden_dim=8, num_layers=2)
    >>> backbone(keras.ops.convert_to_tensor([[0, 0, 3, 4, 5]])).shape
    TensorShape([1, 5, 8])

    Reference:
        Zhai et al., "Actions Speak Louder than Words: Trillion-Parameter Sequential
        Transducers for Generative Recommendations", ICML 2024.
    """

    def __init__(
        self,
        num_items,
        max_sequence_length=200,
        hidden_dim=50,
        num_layers=8,
        num_heads=2,
        attention_dim=None,
        linear_dim=None,
        dropout=0.2,
        relative_position_bias=True,
        num_time_buckets=0,
        attention="silu",
        temperature=0.05,
        initializer_range=0.02,
        position_origin="oldest",
        **kwargs,
    ):
        for name, value in (("attention_dim", attention_dim), ("linear_dim", linear_dim)):
            check_number(name, value, minimum=1, integer=True, optional=True)
        check_number("num_time_buckets", num_time_buckets, minimum=0, integer=True)
        check_choice("attention", attention, ("silu", "softmax"))
        check_number("temperature", temperature, minimum=0, exclusive_minimum=True, optional=True)
        check_number("initializer_range", initializer_range, minimum=0, optional=True)
        if hidden_dim % num_heads and (attention_dim is None or linear_dim is None):
            raise ValueError(
                f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}; "
                "give attention_dim and linear_dim"
            )
        super().__init__(
            num_items,
            max_sequence_length,
            hidden_dim,
            num_layers,
            num_heads,
            None,
            dropout,
            "silu",
            True,
            position_origin=position_origin,
            **kwargs,
        )
        # === Config ===
        self.attention_dim = attention_dim
        self.linear_dim = linear_dim
        self.relative_position_bias = relative_position_bias
        self.num_time_buckets = num_time_buckets
        self.attention = attention
        self.temperature = temperature
        self.initializer_range = initializer_range

        # === Layers ===
        self.make_layers()
        self.build_weights()

    def example_inputs(self):
        inputs = super().example_inputs()
        inputs = dict(inputs) if isinstance(inputs, dict) else {"item_ids": inputs}
        if self.num_time_buckets:
            inputs["timestamps"] = ops.zeros((1, self.max_sequence_length), "int64")
        return inputs

    @property
    def uses_timestamps(self):
        """Whether the inputs must carry ``timestamps`` (a model with a time bias)."""
        return bool(self.num_time_buckets)

    def make_layers(self):
        """Item and position embeddings and the ``num_layers`` HSTU layers."""
        d, length = self.hidden_dim, self.max_sequence_length
        self.make_item_embeddings(keras.initializers.TruncatedNormal(stddev=self.initializer_range))
        self.position_embedding = keras.layers.Embedding(
            length,
            d,
            # The reference: truncated normal of standard deviation sqrt(1 / d).
            embeddings_initializer=keras.initializers.TruncatedNormal(stddev=math.sqrt(1.0 / d)),
            name="position_embedding",
        )
        self.embedding_dropout = keras.layers.Dropout(self.dropout)
        per_head = d // self.num_heads
        self.blocks = [
            HSTULayer(
                self.num_heads,
                self.attention_dim or per_head,
                self.linear_dim or per_head,
                length,
                dropout=self.dropout,
                relative_position_bias=self.relative_position_bias,
                num_time_buckets=self.num_time_buckets,
                attention=self.attention,
                name=f"block_{i}",
            )
            for i in range(self.num_layers)
        ]

    def call(self, inputs, training=None, return_attention_scores=False):
        ids, mask = self.unpack_inputs(inputs)
        timestamps = inputs.get("timestamps") if isinstance(inputs, dict) else None
        if timestamps is not None and not self.num_time_buckets:
            raise ValueError("timestamps given to an HSTU without time buckets (num_time_buckets=0)")
        if timestamps is None and self.num_time_buckets:
            # Without them the time bias would silently drop out: scores unlike the trained model's.
            raise ValueError(
                f"this HSTU has a time bias (num_time_buckets={self.num_time_buckets}): "
                "its inputs need 'timestamps' (seconds, aligned with 'item_ids')"
            )
        x = self.with_context(self.lookup_items(ids), inputs, ids) * math.sqrt(self.hidden_dim)
        x += self.position_embedding(self.position_ids(mask))
        x = self.embedding_dropout(x, training=training) * ops.cast(mask[..., None], x.dtype)
        # The mask and the time buckets are the same in every layer: computed once.
        first = self.blocks[0]
        mask_bias = first.attention_mask_bias(mask, ops.shape(ids)[1])
        buckets = None if timestamps is None else first.time_buckets(timestamps)
        attention = []
        for block in self.blocks:
            out = block(
                x,
                padding_mask=mask,
                training=training,
                return_attention_scores=return_attention_scores,
                attention_mask_bias=mask_bias,
                time_buckets=buckets,
            )
            if return_attention_scores:
                out, scores = out
                attention.append(scores)
            x = out
        if self.temperature is not None:
            x = l2_normalize(x) / self.temperature
        return (x, attention) if return_attention_scores else x

    def output_table(self, training=False):
        return self.output_rows(training)[0].dense(), None

    def output_rows(self, training=False):
        normalize = None
        if self.temperature is not None:
            normalize = l2_normalize
        return losses.ItemRows(self.item_table(), vocab.NUM_RESERVED, normalize), None

    def get_config(self):
        config = super().get_config()
        for name in ("intermediate_dim", "activation", "normalize_first"):
            config.pop(name)
        config.update(
            {
                "attention_dim": self.attention_dim,
                "linear_dim": self.linear_dim,
                "relative_position_bias": self.relative_position_bias,
                "num_time_buckets": self.num_time_buckets,
                "attention": self.attention,
                "temperature": self.temperature,
                "initializer_range": self.initializer_range,
            }
        )
        return config
