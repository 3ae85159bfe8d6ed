"""tfseqrec: transformer sequential recommenders (SASRec, BERT4Rec, Recformer) in Keras."""

__version__ = "0.1.0"

from tfseqrec import data  # noqa: E402
