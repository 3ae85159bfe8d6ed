"""BERT4Rec: ``BERT4RecBackbone`` (the network) and ``BERT4Rec`` (it with the Cloze task)."""

from tfseqrec.models.bert4rec.backbone import BERT4RecBackbone
from tfseqrec.models.bert4rec.bert4rec import BERT4Rec
