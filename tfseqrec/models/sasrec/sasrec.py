"""SASRec: its backbone with the next-item task."""

import keras

from tfseqrec.models.sasrec.backbone import SASRecBackbone
from tfseqrec.models.tasks import NextItemTask


@keras.saving.register_keras_serializable(package="tfseqrec")
class SASRec(NextItemTask):
    """Self-Attentive Sequential Recommendation: ``SASRecBackbone`` with the next-item task.

    Every position predicts the next item (``tfseqrec.models.tasks.NextItemTask``:
    the training loss, validation ranking, ``score``, ``recommend``); the network is the
    ``SASRecBackbone`` it holds (``model.backbone``), built from its arguments.

    Args:
        num_items, max_sequence_length, hidden_dim, num_layers, num_heads,
            intermediate_dim, dropout, activation, normalize_first,
            normalized_residual, initializer_range, position_origin: see
            ``SASRecBackbone``: the network it builds and holds (``model.backbone``).
        backbone: a ``SASRecBackbone`` to hold instead (then none of the above).
        loss: a ``tfseqrec.losses`` object or name; default full softmax without
            the other items of the position's sequence
            (``FullSoftmaxCrossEntropy(exclude_history=True)``: the model is not
            pushed to score already-seen items low, which ranking with seen items
            filtered never asks of it; best on ML-1M validation).
        loss_normalizer: see ``NextItemTask``.

    Example:

    >>> model = SASRec(num_items=20, max_sequence_length=5, hidden_dim=8)
    >>> ids, scores = model.recommend([[3, 4, 5]], k=2)
    >>> ids.shape
    (1, 2)

    Reference:
        Kang & McAuley, "Self-Attentive Sequential Recommendation", ICDM 2018.
    """

    backbone_cls = SASRecBackbone
