"""HSTU: ``HSTUBackbone`` (the network) and ``HSTU`` (it with the next-item task)."""

from tfseqrec.models.hstu.backbone import HSTUBackbone
from tfseqrec.models.hstu.hstu import HSTU
