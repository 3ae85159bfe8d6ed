"""SASRec: ``SASRecBackbone`` (the network) and ``SASRec`` (it with the next-item task)."""

from tfseqrec.models.sasrec.backbone import SASRecBackbone
from tfseqrec.models.sasrec.sasrec import SASRec
