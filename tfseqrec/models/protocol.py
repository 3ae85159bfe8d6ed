"""The model contract: what evaluation, recommendation and export read of a model.

Every model a ``tfseqrec.kinds`` kind builds or loads (``SequentialRecommender``
subclasses: SASRec, BERT4Rec, HSTU, UniSRec; and ``RecformerRecommender``) has these
attributes itself; nothing is attached to a model from outside.
``tests/models/test_protocol.py`` checks each kind's model against it.
"""

import typing


@typing.runtime_checkable
class SequentialModel(typing.Protocol):
    """A next-item model over histories of vocabulary ids.

    Attributes:
        num_items: items it scores (vocabulary ids ``NUM_RESERVED ..``).
        max_sequence_length: items of history it reads (the newest ones).
        uses_timestamps: its inputs carry event times beside the ids (``{"item_ids",
            "timestamps"}``), as HSTU's with a time bias do.
    """

    num_items: int
    max_sequence_length: int
    uses_timestamps: bool

    def score(self, inputs):
        """Float32 scores ``[batch, num_items]`` of every item as the next one.

        ``inputs``: left-padded ids ``[batch, max_sequence_length]`` (newest last), or a
        dict with ``item_ids`` (and ``timestamps`` when ``uses_timestamps``).
        """

    def recommend(self, histories, k=10, exclude_seen=True, batch_size=256):
        """``(ids [batch, k], scores [batch, k])``: the top ``k`` next items of id histories."""
