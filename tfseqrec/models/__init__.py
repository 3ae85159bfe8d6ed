"""The models: SASRec, BERT4Rec and HSTU (item ids), Recformer (item text), UniSRec (both).

Each id model is a task (``tasks.NextItemTask``, ``tasks.ClozeTask``) holding its backbone
(``SASRecBackbone``, ...: the sequence output), as keras-hub splits them; one package
per model (``sasrec/``: ``backbone.py``, ``sasrec.py``, ``presets.py``).

Which model a ``--model`` name builds is decided in ``tfseqrec.kinds``.
"""

from tfseqrec.models.base import SequentialBackbone, SequentialRecommender, exclude_items
from tfseqrec.models.bert4rec import BERT4Rec, BERT4RecBackbone
from tfseqrec.models.hstu import HSTU, HSTUBackbone
from tfseqrec.models.recformer import (
    Recformer,
    RecformerAligner,
    RecformerBackbone,
    RecformerPretrainer,
    RecformerRecommender,
)
from tfseqrec.models.sasrec import SASRec, SASRecBackbone
from tfseqrec.models.sentence_encoder import SentenceEncoder
from tfseqrec.models.tasks import ClozeTask, NextItemTask
from tfseqrec.models.unisrec import UniSRec, UniSRecBackbone, UniSRecPretrainer
