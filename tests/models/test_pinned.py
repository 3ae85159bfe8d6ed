"""Pinned outputs of tiny seeded models: a silent numerical change fails here.

The values were recorded from this code (keras-hub pins its backbones'
``expected_partial_output`` the same way); what the models compute is checked
against independent references elsewhere (NumPy BERT, NumPy attention, hand-computed
losses). A deliberate change of the computation updates these numbers in the same
commit, saying why.
"""

import keras
import numpy as np

from tests.test_case import TestCase, set_numpy_weights
from tfseqrec.models import BERT4Rec, RecformerBackbone, SASRec

WINDOW = np.array([[0, 0, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]])


def _seeded(make):
    """The model with every weight drawn from NumPy (Keras versions draw initial weights differently)."""
    keras.utils.set_random_seed(7)
    model = make()
    if not model.built:
        model.build()
    set_numpy_weights(model)
    return model


class PinnedOutputTest(TestCase):
    def test_sasrec_scores(self):
        model = _seeded(lambda: SASRec(num_items=12, max_sequence_length=6, hidden_dim=8, num_heads=2))
        self.assertAllClose(np.asarray(model.score(WINDOW))[:, :4], PINNED["sasrec"], atol=1e-4)

    def test_bert4rec_scores(self):
        model = _seeded(lambda: BERT4Rec(num_items=12, max_sequence_length=6, hidden_dim=8, num_heads=2))
        self.assertAllClose(np.asarray(model.score(WINDOW))[:, :4], PINNED["bert4rec"], atol=1e-4)

    def test_recformer_backbone_states(self):
        backbone = _seeded(
            lambda: RecformerBackbone(
                vocabulary_size=30,
                hidden_dim=8,
                num_layers=2,
                num_heads=2,
                intermediate_dim=16,
                max_tokens=8,
                max_sequence_length=3,
                attention_window=4,
            )
        )
        ids = np.array([[2, 5, 6, 7, 8, 9, 0, 0]])
        inputs = {
            "token_ids": ids,
            "token_type_ids": np.array([[0, 1, 2, 1, 2, 2, 0, 0]]),
            "item_position_ids": np.array([[0, 1, 1, 2, 2, 2, 0, 0]]),
            "padding_mask": ids > 0,
        }
        self.assertAllClose(np.asarray(backbone(inputs))[0, :2, :4], PINNED["recformer_backbone"], atol=1e-4)


PINNED = {
    "sasrec": [[-0.136534, 0.128878, 0.275082, -0.038490], [-0.136664, 0.130508, 0.283596, -0.028469]],
    "bert4rec": [[0.309146, 0.137210, -0.102148, 0.353729], [0.309393, 0.137651, -0.102060, 0.353625]],
    "recformer_backbone": [
        [0.549945, -0.107217, -0.167814, -0.060228],
        [0.502971, -0.108174, -0.346994, -0.035148],
    ],
}
