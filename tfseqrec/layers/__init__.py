"""Keras layers of tfseqrec: one public layer per file."""

from tfseqrec.layers.transformer_block import TransformerBlock
