"""The models: SASRec, BERT4Rec and HSTU (item ids), Recformer (item text), UniSRec (both).

Which model a ``--model`` name builds is decided in ``tfseqrec.kinds``.
"""

from tfseqrec.models.base import SequentialRecommender, exclude_items
from tfseqrec.models.bert4rec import BERT4Rec
from tfseqrec.models.hstu import HSTU
from tfseqrec.models.recformer import (
    Recformer,
    RecformerAligner,
    RecformerBackbone,
    RecformerPretrainer,
    RecformerRecommender,
)
from tfseqrec.models.sasrec import SASRec
from tfseqrec.models.sentence_encoder import SentenceEncoder
from tfseqrec.models.unisrec import UniSRec, UniSRecPretrainer
