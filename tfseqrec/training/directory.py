"""Model directories: written whole or not at all, resumed when unfinished, read back.

A run works in ``OUTPUT.partial/`` and becomes ``OUTPUT/`` only when it completes
(``output_directory``); ``read`` loads a finished one. Every model kind writes:

    model.keras        the model (best weights by validation NDCG@10)
    item_vocab.tsv     the item vocabulary (raw ids <-> ids)
    <kind>_config.json the options and the data it was trained on
    history.csv        per-epoch loss and validation metrics

and the kinds that read item text also keep it (``item_text.json``,
``write_item_text`` / ``read_item_text``).
"""

import contextlib
import json
import os
import shutil
import sys

import keras

# Registers the model, layer and loss classes that ``read`` loads; newer Keras does not
# import modules named in a saved file by itself.
import tfseqrec.models  # noqa: F401
from tfseqrec.data import vocab as vocab_lib

MODEL_FILE = "model.keras"
BACKUP_DIR = "backup"
PARTIAL_SUFFIX = ".partial"
TEXT_FILE = "item_text.json"
RUN_FILES = (
    "train_config.json",
    "recformer_config.json",
    "pretrain_config.json",
)  # what marks a tfseqrec model directory


@contextlib.contextmanager
def output_directory(output_dir, record, overwrite=False, config_file=RUN_FILES[0]):
    """The directory a run writes to, moved to ``output_dir`` when the run completes.

    A run works in ``output_dir + ".partial"`` and replaces ``output_dir`` only when
    the ``with`` block finishes without an exception, so a failed or killed run never
    leaves a model beside another run's vocabulary or config.

    - ``output_dir`` non-empty: refused unless ``overwrite`` (a finished model, or
      files that are not a tfseqrec model directory at all); with ``overwrite`` the
      old contents stay until the new run completes.
    - ``output_dir + ".partial"`` holding an unfinished run (a backup of at least one
      finished epoch): resumed when its ``record`` (the options and the data) is the
      same; refused when it differs, naming the differences, unless ``overwrite``
      (which starts over). A partial directory with no finished epoch starts over.

    Args:
        output_dir: the model directory.
        record: ``{"config": {...}, "data": path}``: what must match to resume.
        overwrite: replace a finished model or an unfinished run of other options.
        config_file: the run's JSON file inside the directory.

    Yields:
        The working directory.
    """
    output_dir = os.path.normpath(output_dir)
    work = output_dir + PARTIAL_SUFFIX
    if _non_empty(output_dir) and not overwrite:
        if _is_run(output_dir):
            raise FileExistsError(
                f"{output_dir} already holds a trained model; pass --overwrite to replace it "
                "(it stays in place until the new run completes)"
            )
        raise FileExistsError(
            f"{output_dir} is not empty and is not a tfseqrec model directory; choose another "
            "--output, or pass --overwrite to replace its contents"
        )
    if _non_empty(work):
        if not _is_run(work):
            raise FileExistsError(f"{work} is not an unfinished tfseqrec run; move it away or remove it")
        try:
            with open(os.path.join(work, config_file)) as f:
                previous = json.load(f)
        except (OSError, ValueError):  # killed while writing it: nothing to resume
            previous = None
        differences = [] if previous is None else _differences(previous, record)
        resumable = previous is not None and os.path.isdir(os.path.join(work, BACKUP_DIR))
        if resumable and differences and not overwrite:
            raise ValueError(
                f"{work} holds an unfinished run with other options ({'; '.join(differences)}); "
                "run again with the same options to resume it, or pass --overwrite to start over"
            )
        if resumable and not differences:
            print(f"tfseqrec: resuming the unfinished run in {work}", file=sys.stderr)
        else:
            _remove(work)
    os.makedirs(work, exist_ok=True)
    yield work
    if os.path.lexists(output_dir):
        replaced = output_dir + ".replaced"
        if os.path.lexists(replaced):
            _remove(replaced)
        os.replace(output_dir, replaced)
        os.replace(work, output_dir)
        _remove(replaced)
    else:
        os.replace(work, output_dir)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _non_empty(path):
    return os.path.exists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))


def _is_run(path):
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, name)) for name in RUN_FILES)


def _differences(previous, record):
    """``["key: A there, B here", ...]`` between two run records."""
    out = []
    old_config, new_config = previous.get("config", {}), record.get("config", {})
    for key in sorted(set(old_config) | set(new_config)):
        if old_config.get(key) != new_config.get(key):
            out.append(f"{key}: {old_config.get(key)!r} there, {new_config.get(key)!r} here")
    if previous.get("data") != record.get("data"):
        out.append(f"data: {previous.get('data')!r} there, {record.get('data')!r} here")
    return out


def read(model_dir, config_file):
    """``(model, vocabulary, info)`` of a finished model directory.

    ``config_file`` names the run's JSON (``info``) inside it.
    """
    path = os.path.join(model_dir, MODEL_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{model_dir}: no {MODEL_FILE}; is it a directory written by 'tfseqrec train'?"
        )
    model = keras.saving.load_model(path, safe_mode=True)
    vocabulary = vocab_lib.ItemVocabulary.load(model_dir)
    num_items = getattr(model, "num_items", None)
    if num_items is not None and num_items != vocabulary.num_items:
        raise ValueError(
            f"{model_dir}: the model scores {num_items} items but its vocabulary lists "
            f"{vocabulary.num_items}; the directory mixes two runs"
        )
    with open(os.path.join(model_dir, config_file)) as f:
        info = json.load(f)
    return model, vocabulary, info


def write_item_text(model_dir, raw_text, vocabulary):
    """Keeps the text of ``vocabulary``'s items (``{raw id: {attribute: text}}``) beside the model."""
    with open(os.path.join(model_dir, TEXT_FILE), "w", encoding="utf-8") as f:
        json.dump({raw: raw_text[raw] for raw in vocabulary.items if raw in raw_text}, f, ensure_ascii=False)


def read_item_text(model_dir):
    """The ``{raw id: {attribute: text}}`` ``write_item_text`` kept; ``None`` when there is none."""
    path = os.path.join(model_dir, TEXT_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
