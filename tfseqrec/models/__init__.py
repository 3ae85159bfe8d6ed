"""The models: SASRec and BERT4Rec (item ids), Recformer (item text)."""

from tfseqrec.models.base import SequentialRecommender, exclude_items
from tfseqrec.models.bert4rec import BERT4Rec
from tfseqrec.models.recformer import Recformer, RecformerRecommender
from tfseqrec.models.sasrec import SASRec

# The id models `tfseqrec.training` builds by name.
MODELS = {"sasrec": SASRec, "bert4rec": BERT4Rec}
