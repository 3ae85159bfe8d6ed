"""The datasets the benchmarks read, each named once: its files under the data root, its protocol, its text.

``benchmarks/defaults.py`` runs the id models on each, ``benchmarks/transfer.py`` moves
text models to two of them, ``benchmarks/text.py`` trains on ML-1M's titles; each reads
the paths from here, so a file that moves is changed in one place. The data root is
``$TFSEQREC_DATA`` (default ``../shared/data``); MovieLens may not be redistributed, so
the files are never copied into the project (``tfseqrec data download`` fetches them).
"""

import dataclasses
import os

import protocols  # benchmarks/protocols.py


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One dataset of the benchmarks.

    ``interactions``: the interaction file under the data root. ``protocol``: the name of
    its evaluation protocol in ``benchmarks/README.md``. ``item_text``: the items' text
    under the data root, or ``None`` where it is written from another file (ML-1M:
    ``text.ml1m_item_text`` maps ``movies.dat`` to ``ml-1m.txt``'s ids). ``attributes``:
    the attribute set of ``tfseqrec.data.text.ATTRIBUTES`` its text is read with.
    """

    interactions: str
    protocol: str
    item_text: str | None
    attributes: str

    def path(self, data_root):
        """The interaction file under ``data_root``."""
        return os.path.join(data_root, self.interactions)

    def item_text_path(self, data_root):
        """The item-text file under ``data_root``; an error for a dataset whose text is written."""
        if self.item_text is None:
            raise ValueError(f"{self.interactions}'s item text is written from another file, not read")
        return os.path.join(data_root, self.item_text)


DATASETS = {
    "ml-100k": Dataset("ml-100k/u.data", "ml100k", "ml-100k/u.item", "movielens"),
    "ml-1m": Dataset(protocols.get("sasrec-plus").data_file, "sasrec-plus", None, "movielens"),
    "scientific": Dataset(
        "amazon-scientific-text/Scientific.inter.json",
        "scientific",
        "amazon-scientific-text/Scientific.item.json",
        "amazon",
    ),
}


def get(name):
    """The dataset called ``name``; an error naming the known ones otherwise."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    return DATASETS[name]
