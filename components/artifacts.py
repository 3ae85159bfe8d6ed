"""Artifact types tfseqrec adds to TFX."""

from tfx import types


class ItemVocabulary(types.Artifact):
    """The item vocabulary of a sequence dataset: ``item_vocab.tsv`` (raw id, count).

    Line ``i`` is vocabulary id ``i + tfseqrec.data.vocab.NUM_RESERVED``; items are
    ordered by interaction count, most frequent first.
    """

    TYPE_NAME = "tfseqrec.ItemVocabulary"


class Report(types.Artifact):
    """A report page of what models recommend (``tfseqrec report``): ``report.html``, one
    self-contained file, and ``report.json``, each model's metrics."""

    TYPE_NAME = "tfseqrec.Report"
