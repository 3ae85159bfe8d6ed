"""tfseqrec pretrain: joined catalogues, history pairs, UniSRec's contrastive losses, checkpoints for --init-from."""

import json

import keras
import numpy as np
import pytest

from tests.test_cli import _tfseqrec
from tfseqrec import cli, kinds
from tfseqrec.data import splits, vocab
from tfseqrec.models import UniSRec, UniSRecPretrainer
from tfseqrec.training import id_models, pretrain

R = vocab.NUM_RESERVED
UNISREC = {"hidden_dim": 8, "max_sequence_length": 5, "max_attribute_tokens": 6}
RECFORMER = {
    "num_layers": 1,
    "max_tokens": 48,
    "max_sequence_length": 4,
    "attention_window": 16,
    "max_attribute_tokens": 6,
    "align_epochs": 1,
    "batch_size": 8,
}


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """A second tiny dataset: 20 users over 15 "movies" of another text."""
    root = tmp_path_factory.mktemp("other")
    users = {str(u): [((u % 15) + t) % 15 for t in range(5)] for u in range(20)}
    (root / "Other.inter.json").write_text(json.dumps(users))
    (root / "Other.item.json").write_text(
        json.dumps(
            {
                str(i): {"title": f"movie {i} part {i % 3}", "brand": "studio", "categories": "Movies,Drama"}
                for i in range(15)
            }
        )
    )
    return root


def test_history_pairs_are_every_position_left_padded():
    seqs = splits.Sequences.from_list(["a", "b"], [[5, 6, 7, 8], [9, 10]])
    windows, targets = pretrain.history_pairs(seqs, 2)
    np.testing.assert_array_equal(windows, [[0, 5], [5, 6], [6, 7], [0, 9]])
    np.testing.assert_array_equal(targets, [6, 7, 8, 10])
    windows, targets = pretrain.history_pairs(seqs, 3, examples_per_user=1)
    np.testing.assert_array_equal(windows, [[5, 6, 7], [0, 0, 9]])
    np.testing.assert_array_equal(targets, [8, 10])


def test_domains_sit_side_by_side_in_one_catalogue(data, other):
    domains = pretrain.read_domains(
        [
            (data / "Tiny.inter.json", data / "Tiny.item.json"),
            (other / "Other.inter.json", other / "Other.item.json"),
        ]
    )
    assert [d.vocabulary.num_items for d in domains] == [20, 15]
    np.testing.assert_array_equal(pretrain.offsets(domains), [R, R + 20])
    joined = pretrain.joined_sequences(domains)
    assert len(joined) == 30 + 20
    first, second = domains[0].split.train, domains[1].split.train
    np.testing.assert_array_equal(joined[0], first[0])  # the first domain keeps its ids
    np.testing.assert_array_equal(joined[30], second[0] + 20)  # the second follows the first's 20 items
    assert joined.values.max() < R + 35 and joined.values.min() >= R


def _numpy_contrast(a, b, targets, t):
    logits = a @ b.T / t
    same = (targets[:, None] == targets[None, :]) & ~np.eye(len(targets), dtype=bool)
    logits = np.where(same, -1e9, logits)
    logits -= logits.max(1, keepdims=True)
    return float(np.mean(np.log(np.exp(logits).sum(1)) - np.diag(logits)))


def test_unisrec_pretraining_loss_is_the_papers():
    keras.utils.set_random_seed(0)
    text = np.random.default_rng(0).normal(size=(8, 6)).astype("float32")
    model = UniSRec(
        num_items=8,
        text_dim=6,
        max_sequence_length=4,
        hidden_dim=8,
        dropout=0.0,
        adaptor_dropout=0.0,
        text_embeddings=text,
        temperature=0.5,
    )
    task = UniSRecPretrainer(model, seq_seq_weight=0.3, item_drop=0.0)
    x = {"item_ids": np.array([[0, R, R + 1, R + 2], [0, 0, R + 3, R + 4], [R + 5, R + 6, R + 7, R + 1]])}
    y = np.array([R + 3, R + 5, R + 3])  # rows 0 and 2 share their next item: not each other's negatives
    hidden = np.asarray(model(x))[:, -1] * 0.5
    items = np.asarray(model.output_table()[0])[y - R]
    expected = _numpy_contrast(hidden, items, y, 0.5) + 0.3 * _numpy_contrast(hidden, hidden, y, 0.5)
    got = float(task.compute_loss(x, y, model(x), training=False))
    assert got == pytest.approx(expected, rel=1e-5)


def test_augmentation_drops_items_keeps_the_newest_and_the_order():
    model = UniSRec(num_items=8, text_dim=6, max_sequence_length=6, hidden_dim=8)
    ids = np.array([[0, 0, R, R + 1, R + 2, R + 3]] * 50)
    everything = np.asarray(UniSRecPretrainer(model, item_drop=0.999, seed=1).augment(ids))
    np.testing.assert_array_equal(everything[:, -1], R + 3)  # the newest stays
    half = np.asarray(UniSRecPretrainer(model, item_drop=0.5, seed=1).augment(ids))
    for row in half:
        kept = row[row > 0]
        assert kept[-1] == R + 3 and np.all(np.diff(kept) > 0) and set(kept) <= set(ids[0])
        assert np.all(row[: len(row) - len(kept)] == 0)  # padding on the left
    assert 2 < (half > 0).sum(1).mean() < 4


@pytest.fixture(scope="module")
def unisrec_checkpoint(data, other, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("pre") / "unisrec"
    out = _tfseqrec(
        "pretrain",
        "--model",
        "unisrec",
        "--data",
        data / "Tiny.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--data",
        other / "Other.inter.json",
        "--item-text",
        other / "Other.item.json",
        "--output",
        out_dir,
        "--config",
        json.dumps(UNISREC),
        "--epochs",
        2,
        "--batch-size",
        16,
        "--quiet",
    )
    return out_dir, json.loads(out.stdout.strip().splitlines()[-1])


def test_unisrec_checkpoint_starts_fine_tuning(unisrec_checkpoint, data, other, tmp_path):
    checkpoint, out = unisrec_checkpoint
    assert out["datasets"] == 2 and out["epochs"] == 2 and np.isfinite(out["loss"])
    info = json.loads((checkpoint / "pretrain_config.json").read_text())
    assert [d["num_items"] for d in info["datasets"]] == [20, 15] and len(info["history"]) == 2
    # Steps per epoch: a window per training position after each user's first, 16 a batch, the rest dropped.
    lengths = [
        len(items) - 2
        for path in (data / "Tiny.inter.json", other / "Other.inter.json")
        for items in json.loads(path.read_text()).values()
    ]
    assert [row["steps"] for row in info["history"]] == [sum(n - 1 for n in lengths) // 16] * 2
    pretrained = keras.saving.load_model(checkpoint / "model.keras")
    assert pretrained.num_items == 35 and not pretrained.backbone.use_id_embeddings
    # --init-from copies everything but the item tables.
    config = kinds.get("unisrec").options({**UNISREC, "init_from": str(checkpoint)})
    model = kinds.get("unisrec").build(config, 20, text_dim=384)
    assert id_models.initialize(model, str(checkpoint)) == len(model.weights) - 1
    np.testing.assert_array_equal(
        model.backbone.adaptor.expert_kernel, pretrained.backbone.adaptor.expert_kernel
    )
    np.testing.assert_array_equal(
        model.backbone.blocks[0].ffn_in.kernel, pretrained.backbone.blocks[0].ffn_in.kernel
    )
    # A text-only checkpoint starts a model with id embeddings too. Item 19 is left out
    # of the training sequences (all but each user's last two items): read by its text alone.
    users = json.loads((data / "Tiny.inter.json").read_text())
    users = {u: [18 if i == 19 else i for i in items[:-2]] + items[-2:] for u, items in users.items()}
    assert any(19 in items for items in users.values())
    (tmp_path / "Cold.inter.json").write_text(json.dumps(users))
    out = _tfseqrec(
        "train",
        "--model",
        "unisrec",
        "--data",
        tmp_path / "Cold.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--output",
        tmp_path / "ft",
        "--config",
        json.dumps({**UNISREC, "epochs": 1, "use_id_embeddings": True, "id_dropout": 0.2}),
        "--init-from",
        checkpoint,
        "--quiet",
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])["epochs"] == 1
    tuned, vocabulary, _ = kinds.load(str(tmp_path / "ft"))
    assert tuned.backbone.use_id_embeddings and tuned.backbone.id_dropout == 0.2
    known = np.asarray(tuned.backbone.id_known.embeddings)[R:, 0]
    assert {item: k for item, k in zip(vocabulary.items, known) if k != 1} == {"19": 0.0}
    wider = _tfseqrec(
        "train",
        "--model",
        "unisrec",
        "--data",
        data / "Tiny.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--output",
        tmp_path / "ft2",
        "--config",
        json.dumps({**UNISREC, "hidden_dim": 16}),
        "--init-from",
        checkpoint,
        check=False,
    )
    assert wider.returncode == 1 and "use the pre-training's sizes" in wider.stderr


@pytest.mark.primary
def test_recformer_checkpoint_starts_fine_tuning(data, other, tmp_path, capsys):
    checkpoint = tmp_path / "recformer"
    _tfseqrec(
        "pretrain",
        "--model",
        "recformer",
        "--data",
        data / "Tiny.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--data",
        other / "Other.inter.json",
        "--item-text",
        other / "Other.item.json",
        "--output",
        checkpoint,
        "--config",
        json.dumps(RECFORMER),
        "--epochs",
        1,
        "--quiet",
    )
    backbone = keras.saving.load_model(checkpoint / "backbone.keras")
    fine = {
        **RECFORMER,
        "epochs": 1,
        "stage2_epochs": 0,
        "validation_batch_size": 16,
        "init_from": str(checkpoint),
    }
    from tfseqrec.training import recformer

    loaded = recformer.pretrained_backbone(kinds.get("recformer").options(fine))
    for a, b in zip(loaded.weights, backbone.weights):
        np.testing.assert_array_equal(a, b)
    out = _tfseqrec(
        "train",
        "--model",
        "recformer",
        "--data",
        data / "Tiny.inter.json",
        "--item-text",
        data / "Tiny.item.json",
        "--output",
        tmp_path / "ft",
        "--config",
        json.dumps(fine),
        "--quiet",
    )
    assert 0.0 <= json.loads(out.stdout.strip().splitlines()[-1])["ndcg@10"] <= 1.0
    capsys.readouterr()
    bad = cli.main(
        [
            "train",
            "--model",
            "recformer",
            "--data",
            str(data / "Tiny.inter.json"),
            "--item-text",
            str(data / "Tiny.item.json"),
            "--output",
            str(tmp_path / "ft2"),
            "--config",
            json.dumps({**fine, "max_tokens": 64}),
        ]
    )  # in process: it fails before training
    assert bad == 1 and "pre-trained with max_tokens 48; fine-tuning asks for 64" in capsys.readouterr().err


def test_pretraining_budget_stops_at_the_first_step_past_it(data, tmp_path):
    rows = pretrain.pretrain(
        kinds.get("unisrec"),
        [(data / "Tiny.inter.json", data / "Tiny.item.json")],
        tmp_path / "p",
        {**UNISREC, "epochs": 3, "batch_size": 4, "max_train_minutes": 1e-6},
        verbose=0,
    )
    # One step of the first epoch's 22 (90 windows, 4 a batch), and no other epoch.
    assert [(row["epoch"], row["steps"]) for row in rows] == [(1, 1)]


def test_recformer_aligns_cls_only_from_minilm_with_cls_pooling():
    from tfseqrec.training import recformer

    options = kinds.get("recformer").options
    assert recformer.aligns(options({}))
    assert not recformer.aligns(options({"pooling": "mean"}))  # reads MiniLM's own sentence vector
    assert not recformer.aligns(options({"init_from": "runs/pre"}))  # aligned when pre-trained
    assert not recformer.aligns(options({"pretrained": False}))  # random weights: nothing to align to


def test_pretrain_flags_are_checked(data, tmp_path, capsys):
    # In process: both fail before any work.
    result = cli.main(
        [
            "pretrain",
            "--model",
            "unisrec",
            "--data",
            str(data / "Tiny.inter.json"),
            "--output",
            str(tmp_path / "p"),
            "--item-text",
            str(data / "Tiny.item.json"),
            "--data",
            str(data / "Tiny.inter.json"),
        ]
    )
    assert result == 1 and "got 2 --data and 1 --item-text" in capsys.readouterr().err
    result = cli.main(
        [
            "train",
            "--model",
            "sasrec",
            "--data",
            str(data / "Tiny.inter.json"),
            "--output",
            str(tmp_path / "s"),
            "--init-from",
            str(tmp_path / "checkpoint"),
        ]
    )
    assert (
        result == 1
        and "init_from is for models that 'tfseqrec pretrain' pre-trains" in capsys.readouterr().err
    )
