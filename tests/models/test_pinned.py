"""Pinned outputs of tiny seeded models: a silent numerical change fails here.

The values were recorded from this code (keras-hub pins its backbones'
``expected_partial_output`` the same way); what the models compute is checked
against independent references elsewhere (NumPy BERT, NumPy attention, hand-computed
losses). A deliberate change of the computation updates these numbers in the same
commit, saying why.
"""

import keras
import numpy as np

from tests.test_case import TestCase
from tfseqrec.models import BERT4Rec, RecformerBackbone, SASRec

WINDOW = np.array([[0, 0, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]])


def _seeded(make):
    keras.utils.set_random_seed(7)
    return make()


class PinnedOutputTest(TestCase):
    def test_sasrec_scores(self):
        model = _seeded(lambda: SASRec(num_items=12, max_sequence_length=6, hidden_dim=8, num_heads=2))
        self.assertAllClose(np.asarray(model.score(WINDOW))[:, :4], PINNED["sasrec"], atol=1e-4)

    def test_bert4rec_scores(self):
        model = _seeded(lambda: BERT4Rec(num_items=12, max_sequence_length=6, hidden_dim=8, num_heads=2))
        self.assertAllClose(np.asarray(model.score(WINDOW))[:, :4], PINNED["bert4rec"], atol=1e-4)

    def test_recformer_backbone_states(self):
        backbone = _seeded(lambda: RecformerBackbone(
            vocabulary_size=30, hidden_dim=8, num_layers=2, num_heads=2, intermediate_dim=16, max_tokens=8,
            max_sequence_length=3, attention_window=4,
        ))
        ids = np.array([[2, 5, 6, 7, 8, 9, 0, 0]])
        inputs = {"token_ids": ids, "token_type_ids": np.array([[0, 1, 2, 1, 2, 2, 0, 0]]),
                  "item_position_ids": np.array([[0, 1, 1, 2, 2, 2, 0, 0]]), "padding_mask": ids > 0}
        self.assertAllClose(np.asarray(backbone(inputs))[0, :2, :4], PINNED["recformer_backbone"], atol=1e-4)


PINNED = {
    "sasrec": [[-0.041618, -0.05520, 0.013828, 0.137564], [0.006148, -0.069850, -0.048586, 0.044733]],
    "bert4rec": [[-0.014692, 0.023123, -0.078252, 0.046712], [-0.014689, 0.023108, -0.078158, 0.046630]],
    "recformer_backbone": [[-1.593478, 0.658837, 0.474558, -0.537726], [0.236561, 0.276370, 0.584627, 1.940695]],
}
