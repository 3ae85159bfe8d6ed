"""UniSRec: its backbone (item text through an adaptor into SASRec's encoder) with the next-item task."""

import keras

from tfseqrec.models.tasks import NextItemTask
from tfseqrec.models.unisrec.backbone import UniSRecBackbone


@keras.saving.register_keras_serializable(package="tfseqrec")
class UniSRec(NextItemTask):
    """Universal Sequence Representation: item text in, SASRec's encoder on top.

    The next-item task (``tfseqrec.models.tasks.NextItemTask``) holding
    ``UniSRecBackbone`` (the network, ``model.backbone``; ``backbone=`` gives one to hold
    instead of its arguments).

    Each item has a frozen text vector (``text_embeddings``: the mean-pooled output of
    a pretrained sentence encoder over the item's text, computed once, for example by
    ``tfseqrec.models.SentenceEncoder``). A ``MoEAdaptor`` (parametric whitening
    experts under a softmax gate) maps it to the model width; with
    ``use_id_embeddings`` a learned id embedding is added (the paper's transductive
    setting; without it the model is inductive: an item is its text only, so an item
    added later by its text alone is scored like any other). With id embeddings, an
    item the training data never showed (``set_trained_items``) or one added later by
    its text has none: it is scored by its text alone, as a text-only model scores
    it; ``id_dropout`` drops the id part of a share of the items in training, so that
    the text alone ranks well. Position embeddings and
    SASRec's causal blocks follow; the sequence vector at each position and the item
    vectors are L2-normalised and their dot product divided by ``temperature``
    (UniSRec's fine-tuning score). Input and output item vectors are the same.

    Everything else is ``SASRec``'s: training on every position with the model's loss
    (default: full softmax without the sequence's other items), validation, scoring,
    recommending, export. The text table is a non-trainable weight: it is saved with
    the model, and the adaptor and encoder train over it.

    Args:
        num_items: number of real items (ids ``NUM_RESERVED ..``).
        text_dim: width of the text vectors (all-MiniLM-L6-v2: 384).
        num_experts: adaptor experts (the paper: 8).
        adaptor_dropout: dropout of each expert's input (the paper: 0.2).
        use_id_embeddings: add a learned id embedding to each adapted text vector.
        id_dropout: with id embeddings, the probability that an item occurrence (an
            input item, or a row of the output table) is read by its text alone in a
            training step (0: never).
        temperature: divides the cosine scores (the paper: 0.07); ``None`` scores by
            the plain dot product, as SASRec.
        text_encoder: how the text vectors were made, for items added later by their
            text and for the export's text signatures: ``{"attributes": [...],
            "max_attribute_tokens": int, "num_layers": int}`` of
            ``SentenceEncoder.from_pretrained`` (``None``: vectors from elsewhere).
        text_embeddings: optional float ``[num_items, text_dim]`` text vectors of ids
            ``NUM_RESERVED ..`` (not part of the config: saved as a weight); set later
            with ``set_text_embeddings``.
        **kwargs: ``SASRec``'s arguments (``max_sequence_length``, ``hidden_dim``,
            ``num_layers``, ``num_heads``, ``dropout``, ``loss``, ...).

    Call arguments:
        inputs: dict with ``item_ids`` int ``[batch, length]`` (newest last) and
            optional ``padding_mask``; or the id tensor alone.
        training: dropout switch.

    Returns:
        ``[batch, length, hidden_dim]``: row ``i`` predicts item ``i + 1`` (normalised
        and divided by ``temperature`` when it is set).

    Example:

    >>> import numpy as np
    >>> text = np.random.default_rng(0).normal(size=(20, 6)).astype("float32")
    >>> model = UniSRec(num_items=20, text_dim=6, max_sequence_length=5, hidden_dim=8, text_embeddings=text)
    >>> ids, scores = model.recommend([[3, 4, 5]], k=2)
    >>> ids.shape
    (1, 2)

    Reference:
        Hou et al., "Towards Universal Sequence Representation Learning for
        Recommender Systems", KDD 2022.
    """

    backbone_cls = UniSRecBackbone

    def resized(self, num_items, text_embeddings):
        """A copy over ``num_items`` items: the first ones keep their weights
        (``UniSRecBackbone.resized``); the task's options stay."""
        return self.with_backbone(self.backbone.resized(num_items, text_embeddings))

    def for_catalogue(self, text_embeddings, text_encoder=None):
        """This model over another catalogue, known by its items' text alone
        (``UniSRecBackbone.for_catalogue``); the task's options stay."""
        return self.with_backbone(self.backbone.for_catalogue(text_embeddings, text_encoder))

    def load_shared_weights(self, other):
        """Copies every weight of ``other`` (a UniSRec) but the item tables; returns how many
        (``UniSRecBackbone.load_shared_weights``)."""
        return self.backbone.load_shared_weights(getattr(other, "backbone", other))
