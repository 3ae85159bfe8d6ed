"""Model files written before still load and score the same.

``tests/fixtures/*_v0.keras`` were written by ``tests/fixtures/make_v0.py`` before the
backbone/task split (flat configs, class ``tfseqrec>SASRec`` and so on);
``*_v1.keras`` by ``tests/fixtures/make_v1.py`` when the task inherited its backbone
(compiled and trained one step: they carry the optimizer's state, as a model
directory's file does). Both hold the backbone's weights at the top of the file, where
the task that holds its backbone keeps them under ``backbone/``. Their scores were
recorded when they were written, in ``scores_v0.json`` and ``scores_v1.json``.
"""

import io
import json
import pathlib
import shutil
import zipfile

import h5py
import keras
import numpy as np
import pytest

import tfseqrec  # noqa: F401 (registers the classes)
from tfseqrec.models import (
    HSTU,
    BERT4Rec,
    BERT4RecBackbone,
    HSTUBackbone,
    SASRec,
    SASRecBackbone,
    UniSRec,
    UniSRecBackbone,
)

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
BACKBONES = {SASRec: SASRecBackbone, BERT4Rec: BERT4RecBackbone, HSTU: HSTUBackbone, UniSRec: UniSRecBackbone}
FILES = [("v0", SASRec), ("v0", BERT4Rec), ("v0", HSTU)] + [("v1", cls) for cls in BACKBONES]


def _load_and_score(path, version, cls):
    expected = json.loads((FIXTURES / f"scores_{version}.json").read_text())
    model = keras.saving.load_model(path)
    assert type(model) is cls and type(model.backbone) is BACKBONES[cls]
    scores = np.asarray(model.score(np.array(expected["ids"], np.int32)))
    # The files were written on the primary stack; TF 2.21's kernels round differently in
    # the last digits (4e-6 relative on HSTU), a wrong load differs in the first.
    np.testing.assert_allclose(
        scores, np.array(expected["scores"][cls.__name__.lower()]), rtol=1e-5, atol=1e-5
    )
    return model


@pytest.mark.parametrize("version, cls", FILES, ids=lambda x: getattr(x, "__name__", x))
def test_model_file_written_before_loads_and_scores_the_same(version, cls):
    model = _load_and_score(FIXTURES / f"{cls.__name__.lower()}_{version}.keras", version, cls)
    if version == "v1":
        # The optimizer's state came along: one step taken, the moments of a step.
        assert int(model.optimizer.iterations) == 1
        assert any(np.abs(np.asarray(v)).max() > 0 for v in model.optimizer.variables[2:])


def _h5_paths(path):
    with zipfile.ZipFile(path) as archive:
        weights = h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")
        paths = []
        weights.visit(paths.append)
        return paths


@pytest.mark.parametrize("cls", [SASRec, BERT4Rec], ids=lambda c: c.__name__)
def test_a_file_written_now_keeps_the_backbone_under_backbone_and_reloads(cls, tmp_path):
    old = keras.saving.load_model(FIXTURES / f"{cls.__name__.lower()}_v1.keras")
    path = tmp_path / "model.keras"
    old.save(path)
    paths = _h5_paths(path)
    assert "backbone/item_embedding/vars/0" in paths and "item_embedding" not in paths
    _load_and_score(path, "v1", cls)


def test_a_file_that_cannot_be_mapped_says_how_to_convert_it(tmp_path):
    path = tmp_path / "sasrec.keras"
    shutil.copy(FIXTURES / "sasrec_v1.keras", path)
    # Another layout: the blocks are neither under backbone/ nor at the top.
    with zipfile.ZipFile(FIXTURES / "sasrec_v1.keras") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    buffer = io.BytesIO(members["model.weights.h5"])
    with h5py.File(buffer, "a") as weights:
        weights.move("blocks", "encoder_blocks")
    members["model.weights.h5"] = buffer.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match=r"(?s)no weights of SASRec's backbone.*To convert it"):
        keras.saving.load_model(path)
