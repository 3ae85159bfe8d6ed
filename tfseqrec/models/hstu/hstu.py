"""HSTU: its backbone with the next-item task."""

import keras

from tfseqrec.models.hstu.backbone import HSTUBackbone
from tfseqrec.models.tasks import NextItemTask


@keras.saving.register_keras_serializable(package="tfseqrec")
class HSTU(NextItemTask):
    """Hierarchical Sequential Transduction Units: ``HSTUBackbone`` with the next-item task.

    Every position predicts the next item (``tfseqrec.models.tasks.NextItemTask``:
    the training loss, validation ranking, ``score``, ``recommend``); the network,
    its sizes (the reference ML-1M configuration) and arguments are ``HSTUBackbone``'s,
    which it holds (``model.backbone``).
    The loss is the full softmax without the sequence's other items, as the other id
    models'; the paper's sampled softmax
    (``SampledSoftmaxCrossEntropy(num_negatives=128, per_position=True)``,
    logQ-corrected) is for catalogues too large to score whole.

    Args:
        num_items, max_sequence_length, hidden_dim, num_layers, num_heads,
            attention_dim, linear_dim, dropout, relative_position_bias,
            num_time_buckets, attention, temperature, initializer_range,
            position_origin: see ``HSTUBackbone``: the network it builds and holds
            (``model.backbone``).
        backbone: an ``HSTUBackbone`` to hold instead (then none of the above).
        loss: a ``tfseqrec.losses`` object or name; default full softmax without
            the sequence's other items (``FullSoftmaxCrossEntropy(exclude_history=True)``).
        loss_normalizer: see ``NextItemTask``.

    Example:

    >>> model = HSTU(num_items=20, max_sequence_length=5, hidden_dim=8, num_layers=2)
    >>> ids, scores = model.recommend([[3, 4, 5]], k=2)
    >>> ids.shape
    (1, 2)

    Reference:
        Zhai et al., "Actions Speak Louder than Words: Trillion-Parameter Sequential
        Transducers for Generative Recommendations", ICML 2024.
    """

    backbone_cls = HSTUBackbone
