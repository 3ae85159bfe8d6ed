"""Keras layers of tfseqrec: one public layer per file."""

from tfseqrec.layers.event_embedding import EventEmbedding
from tfseqrec.layers.hstu_layer import HSTULayer
from tfseqrec.layers.item_feature_embedding import ItemFeatureEmbedding
from tfseqrec.layers.moe_adaptor import MoEAdaptor
from tfseqrec.layers.recformer_embedding import RecformerEmbedding
from tfseqrec.layers.transformer_block import TransformerBlock
from tfseqrec.layers.windowed_attention import WindowedSelfAttention
from tfseqrec.layers.windowed_transformer_block import WindowedTransformerBlock
