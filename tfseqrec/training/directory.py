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
import errno
import fcntl
import json
import os
import re
import shutil
import sys
import zipfile

import keras
import numpy as np

# Registers the model, layer and loss classes that ``read`` loads; newer Keras does not
# import modules named in a saved file by itself.
import tfseqrec.models  # noqa: F401
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.models.tasks import PRESET_MODEL_FILE

MODEL_FILE = PRESET_MODEL_FILE  # a trained model directory is a preset
BACKUP_DIR = "backup"
PARTIAL_SUFFIX = ".partial"
LOCK_SUFFIX = ".lock"  # beside the directory while a run writes it (output_directory)
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
    with _run_lock(output_dir):
        with _claimed(output_dir, record, overwrite, config_file) as work:
            yield work


@contextlib.contextmanager
def _run_lock(output_dir):
    """Holds ``output_dir + ".lock"`` (an advisory lock the system drops when the process ends,
    however it ends) while a run writes ``output_dir``: a second run into it at once is refused."""
    path = output_dir + LOCK_SUFFIX
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    handle = open(path, "a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise FileExistsError(
            f"another run is writing {output_dir} now (it holds {path}); wait for it to end, or "
            "choose another --output"
        ) from None
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        handle.close()


@contextlib.contextmanager
def _claimed(output_dir, record, overwrite, config_file):
    """``output_directory``'s work once its lock is held."""
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
    try:
        yield work
    except Exception as error:
        if not is_full_disk(error):
            raise
        # Nothing of the run can be finished without space; what it wrote only fills the disk.
        _remove(work)
        kept = f"; the model already in {output_dir} is untouched" if _is_run(output_dir) else ""
        raise OSError(
            f"no space left on the device of {output_dir} while training; the unfinished run "
            f"({work}) was removed{kept}. Free space, then train again"
        ) from None
    if os.path.lexists(output_dir):
        replaced = output_dir + ".replaced"
        if os.path.lexists(replaced):
            _remove(replaced)
        os.replace(output_dir, replaced)
        os.replace(work, output_dir)
        _remove(replaced)
    else:
        os.replace(work, output_dir)


class FreeSpaceGuard(keras.callbacks.Callback):
    """Stops a run, before it writes, when the disk cannot hold its next epoch's files.

    Every epoch may write the model (``model.keras``) and the backup (the weights and
    the optimizer's state), each beside the previous copy before a rename. A write
    that h5py starts on a full disk does not fail cleanly: its objects fail again when
    freed, and the process can end in a segmentation fault. So the free space is
    checked first (at the start and after each epoch, before the files are written),
    for twice the weights and optimizer state plus ``slack_bytes``; short of it, an
    ``OSError`` (``ENOSPC``) ends the run, which ``output_directory`` reports.
    """

    def __init__(self, directory, slack_bytes=1 << 20):
        super().__init__()
        self.directory = directory
        self.slack_bytes = slack_bytes

    def _check(self):
        variables = list(self.model.weights) + list(getattr(self.model.optimizer, "variables", []))
        state = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)
        need = 2 * state + self.slack_bytes
        free = shutil.disk_usage(self.directory).free
        if free < need:
            raise OSError(
                errno.ENOSPC,
                f"{os.strerror(errno.ENOSPC)}: {free} bytes free in {self.directory}, the next epoch "
                f"writes up to {need}",
            )

    def on_train_begin(self, logs=None):
        self._check()

    def on_epoch_end(self, epoch, logs=None):
        self._check()


def is_full_disk(error):
    """Whether ``error`` (or an error it was raised from) says the disk is full (``ENOSPC``).

    h5py and TensorFlow's file writers report it in their own exception types, with
    ``errno`` 28 or the system's message in the text.
    """
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if getattr(error, "errno", None) == errno.ENOSPC or os.strerror(errno.ENOSPC) in str(error):
            return True
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return False


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
    model = load_model_file(path)
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


def load_model_file(path):
    """The Keras model in the ``.keras`` file ``path``, its faults said in one line.

    Loaded in Keras's safe mode (no lambda's code runs); a file that is not a whole zip
    archive (truncated by a full disk or a cut copy) and a file naming a class or
    function outside Keras and tfseqrec (``os.system``) are refused as a ``ValueError``
    that says so.
    """
    if os.path.exists(path) and not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path}: not a complete .keras file ({os.path.getsize(path)} bytes, not a whole zip "
            "archive): it is truncated or corrupt; train again, or restore it from a copy"
        )
    try:
        return keras.saving.load_model(path, safe_mode=True)
    except (zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{path}: the .keras file is corrupt ({e}); train again, or restore it") from None
    except TypeError as e:
        if "Could not locate" not in str(e):
            raise
        named = _named_object(str(e))
        raise ValueError(
            f"{path}: refused: the model file names {named}, which is not a Keras or tfseqrec "
            "class (a model file loads only those); it was not written by tfseqrec"
        ) from None


def _named_object(message):
    """``module.name`` of the object a Keras "Could not locate" message quotes."""
    module = re.search(r"'module': '([^']*)'", message)
    name = re.search(r"Could not locate (?:class|function) '([^']*)'", message)
    if name is None:
        return "an unknown object"
    return f"{module.group(1)}.{name.group(1)}" if module else name.group(1)


def write_item_text(model_dir, raw_text, vocabulary):
    """Keeps the text of ``vocabulary``'s items (``{raw id: {attribute: text}}``) beside the model."""
    with open(os.path.join(model_dir, TEXT_FILE), "w", encoding="utf-8") as f:
        json.dump({raw: raw_text[raw] for raw in vocabulary.items if raw in raw_text}, f, ensure_ascii=False)


def require_text(source, raw_text, vocabulary, missing, some_may_lack=False):
    """Refuses item text that leaves ``vocabulary``'s items without text.

    The one check of every kind that reads item text: ``missing`` (of
    ``tfseqrec.data.text.item_texts``) items of ``vocabulary`` have none in ``raw_text``
    (``{raw id: {attribute: text}}``, read from ``source``). Refused when it is every
    item (a text file of another catalogue: the model would learn nothing), and when it
    is any item unless ``some_may_lack``.
    """
    if not missing or (some_may_lack and missing < vocabulary.num_items):
        return
    lacking = [raw for raw in vocabulary.items if raw not in raw_text][:5]
    if missing == vocabulary.num_items:
        raise ValueError(
            f"{source}: none of the data's {vocabulary.num_items} items has text there (data ids "
            f"such as {lacking}, text ids such as {list(raw_text)[:5]}); is it the item text of "
            "this data set? (an id map: 'tfseqrec data item-text --id-map')"
        )
    raise ValueError(
        f"{source}: {missing} of the {vocabulary.num_items} items have no text (for example {lacking})"
    )


def require_new_item_text(source, texts, vocabulary, first_new_id, attributes):
    """Refuses an item added by its text alone whose text is empty in every attribute the model reads.

    ``texts`` (``[vocabulary.size, len(attributes)]`` strings) holds the grown
    ``vocabulary``'s text; the ids from ``first_new_id`` on are the added items.
    """
    for i in range(first_new_id, vocabulary.size):
        if not any(str(t).strip() for t in texts[i]):
            raw = vocabulary.items[i - vocab_lib.NUM_RESERVED]
            raise ValueError(
                f"{source}: item {raw!r} has no text in the attributes the model reads "
                f"({list(attributes)}); an item with empty text cannot be encoded (remove it, or give it text)"
            )


def read_item_text(model_dir):
    """The ``{raw id: {attribute: text}}`` ``write_item_text`` kept; ``None`` when there is none."""
    path = os.path.join(model_dir, TEXT_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
