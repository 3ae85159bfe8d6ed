"""Recformer (Li et al., KDD 2023): the backbone, its tasks, the serving recommender, weight conversion."""

from tfseqrec.models.recformer.backbone import RecformerBackbone
from tfseqrec.models.recformer.convert import load_bert_weights, minilm_path
from tfseqrec.models.recformer.recommender import RecformerRecommender, item_token_states, pack_inputs
from tfseqrec.models.recformer.tasks import Recformer, RecformerAligner, RecformerPretrainer
