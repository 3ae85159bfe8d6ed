"""The benchmark scripts' own arithmetic, checked by hand (the scripts train for minutes; these checks take none)."""

import gzip
import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from tests.test_case import benchmark_script
from tfseqrec import kinds, training
from tfseqrec.data import splits
from tfseqrec.data import vocab as vocab_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def _script(name):
    return benchmark_script(name)


def _batch(batch, length):
    x = {"item_ids": np.zeros((batch, length), np.int32)}
    return x, np.zeros((batch, length), np.int32), np.ones((batch, length), np.float32)


def test_ml1m_flop_count_of_sasrec_by_hand():
    ml1m = _script("ml1m")
    config = training.TrainConfig.from_dict(dict(model="sasrec", hidden_dim=4, num_layers=1, loss="softmax"))
    # 2 x 5 tokens, d = 4, feed-forward 4 (SASRec's default: d): projections and
    # feed-forward 2*10*(4*16 + 2*4*4) = 1,920; Q K^T and A V 2*2*2*25*4 = 800;
    # scores of 10 targets over 7 items 2*10*4*7 = 560. Training: 3x the forward pass.
    model = kinds.get("sasrec").build(config, 7)
    assert ml1m.training_flops_per_epoch(config, [_batch(2, 5)], 7, model) == 3 * (1920 + 800 + 560)


@pytest.mark.parametrize("kind", ["bert4rec", "hstu"])
def test_ml1m_flop_count_runs_for_every_kind(kind):
    ml1m = _script("ml1m")
    # As a run records its options: BERT4Rec's mask share settled (the data settle it when unset).
    config = training.TrainConfig.from_dict(dict(model=kind, hidden_dim=4, num_layers=2, mask_prob=0.2))
    flops = ml1m.training_flops_per_epoch(config, [_batch(2, 5)], 7, kinds.get(kind).build(config, 7))
    config = training.TrainConfig.from_dict(dict(model=kind, hidden_dim=4, num_layers=1, mask_prob=0.2))
    one_layer = ml1m.training_flops_per_epoch(config, [_batch(2, 5)], 7, kinds.get(kind).build(config, 7))
    assert flops > one_layer > 0


def test_hstu_step_flops_and_batch_by_hand():
    from tfseqrec.data.vocab import NUM_RESERVED

    ml1m, hstu_step = _script("ml1m"), _script("hstu_step")
    config = training.TrainConfig.from_dict(dict(model="hstu", hidden_dim=4, num_layers=3, loss="softmax"))
    model = kinds.get("hstu").build(config, 7)
    # 2 windows of width 5 (10 tokens), d = 4, 3 layers, 6 targets over 7 items, forward x 3:
    # Q K^T and A V 3*3*2*2*2*25*4 = 7,200; U V Q K and output 3*3*2*10*5*16 = 14,400;
    # scores 3*2*6*4*7 = 1,008.
    assert ml1m.step_flops(config, 2, 5, 6.0, 7, model) == {
        "attention": 7200,
        "dense": 14400,
        "scores": 1008.0,
    }
    ids, targets, weights = hstu_step.make_batch(np.random.default_rng(0), 6, 8)
    lengths = (ids != 0).sum(axis=1)
    assert ids.shape == targets.shape == weights.shape == (6, 8)
    assert np.all((lengths >= 5) & (lengths <= 8))
    for row, n in enumerate(lengths):
        # Left-padded; each real position's target is the next item, the last one's beyond the window.
        assert not ids[row, : 8 - n].any() and not targets[row, : 8 - n].any()
        assert np.all(ids[row, 8 - n :] >= NUM_RESERVED) and np.all(targets[row, 8 - n :] >= NUM_RESERVED)
        np.testing.assert_array_equal(targets[row, 8 - n : -1], ids[row, 9 - n :])
    np.testing.assert_array_equal(weights, targets != 0)


def test_text_unisrec_variants_and_their_row_names():
    text = _script("text")
    assert text.variants(None) == [{}] and text.variants({"hidden_dim": 128}) == [{"hidden_dim": 128}]
    assert text.variants([{}, {"learning_rate": 0.001}]) == [{}, {"learning_rate": 0.001}]
    assert text.variant_name({}) == ""
    assert text.variant_name({"hidden_dim": 128, "num_heads": 2}) == " [hidden_dim=128, num_heads=2]"


def test_text_report_joins_stored_runs_against_the_best_sasrec(tmp_path, capsys):
    text = _script("text")

    def row(ndcg, recall, cold=0.0, warm=None):
        return {
            "all": {"ndcg@10": ndcg, "hr@10": recall, "mrr": ndcg},
            "cold": {"ndcg@10": cold, "hr@10": 0.0, "mrr": 0.0},
            "warm": {"ndcg@10": warm or ndcg, "hr@10": recall, "mrr": ndcg},
        }

    first = {
        "results": {"sasrec": row(0.08, 0.10), "unisrec-id": row(0.088, 0.121, cold=0.02, warm=0.08)},
        "seconds": {"sasrec": 100.0},
        "epochs": {"sasrec": 12},
        "commit": "abc",
    }
    second = {"results": {"sasrec [hidden_dim=256]": row(0.06, 0.09), "unisrec-id": row(0.04, 0.05)}}
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, run in zip(paths, (first, second)):
        path.write_text(json.dumps(run))
    text.report([str(p) for p in paths])
    lines = {
        line.split(" | ")[0][2:]: line.split(" | ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and not line.startswith("| model")
    }
    assert set(lines) == {"sasrec", "unisrec-id", "sasrec [hidden_dim=256]", "unisrec-id (b)"}
    # Against the best SASRec (0.08 / 0.10): 0.088 / 0.08 = 1.10, 0.121 / 0.10 = 1.21; cold / warm 0.25.
    assert lines["unisrec-id"][4:6] == ["1.10", "1.21"] and lines["unisrec-id"][8] == "0.25"
    assert lines["sasrec [hidden_dim=256]"][4:6] == ["0.75", "0.90"]
    assert lines["sasrec"][9:11] == ["12", "100 |"]
    text.report([str(p) for p in paths], rows=["unisrec-id (b)", "sasrec"])
    out = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert [line.split(" | ")[0] for line in out[1:]] == ["| unisrec-id (b)", "| sasrec"]
    with pytest.raises(ValueError, match=r"rows \['bert4rec'\] are in none of the runs"):
        text.report([str(p) for p in paths], rows=["bert4rec"])


def test_every_benchmark_dataset_names_files_the_data_root_holds(data_root):
    datasets = _script("datasets")
    from tfseqrec.data import text as text_lib

    for name, dataset in datasets.DATASETS.items():
        if dataset.synthetic is not None:  # written by tfseqrec.data.synthetic, not read
            assert dataset.item_text is None and name == "synthetic-amazon"
            continue
        assert os.path.isfile(dataset.path(data_root)), name
        assert dataset.attributes in text_lib.ATTRIBUTES, name
        if dataset.item_text is not None:
            assert os.path.isfile(dataset.item_text_path(data_root)), name
    # ML-1M's text is written from movies.dat under ml-1m.txt's ids: nothing to read as it is.
    with pytest.raises(ValueError, match="written from another file"):
        datasets.get("ml-1m").item_text_path(data_root)
    with pytest.raises(KeyError, match="known: \\['ml-100k', 'ml-1m', 'scientific', 'synthetic-amazon'\\]"):
        datasets.get("ml-10m")
    # The transfer targets and the defaults' datasets are the registry's, under the names of the stored runs.
    assert set(_script("transfer").TARGETS.values()) <= set(datasets.DATASETS)
    assert _script("defaults").DATASETS == ("ml-100k", "ml-1m", "scientific", "synthetic-amazon")


def test_transfer_catalogue_overlap_by_title_by_hand():
    transfer = _script("transfer")
    from tfseqrec.data.vocab import ItemVocabulary

    source = {"7": {"title": "Toy Story (1995)"}, "8": {"title": "Heat  (1995)"}, "9": {"title": ""}}
    # Target items a to e: a and b share a title with the source (case and spacing aside), c does not,
    # d has no text, and an empty title matches nothing.
    target = {
        "a": {"title": "toy story (1995)"},
        "b": {"title": "Heat (1995)"},
        "c": {"title": "Casino (1995)"},
        "e": {"title": ""},
    }
    vocabulary = ItemVocabulary(["a", "b", "c", "d", "e"])
    targets = vocabulary.lookup(["a", "c", "d", "b"])  # half of them shared
    assert transfer.catalogue_overlap(source, target, vocabulary, targets) == (2, 0.5)


def test_transfer_source_popularity_by_title_by_hand():
    transfer = _script("transfer")
    from tfseqrec.data.vocab import NUM_RESERVED, ItemVocabulary

    source_vocabulary = ItemVocabulary(["7", "8", "9", "10"])
    source = {
        "7": {"title": "Toy Story (1995)"},
        "8": {"title": "Heat (1995)"},
        "9": {"title": "heat  (1995)"},
        "10": {"title": ""},
    }
    counts = np.zeros(source_vocabulary.size, np.int64)
    counts[NUM_RESERVED:] = [5, 2, 1, 9]  # 8 and 9 share a title: 3; an empty title counts for nothing
    by_title = transfer.title_counts(source, source_vocabulary, counts)
    assert by_title == {"toy story (1995)": 5, "heat (1995)": 3}
    target = {
        "a": {"title": "HEAT (1995)"},
        "b": {"title": "Casino (1995)"},
        "c": {"title": "toy story (1995)"},
    }
    vocabulary = ItemVocabulary(["a", "b", "c", "d"])  # d has no text
    np.testing.assert_array_equal(
        transfer.source_popularity(by_title, target, vocabulary)[NUM_RESERVED:], [3, 0, 5, 0]
    )


def test_protocols_name_their_choices():
    protocols = _script("protocols")
    with pytest.raises(ValueError, match="sasrec-plus, rectools, hstu-paper"):
        protocols.get("paper")
    paper = protocols.get("hstu-paper")
    assert paper.evaluation_exclude_seen == "window"
    assert protocols.get("rectools").evaluation_exclude_seen is True
    options = paper.training_options({"seed": 1})
    assert options["sampler"] == "uniform" and options["validation"] == "none" and options["seed"] == 1
    with pytest.raises(ValueError, match="num_negatives=128"):
        paper.training_options({"num_negatives": 256})
    assert "validation" not in protocols.get("sasrec-plus").training_options()


def test_split_without_validation_trains_on_the_second_to_last_item(tmp_path):
    """A 4-user file, one user too short to evaluate: ``validation="none"`` moves each evaluable
    user's second-to-last item into training; the test cases stay."""
    protocols = _script("protocols")
    lines = ["1 10", "1 11", "1 12", "1 13", "2 11", "2 12", "2 10", "3 12", "3 13", "4 10", "4 13", "4 11"]
    (tmp_path / "ml-1m").mkdir()
    with gzip.open(tmp_path / "ml-1m" / "ml-1m_full_sequences.txt.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    with_validation, vocabulary = protocols.load("rectools", tmp_path)
    trained, trained_vocabulary = protocols.load("hstu-paper", tmp_path)

    def raw(sequences, vocabulary):
        return [list(vocabulary.to_raw(s)) for s in sequences.to_list()]

    assert raw(with_validation.train, vocabulary) == [["10", "11"], ["11"], ["12", "13"], ["10"]]
    assert list(vocabulary.to_raw(with_validation.valid.targets)) == ["12", "12", "13"]
    assert raw(trained.train, trained_vocabulary) == [
        ["10", "11", "12"],
        ["11", "12"],
        ["12", "13"],
        ["10", "13"],
    ]
    assert len(trained.valid) == 0
    for split, vocab in ((trained, trained_vocabulary), (with_validation, vocabulary)):
        assert list(vocab.to_raw(split.test.targets)) == ["13", "10", "11"]


def test_defaults_table_ratios_to_sasrec_by_hand():
    defaults = _script("defaults")

    def row(dataset, model, ndcg, **extra):
        test = {"ndcg@10": ndcg, "hr@10": 2 * ndcg, "mrr": ndcg / 2}
        return {
            "dataset": dataset,
            "protocol": "p",
            "model": model,
            "test": test,
            "train_wall_seconds": 90.0,
            **extra,
        }

    run = {"model": "sasrec", "max_train_minutes": 4.0, "seed": 0}
    rows = [
        row("a", "sasrec", 0.05, epochs=7, best_epoch=5, config=run, minutes_to_98pct_of_best=0.75),
        row("a", "bert4rec", 0.04, epochs=3, best_epoch=3, config={**run, "model": "bert4rec"}),
        # A probe (--config): its options are named, and it is not the ratios' base.
        row(
            "a",
            "sasrec",
            0.025,
            epochs=2,
            best_epoch=1,
            config={**run, "batch_size": 32, "learning_rate": 4e-3},
        ),
        row("a", "popularity", 0.01),
        row("b", "hstu", 0.02, epochs=1, best_epoch=1, config={**run, "model": "hstu"}),  # no SASRec on b
        # An epoch cap is the run's own, but a schedule's when one decays over it.
        row("c", "sasrec", 0.03, epochs=9, best_epoch=9, config={**run, "epochs": 9}),
        row(
            "c",
            "sasrec",
            0.03,
            epochs=9,
            best_epoch=9,
            config={**run, "learning_rate_schedule": "cosine", "epochs": 9},
        ),
        # UniSRec's own option (ids added) is its row's defaults; setting it otherwise is a probe.
        row(
            "a",
            "unisrec",
            0.06,
            epochs=4,
            best_epoch=2,
            config={**run, "model": "unisrec", "use_id_embeddings": True},
        ),
        row(
            "a",
            "unisrec",
            0.03,
            epochs=4,
            best_epoch=2,
            config={**run, "model": "unisrec", "use_id_embeddings": False},
        ),
    ]
    lines = defaults.table(rows).split("\n")
    assert lines[2] == "| a | p | sasrec | defaults | 0.0500 | 0.1000 | 0.0250 | 1.00 | 7 (5) | 0.8 | 1.5 |"
    assert lines[3] == "| a | p | bert4rec | defaults | 0.0400 | 0.0800 | 0.0200 | 0.80 | 3 (3) |  | 1.5 |"
    assert lines[4] == (
        "| a | p | sasrec | batch_size=32, learning_rate=0.004 | 0.0250 | 0.0500 | 0.0125 | 0.50 | 2 (1) |  | 1.5 |"
    )
    assert lines[5] == "| a | p | popularity |  | 0.0100 | 0.0200 | 0.0050 | 0.20 |  |  | 1.5 |"
    assert lines[6] == "| b | p | hstu | defaults | 0.0200 | 0.0400 | 0.0100 |  | 1 (1) |  | 1.5 |"
    assert lines[7] == "| c | p | sasrec | defaults | 0.0300 | 0.0600 | 0.0150 | 1.00 | 9 (9) |  | 1.5 |"
    assert lines[8].startswith("| c | p | sasrec | learning_rate_schedule=cosine, epochs=9 | 0.0300 |")
    assert lines[9] == "| a | p | unisrec | defaults | 0.0600 | 0.1200 | 0.0300 | 1.20 | 4 (2) |  | 1.5 |"
    assert lines[10].startswith("| a | p | unisrec | use_id_embeddings=False | 0.0300 |")
    assert set(defaults.DATASETS) == {"ml-100k", "ml-1m", "scientific", "synthetic-amazon"}


def test_defaults_seeds_table_by_hand():
    defaults = _script("defaults")

    def run(seed, *rows):
        config = {"max_train_minutes": 10.0, "seed": seed}
        return {
            "args": {"seed": seed},
            "rows": [
                {"dataset": d, "model": m, "test": {"ndcg@10": v}, "config": {**config, "model": m}}
                for d, m, v in rows
            ],
        }

    runs = [
        run(0, ("a", "sasrec", 0.10), ("a", "bert4rec", 0.08), ("b", "hstu", 0.02)),
        run(1, ("a", "sasrec", 0.12), ("a", "bert4rec", 0.06)),
    ]
    lines = defaults.seeds_table(runs).split("\n")
    assert lines[0] == (
        "| dataset | model | seed 0 | seed 1 | mean ± sd | mean / SASRec's mean | lowest seed's / SASRec |"
    )
    assert lines[2] == "| a | sasrec | 0.1000 | 0.1200 | 0.1100 ± 0.0141 |  |  |"
    # 0.07 / 0.11 = 0.636; seed by seed 0.08 / 0.10 = 0.8 and 0.06 / 0.12 = 0.5
    assert lines[3] == "| a | bert4rec | 0.0800 | 0.0600 | 0.0700 ± 0.0141 | 0.64 | 0.50 |"
    assert lines[4] == "| b | hstu | 0.0200 |  | 0.0200 ± 0.0000 |  |  |"  # one seed, no SASRec on b
    # A later run of seed 0 (BERT4Rec rerun) replaces seed 0's BERT4Rec row only.
    rerun = defaults.seeds_table([*runs, run(0, ("a", "bert4rec", 0.09))]).split("\n")
    assert rerun[0] == lines[0] and rerun[2] == lines[2] and rerun[4] == lines[4]
    # 0.075 / 0.11 = 0.682; seed by seed 0.09 / 0.10 = 0.9 and 0.5
    assert rerun[3] == "| a | bert4rec | 0.0900 | 0.0600 | 0.0750 ± 0.0212 | 0.68 | 0.50 |"
    probe = run(2, ("a", "sasrec", 0.1))
    probe["rows"][0]["config"]["batch_size"] = 32
    with pytest.raises(ValueError, match="batch_size=32"):
        defaults.seeds_table([runs[0], probe])


def test_ml1m_time_to_quality_with_and_without_validation():
    ml1m = _script("ml1m")
    timer = types.SimpleNamespace(elapsed=[60.0, 120.0, 180.0, 240.0])
    history = types.SimpleNamespace(history={"loss": [4, 3, 2, 1], "val_ndcg_10": [0.1, 0.197, 0.2, 0.15]})
    # Best 0.2 at epoch 3 (3 minutes); 98% of it is 0.196, first reached at epoch 2.
    got = ml1m.time_to_quality(history, timer)
    assert (got["epochs"], got["best_epoch"], got["best_val_ndcg@10"]) == (4, 3, 0.2)
    assert (got["minutes_to_best"], got["minutes_to_98pct_of_best"]) == (3.0, 2.0)
    assert got["minutes_at_epoch"] == [1.0, 2.0, 3.0, 4.0]
    # No validation split (hstu-paper): the last epoch is the model, nothing measured on validation.
    got = ml1m.time_to_quality(types.SimpleNamespace(history={"loss": [4, 3, 2, 1]}), timer)
    assert (got["epochs"], got["best_epoch"], got["minutes_to_best"]) == (4, 4, 4.0)
    assert got["best_val_ndcg@10"] is None and got["minutes_to_98pct_of_best"] is None


def test_ml1m_accuracy_table_names_the_window_filter():
    ml1m = _script("ml1m")
    full = {"ndcg@10": 0.2, "hr@10": 0.3, "mrr": 0.1}
    results = {
        "full_exclude_seen=window": {**full, "exclude_seen": "window"},
        "full_exclude_seen=False": {**full, "ndcg@10": 0.1, "exclude_seen": False},
    }
    run = {"model": "hstu", "seed": 0, "protocol": "hstu-paper", "results": results}
    lines = ml1m.accuracy_table([run]).split("\n")
    assert lines[2] == "| hstu | 0 | input window | 0.2000 | 0.3000 | 0.1000 |  |  |"
    assert lines[3] == "| hstu | 0 | no | 0.1000 | 0.3000 | 0.1000 |  |  |"
    assert ml1m.filtered(run)["exclude_seen"] == "window"
    assert ml1m.protocol_of({}) == "sasrec-plus"  # runs stored before protocols were recorded


def test_ml1m_speed_table_share_of_the_measured_host_by_hand():
    ml1m = _script("ml1m")
    run = {
        "model": "sasrec",
        "seed": 0,
        "epochs": 10,
        "best_epoch": 8,
        "minutes_to_best": 4.0,
        "minutes_to_98pct_of_best": 3.0,
        "train_wall_seconds": 300.0,
        "epoch_seconds_median": 12.0,
        "peak_rss_gib": 2.0,
        "train_gflop_per_epoch": 1260.0,
        "train_gflops": 105.0,
    }
    # 105 GFLOP/s of a host measured at 420 is 25%; a run stored without its host's rate is
    # read against the assumed 130 (105 / 130 = 81%), marked, with the note under the table.
    lines = ml1m.speed_table([{**run, "host_matmul_gflops": 420.0}]).split("\n")
    assert lines[-1].endswith("| 105.0 | 25% of 420 |") and len(lines) == 3
    lines = ml1m.speed_table([run]).split("\n")
    assert lines[2].endswith("| 105.0 | 81% of 130\\* |")
    assert lines[-1].startswith("\\* Stored before runs measured their host")


def test_gpu_options_are_the_preset_split_by_the_constructor():
    from tfseqrec.data import splits as splits_lib

    long = splits_lib.Sequences(np.arange(4), np.tile(np.arange(3, 203), 4), np.arange(0, 801, 200))
    choices = _script("gpu").run_options("hstu", "sasrec-plus", long, {"hidden_dim": 32})
    # The constructor takes the loss as an object: the preset's name of it is a training option.
    assert choices.training["loss"] == "softmax" and choices.training["learning_rate"] == 4e-3
    assert {
        k: choices.model_options[k] for k in ("hidden_dim", "num_layers", "num_heads", "temperature")
    } == {
        "hidden_dim": 32,  # given over the preset's 50
        "num_layers": 8,
        "num_heads": 2,
        "temperature": 0.05,
    }
    assert "loss" not in choices.model_options and choices.model_options["num_time_buckets"] == 0  # no times
    # BERT4Rec on ML-1M: its preset's warm-up; on Scientific UniSRec reads its own preset.
    assert _script("gpu").run_options("bert4rec", "rectools", long).training["warmup_epochs"] == 5.0
    assert _script("gpu").run_options("unisrec", "scientific", long).training["epochs"] == 8


def test_gpu_learning_rate_warms_up_by_epochs_and_refuses_other_schedules():
    gpu = _script("gpu")
    assert gpu.learning_rate({"learning_rate": 1e-3, "warmup_epochs": 0.0}, 10) == 1e-3
    schedule = gpu.learning_rate({"learning_rate": 1e-3, "warmup_epochs": 1.5}, 10)
    assert schedule.warmup_steps == 15 and float(schedule(30)) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="cosine"):
        gpu.learning_rate({"learning_rate": 1e-3, "learning_rate_schedule": "cosine"}, 10)


def test_gpu_eval_batches_by_hand():
    cases = splits.Cases(splits.Sequences.from_list([0, 1], [[3, 4, 5], [6]]), np.array([7, 8]))
    x, targets = _script("gpu").eval_batches(cases, 2, batch_size=8)[0]
    assert x["item_ids"].tolist() == [[4, 5], [0, 6]]  # the newest 2, left-padded
    assert x["padding_mask"].tolist() == [[1, 1], [0, 1]]
    # The whole history to filter, padded on the right (its order does not matter).
    assert [sorted(row[row > 0].tolist()) for row in x["history"]] == [[3, 4, 5], [6]]
    assert x["history"][1, 1:].tolist() == [0, 0]
    assert targets.tolist() == [7, 8]


def test_gpu_summary_by_hand():
    gpu = _script("gpu")
    rows = [
        {"fit_minutes": 0.5, "val_ndcg@10": 0.1, "train_seconds": 20.0, "validation_seconds": 2.0},
        {"fit_minutes": 0.7, "val_ndcg@10": 0.185, "train_seconds": 10.0, "validation_seconds": 1.0},
        {"fit_minutes": 0.9, "val_ndcg@10": 0.19, "train_seconds": 12.0, "validation_seconds": 1.0},
    ]
    assert gpu.first_minutes(rows, 0.2) is None
    test = {"ndcg@10": 0.16, "hr@10": 0.3, "mrr": 0.1, "hr@20": 0.4}
    run = gpu.summary("hstu", {}, rows, test, level=0.18)
    assert (run["epochs"], run["best_epoch"], run["best_val_ndcg@10"]) == (3, 3, 0.19)
    seconds = (run["first_epoch_seconds"], run["epoch_seconds_median"], run["validation_seconds_median"])
    assert seconds == (20.0, 11.0, 1.0)
    # 98% of the best 0.19 is 0.1862: the second epoch (0.185) falls short of it.
    minutes = (run["minutes_to_level"], run["minutes_to_98pct_of_best"], run["minutes_to_best"])
    assert minutes == (0.7, 0.9, 0.9)
    assert run["test"] == {"ndcg@10": 0.16, "hr@10": 0.3, "mrr": 0.1}


def test_cold_items_remap_ids_through_raw_ids_and_weigh_parts_by_cases():
    cold = _script("cold")

    source = vocab_lib.ItemVocabulary(["a", "b", "c"])  # ids 3, 4, 5
    target = vocab_lib.ItemVocabulary(["c", "a"])  # c 3, a 4; b unknown
    seqs = splits.Sequences.from_list(["u"], [[3, 4, 5]])
    assert cold.remapped(seqs, source, target).values.tolist() == [4, vocab_lib.OOV_ID, 3]
    cases = splits.Cases(seqs, np.array([5]))
    assert cold.remapped_cases(cases, source, target).targets.tolist() == [3]

    class Scores:  # item "c" (id 3) scores highest, then "a": a miss for "a", a hit at rank 1 for "c"
        max_sequence_length, uses_timestamps = 1, False

        def score(self, window):
            return tf.tile(tf.constant([[2.0, 1.0]]), [tf.shape(window)[0], 1])

    parts = splits.ColdStartSplit(
        splits.Sequences.from_list([], []),
        test_warm=splits.Cases(splits.Sequences.from_list(["u", "v"], [[4], [4]]), np.array([3, 3])),
        test_cold=splits.Cases(splits.Sequences.from_list(["w"], [[4]]), np.array([5])),
        cold_items=np.array([5]),
        report={},
    )
    # Warm: "a" given "b" (unknown to the target vocabulary): rank 2 of 2; cold: "c", rank 1.
    result = cold.metrics_of(Scores(), parts, source, target)
    assert result["cold"]["ndcg@10"] == pytest.approx(1.0)
    assert result["warm"]["ndcg@10"] == pytest.approx(1 / np.log2(3))
    assert result["all"]["ndcg@10"] == pytest.approx((1.0 + 2 / np.log2(3)) / 3)


def test_warm_old_log_by_hand():
    warm = _script("warm")
    # Each user's last tenth (floor, at least one) held out: 2 of 20 events, 1 of 10, 1 of 2; 1 of 1 kept.
    users = np.array(["a"] * 20 + ["b"] * 10 + ["c"] * 2 + ["d"], object)
    events = types.SimpleNamespace(users=users, timestamps=np.arange(33), has_time=False)
    expected = [True] * 18 + [False] * 2 + [True] * 9 + [False] + [True, False] + [True]
    assert warm.old_log(events).tolist() == expected
