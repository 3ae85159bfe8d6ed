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

from tfseqrec.data import readers, synthetic

# Where a synthetic dataset's log is written the first time it is asked for.
CACHE = os.environ.get("TFSEQREC_CACHE", os.path.expanduser("~/.cache/tfseqrec/synthetic"))


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One dataset of the benchmarks.

    ``interactions``: the interaction file under the data root. ``protocol``: the name of
    its evaluation protocol in ``benchmarks/README.md``. ``item_text``: the items' text
    under the data root, or ``None`` where it is written from another file (ML-1M:
    ``ml1m_texts`` maps ``movies.dat`` to ``ml-1m.txt``'s ids). ``attributes``:
    the attribute set of ``tfseqrec.data.text.ATTRIBUTES`` its text is read with.
    """

    interactions: str
    protocol: str
    item_text: str | None
    attributes: str
    synthetic: dict = None  # tfseqrec.data.synthetic.generate's arguments: a log written, not read

    def path(self, data_root):
        """The interaction file under ``data_root``; a synthetic log's under ``CACHE``, written once."""
        if self.synthetic is None:
            return os.path.join(data_root, self.interactions)
        path = os.path.join(CACHE, self.interactions)
        if not os.path.exists(path):
            os.makedirs(CACHE, exist_ok=True)
            synthetic.write_csv(synthetic.generate(**self.synthetic), path + ".tmp")
            os.replace(path + ".tmp", path)
        return path

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
    # An Amazon catalogue's shape, which nobody tuned on: 54,000 items, 350,000 events, 50,000
    # users (7 events each on average, at least 5), popular items by Zipf's law.
    "synthetic-amazon": Dataset(
        "synthetic-amazon.csv",
        "synthetic-amazon",
        None,
        "none",
        synthetic={"num_events": 350_000, "num_items": 54_000, "num_users": 50_000, "seed": 0},
    ),
}


def get(name):
    """The dataset called ``name``; an error naming the known ones otherwise."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    return DATASETS[name]


def ml1m_texts(root):
    """ML-1M's titles and genres under ``ml-1m.txt``'s ids (what ``tfseqrec data item-text`` writes)."""
    ml1m = os.path.join(root, "ml-1m")
    to_original = readers.read_id_map(os.path.join(ml1m, "sas_to_original_items.txt"))
    movies = readers.read_item_text(os.path.join(ml1m, "movies.dat"))
    return {sas: movies[original] for sas, original in to_original.items() if original in movies}
