"""Writing exports: one version directory at a time, never half-written, never overwritten."""

import os
import shutil
import tempfile

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tfseqrec.data import vocab as vocab_lib
from tfseqrec.export.warmup import write_warmup_requests
from tfseqrec.training import directory


def save(kind, model, vocabulary, export_dir, k=10, warmup=True):
    """Writes ``model`` as a SavedModel at ``export_dir`` (which must not exist).

    Args:
        kind: the model's kind (``tfseqrec.kinds.for_model(model)``), whose
            ``serving_module`` gives the signatures.
        model: a model of ``kind`` (as ``tfseqrec.load`` returns it).
        vocabulary: its ``ItemVocabulary``.
        export_dir: the version directory to create (or an empty one), e.g.
            ``saved_models/ml1m/1``.
        k: items per ``serving_default`` answer.
        warmup: write ``assets.extra/tf_serving_warmup_requests``.

    Returns:
        The names of the signatures written.
    """
    export_dir = os.fspath(export_dir)
    if os.path.exists(export_dir) and os.listdir(export_dir):
        raise FileExistsError(f"{export_dir} exists already; exports never overwrite a version")
    with tempfile.TemporaryDirectory() as tmp:
        vocabulary_path = vocabulary.save(os.path.join(tmp, vocab_lib.VOCAB_FILENAME))
        module = kind.serving_module(model, vocabulary, vocabulary_path, k)
        signatures = module.signatures()
        tf.saved_model.save(module, export_dir, signatures=signatures)
    if warmup:
        write_warmup_requests(export_dir, module)
    return list(signatures)


def export_version(kind, model, vocabulary, base_path, version=None, k=10, warmup=True):
    """Writes the next version (or ``version``) under a TF Serving base path.

    ``kind``, ``model``, ``vocabulary``, ``k`` and ``warmup`` as for ``save``.

    The SavedModel is written to a hidden directory and renamed into place, so a
    server polling ``base_path`` never loads a half-written version.

    Returns:
        ``(path, version)``.
    """
    base_path = os.fspath(base_path)
    version = next_version(base_path) if version is None else int(version)
    if version < 1:
        raise ValueError(f"versions are positive integers, got {version}")
    path = os.path.join(base_path, str(version))
    if os.path.exists(path):
        raise FileExistsError(
            f"{path} exists already; pick another --version or leave it out for the next one"
        )
    os.makedirs(base_path, exist_ok=True)
    staging = os.path.join(base_path, f".{version}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        save(kind, model, vocabulary, staging, k=k, warmup=warmup)
        os.rename(staging, path)
    except Exception as error:
        if not directory.is_full_disk(error):
            raise
        raise OSError(
            f"no space left on the device of {base_path} while exporting version {version}; "
            "the half-written version was removed and the versions already there are untouched. "
            "Free space, then export again"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path, version


def next_version(base_path):
    """One more than the largest numeric version directory under ``base_path`` (1 when none)."""
    if not os.path.isdir(base_path):
        return 1
    versions = [int(name) for name in os.listdir(base_path) if name.isdigit()]
    return max(versions, default=0) + 1


def saved_signatures(export_dir):
    """``{signature: {"inputs": {name: dtype}, "outputs": {name: dtype}}}`` of a SavedModel."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    out = {}
    for name, signature in sorted(proto.meta_graphs[0].signature_def.items()):
        if name.startswith("__"):
            continue
        out[name] = {
            "inputs": {k: tf.dtypes.as_dtype(v.dtype).name for k, v in sorted(signature.inputs.items())},
            "outputs": {k: tf.dtypes.as_dtype(v.dtype).name for k, v in sorted(signature.outputs.items())},
        }
    return out
