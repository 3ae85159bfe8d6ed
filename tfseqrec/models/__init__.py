"""The models: SASRec and BERT4Rec (Recformer to come)."""

from tfseqrec.models.base import SequentialRecommender, exclude_items
from tfseqrec.models.bert4rec import BERT4Rec
from tfseqrec.models.sasrec import SASRec

MODELS = {"sasrec": SASRec, "bert4rec": BERT4Rec}
