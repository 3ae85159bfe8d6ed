"""BERT4Rec: its backbone with the Cloze task."""

import keras

from tfseqrec.models.bert4rec.backbone import BERT4RecBackbone
from tfseqrec.models.tasks import ClozeTask


@keras.saving.register_keras_serializable(package="tfseqrec")
class BERT4Rec(ClozeTask):
    """Bidirectional Encoder Representations from Transformer for recommendation.

    The Cloze task (``tfseqrec.models.tasks.ClozeTask``) holding ``BERT4RecBackbone`` (the network).
    Training uses the Cloze task: when ``fit`` gets batches without labels, the
    model masks them itself inside the compiled training step with its
    ``ClozePreprocessor`` (``mask_prob`` of the items; 80% [MASK], 10% random, 10%
    kept; fresh each step), and the loss covers masked positions only. At inference
    the last ``max_sequence_length - 1`` items get a [MASK] appended, and the scores
    of that last position rank the next item.

    Args:
        The network's, as ``BERT4RecBackbone`` takes them (``num_items``,
        ``max_sequence_length`` including the inference [MASK], ``hidden_dim``,
        ``num_layers``, ``num_heads``, ``intermediate_dim``, ``dropout``,
        ``activation``, ``normalize_first``, ``initializer_range``,
        ``position_origin``; or ``backbone``, a ``BERT4RecBackbone`` to hold, as
        ``model.backbone``); the masking's, as ``ClozeTask`` takes them
        (``mask_prob``, 0.2 for ML-1M in the paper; ``mask_token_rate``, 0.8 as in
        BERT where the original BERT4Rec code uses 1.0; ``random_token_rate``, 0.1
        where the original code uses 0.0; ``last_item_only_prob``, the original
        code's extra last-item samples; ``seed``); and the task's ``loss``: a
        ``tfseqrec.losses`` object or name, by default the full softmax without the
        sequence's other items (``FullSoftmaxCrossEntropy(exclude_history=True)``, as
        SASRec's; best on ML-1M validation: 0.0874 against 0.0807 after 10 minutes).

    Example:

    >>> model = BERT4Rec(num_items=20, max_sequence_length=6, hidden_dim=8)
    >>> model.score([[0, 0, 3, 4, 5, 6]]).shape
    TensorShape([1, 20])

    Reference:
        Sun et al., "BERT4Rec: Sequential Recommendation with Bidirectional Encoder
        Representations from Transformer", CIKM 2019.
    """

    backbone_cls = BERT4RecBackbone
