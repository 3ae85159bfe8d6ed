"""UniSRec: ``UniSRecBackbone`` (the network), ``UniSRec`` (it with the next-item task) and
``UniSRecPretrainer`` (its contrastive pre-training)."""

from tfseqrec.models.unisrec.backbone import UniSRecBackbone
from tfseqrec.models.unisrec.pretrainer import UniSRecPretrainer
from tfseqrec.models.unisrec.unisrec import UniSRec
