"""The committed benchmark tables are what ``benchmarks/tables.py`` prints from the stored runs (no training)."""

import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def _tables():
    # tables.py imports its sibling scripts as a script run from benchmarks/ would.
    if BENCHMARKS not in sys.path:
        sys.path.append(BENCHMARKS)
    spec = importlib.util.spec_from_file_location("tables", os.path.join(BENCHMARKS, "tables.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_tables_equal_the_stored_runs():
    for path, wanted in _tables().outputs().items():
        name = os.path.relpath(path, ROOT)
        assert not isinstance(wanted, Exception), f"{name}: {wanted}"
        with open(path) as f:
            assert f.read() == wanted, f"{name} differs from its stored runs: run python benchmarks/tables.py"


def test_headline_row_and_markers_by_hand():
    tables = _tables()
    row = tables.headline_row(
        "BERT4Rec", "ML-1M", "sasrec-plus", "0.1537", 0.16434, 0.29316, 60.2, 3, ["a", "b"]
    )
    assert row == (
        "| BERT4Rec (mean of 3 seeds) | ML-1M | [`sasrec-plus`](benchmarks/README.md#protocols) | 0.1643 | "
        "0.2932 | 0.1537 | 60 | [a](benchmarks/results/a.json), [b](benchmarks/results/b.json) |"
    )
    replaced = tables.front_readme(f"intro\n{tables.BEGIN}\nold row\n{tables.END}\nrest\n").split("\n")
    assert replaced[:2] == ["intro", tables.BEGIN] and replaced[-3:] == [tables.END, "rest", ""]
    assert "old row" not in replaced
    with pytest.raises(ValueError, match="results-table:begin"):
        tables.front_readme("a README without the markers\n")


# Hand-made runs of the shape `benchmarks/serving.py --json` and `benchmarks/masking.py --json` write.
ENVIRONMENT = "2 CPU cores, TensorFlow 2.16.2, Keras 3.12.0, Python 3.10.14"
PROVENANCE = {"commit": "abc1234", "started": "2026-01-01 10:00 UTC", "ended": "2026-01-01 10:20 UTC"}
SERVING = {
    "model": "SASRec",
    "signature": "serving_default",
    "history_length": 200,
    "k": 10,
    "num_items": 3416,
    "p50_ms_batch1": 4.0,
    "p99_ms_batch1": 6.5,
    "users_per_s_batch": 2000.0,
    "batch_size": 256,
    "p50_ms_batch": 128.0,
    "p99_ms_batch": 140.3,
    "mflop_per_request": 26.0,
    "gflops_batch1": 6.5,
    "gflops_batch": 52.0,
    "peak_gflops": 130.0,
    "tensorflow": "2.16.2",
    "python": "3.10.14",
    "cpus": 2,
    "command": "python benchmarks/serving.py --json benchmarks/results/serving.json",
    **PROVENANCE,
    "environment": ENVIRONMENT,
}
MASKING = {
    "batch_size": 1024,
    "length": 200,
    "num_items": 3416,
    "mask_prob": 0.2,
    "step_batch_size": 256,
    "rows": {
        "ClozeMasking, tf.function (graph)": 200000.0,
        "ClozeMasking, tf.function + XLA": 300000.0,
        "cloze_dataset + ClozeMasking (tf.data map)": 100000.0,
        "per-item Python loop + collate (BertTrainDataset)": 2000.0,
    },
    "step_ms": 120.0,
    "premasked_step_ms": 118.5,
    "masking_ms": 1.5,
    "masking_share": 0.0125,
    "command": "python benchmarks/masking.py --json benchmarks/results/masking.json",
    **PROVENANCE,
    "environment": ENVIRONMENT,
}


def _cells(text):
    """The rows of the markdown tables in ``text``, each a list of its stripped cells (rules left out)."""
    rows = [line.strip().strip("|").split("|") for line in text.split("\n") if line.startswith("|")]
    return [[c.strip() for c in row] for row in rows if not set("".join(row)) <= set("-: ")]


def _stored(tmp_path, monkeypatch, tables, runs):
    for stem, run in runs.items():
        (tmp_path / f"{stem}.json").write_text(json.dumps(run))
    monkeypatch.setattr(tables, "RESULTS", str(tmp_path))


def test_serving_table_from_a_stored_run(tmp_path, monkeypatch):
    tables = _tables()
    _stored(tmp_path, monkeypatch, tables, {"serving": SERVING})
    text = tables.serving_tables(["serving"])
    assert text.split("\n")[0] == f"SASRec, vocabulary of 3,416 items, history 200, k = 10; {ENVIRONMENT}."
    # users/s at batch 1 is 1000 / p50. Stored before hosts were measured, the share is of the
    # assumed 130 GFLOP/s the run stored (6.5 / 130, 52 / 130), marked and explained under the table.
    header = ["batch", "p50 (ms)", "p99 (ms)", "users/s", "MFLOP/request", "GFLOP/s"]
    header.append("share of the host's fp32 matmul GFLOP/s")
    assert _cells(text) == [
        header,
        ["1", "4.00", "6.50", "250", "26.0", "6.5", "5% of 130\\*"],
        ["256", "128.0", "140.3", "2,000", "26.0", "52.0", "40% of 130\\*"],
    ]
    assert "\\* Stored before runs measured their host: the share is of an assumed 130 GFLOP/s" in text
    assert "targets: p50 <= 5 ms at batch 1: met | >= 1,000 users/s at batch 256: met" in text
    # A run that measured its host: the share is of that rate (6.5 / 520, 52 / 520), unmarked.
    measured = {k: v for k, v in SERVING.items() if k != "peak_gflops"}
    _stored(tmp_path, monkeypatch, tables, {"serving": {**measured, "host_matmul_gflops": 520.0}})
    text = tables.serving_tables(["serving"])
    assert [row[-1] for row in _cells(text)[1:]] == ["1% of 520", "10% of 520"]
    assert "Stored before runs measured their host" not in text
    assert tables.protocol_of("serving") == "serving"
    assert tables.command("serving") == SERVING["command"]


def test_masking_tables_from_a_stored_run(tmp_path, monkeypatch):
    tables = _tables()
    _stored(tmp_path, monkeypatch, tables, {"masking": MASKING})
    text = tables.masking_tables(["masking"])
    assert text.split("\n")[0] == f"Batch 1,024 x length 200, 3,416 items, mask_prob 0.2; {ENVIRONMENT}."
    assert _cells(text) == [
        ["method", "sequences/s", "vs loop"],
        ["ClozeMasking, tf.function (graph)", "200,000", "100.0x"],
        ["ClozeMasking, tf.function + XLA", "300,000", "150.0x"],
        ["cloze_dataset + ClozeMasking (tf.data map)", "100,000", "50.0x"],
        ["per-item Python loop + collate (BertTrainDataset)", "2,000", "1.0x"],
        ["measure", "value"],
        ["step with masking inside (ms)", "120.0"],
        ["step on pre-masked batch (ms)", "118.5"],
        ["masking alone, same batch (ms)", "1.50"],
        ["masking share of the step", "1.25%"],
    ]
    assert "training step (batch 256, length 200," in text
    assert tables.protocol_of("masking") == "masking"
    assert tables.command("masking") == MASKING["command"]


def test_hstu_step_tables_and_paragraph_from_a_stored_run(tmp_path, monkeypatch):
    tables = _tables()
    base, xla, bf16, backbone = (
        "float32 (the default)",
        "XLA (--xla)",
        "bfloat16 activations (--mixed-precision)",
        "backbone forward and backward, float32",
    )
    run = {
        "batch_size": 128,
        "rounds": 15,
        "length": 200,
        "num_items": 3416,
        "widths": [
            {
                "width": 100,
                "ms": {base: 400.0, xla: 600.0, bf16: 360.0, backbone: 300.0},
                "flops": {"attention": 10e9, "dense": 10e9, "scores": 20e9},
            },
            {
                "width": 200,
                "ms": {base: 1000.0, xla: 1500.0, bf16: 1100.0, backbone: 800.0},
                "flops": {"attention": 60e9, "dense": 20e9, "scores": 20e9},
            },
        ],
        "command": "python benchmarks/hstu_step.py --json benchmarks/results/hstu-step.json",
        **PROVENANCE,
        "environment": ENVIRONMENT,
        "host_matmul_gflops": 200.0,
    }
    _stored(tmp_path, monkeypatch, tables, {"hstu-step": run})
    text = tables.hstu_step_tables(["hstu-step"])
    assert text.split("\n")[0] == (
        f"HSTU at ML-1M's size (3,416 items, length 200), batches of 128, the median of 15 calls each in "
        f"turn; {ENVIRONMENT}."
    )
    # GFLOP/s is the step's 40 or 100 GFLOP over its seconds; the share is of the host's 200.
    assert _cells(text) == [
        ["width", "step", "ms", "vs float32", "GFLOP/s", "share of 200 GFLOP/s"],
        ["100", base, "400.0", "1.00x", "100.0", "50%"],
        ["100", xla, "600.0", "1.50x", "66.7", "33%"],
        ["100", bf16, "360.0", "0.90x", "111.1", "56%"],
        ["100", backbone, "300.0", "0.75x", "", ""],
        ["200", base, "1000.0", "1.00x", "100.0", "50%"],
        ["200", xla, "1500.0", "1.50x", "66.7", "33%"],
        ["200", bf16, "1100.0", "1.10x", "90.9", "45%"],
        ["200", backbone, "800.0", "0.80x", "", ""],
        [
            "width",
            "matmul GFLOP a step",
            "attention's two [n, n] products",
            "dense layers",
            "scores over the 3,416 items",
            "the loss and Adam's share of the float32 step",
        ],
        ["100", "40.0", "25%", "25%", "50%", "25%"],
        ["200", "100.0", "60%", "20%", "20%", "20%"],
    ]
    after = " ".join(tables.hstu_step_after(["hstu-step"]).split())
    assert "At width 200, the backbone's forward and backward took 800 of the step's 1000 ms (80%)" in after
    assert (
        "are 60% of the step's matmul FLOPs, and the step reaches 100 GFLOP/s, 50% of the host's 200" in after
    )
    assert f"{xla}: 1.50x the float32 step's time (longer at every width)." in after
    assert f"{bf16}: 0.90-1.10x the float32 step's time (longer at some widths, shorter at others)." in after
    assert "A shorter step is not yet a faster model" in after
    assert tables.protocol_of("hstu-step") == "hstu-step"
    assert tables.command("hstu-step") == run["command"]


def test_hstu_rectools_rate_probe_epoch_by_epoch_by_hand(tmp_path, monkeypatch):
    tables = _tables()
    monkeypatch.setattr(tables, "RATE_EPOCHS", (1, 2, 3))

    def run(seed, val, host):
        test = {"ndcg@10": 0.1 + seed / 100, "hr@10": 0.2}
        return [
            {
                "seed": seed,
                "epochs": len(val),
                "val_ndcg@10": val,
                "best_val_ndcg@10": max(val),
                "best_epoch": 1 + val.index(max(val)),
                "host_matmul_gflops": host,
                "results": {"full_exclude_seen=True": test},
            }
        ]

    seeds = [
        run(0, [0.1, 0.05, 0.2, 0.5], 480.0),
        run(1, [0.1, 0.3, 0.2, 0.4], 490.0),
        run(2, [0.2, 0.1, 0.1, 0.45], 500.0),
    ]
    stems = tables.HSTU_RECTOOLS_SEEDS
    _stored(
        tmp_path,
        monkeypatch,
        tables,
        {
            **dict(zip(stems, seeds)),
            tables.HSTU_RECTOOLS_RATE: run(3, [0.3, 0.35, 0.4], 210.0)
            + run(4, [0.2, 0.25, 0.3, 0.35], 220.0),
        },
    )
    text = tables.hstu_rectools_rate_table([*stems, tables.HSTU_RECTOOLS_RATE])
    # The best so far at epochs 1, 2 and 3 of each run, its best (epoch) and test figures.
    assert _cells(text) == [
        ["Adam", "seed", "epoch 1", "epoch 2", "epoch 3", "best (epoch)", "test NDCG@10 / HR@10"],
        ["2e-3", "0", "0.1000", "0.1000", "0.2000", "0.5000 (4)", "0.1000 / 0.2000"],
        ["2e-3", "1", "0.1000", "0.3000", "0.3000", "0.4000 (4)", "0.1100 / 0.2000"],
        ["2e-3", "2", "0.2000", "0.2000", "0.2000", "0.4500 (4)", "0.1200 / 0.2000"],
        ["4e-3", "3", "0.3000", "0.3500", "0.4000", "0.4000 (3)", "0.1300 / 0.2000"],
        ["4e-3", "4", "0.2000", "0.2500", "0.3000", "0.3500 (4)", "0.1400 / 0.2000"],
    ]
    # A run shorter than a column's epoch leaves its cell blank.
    monkeypatch.setattr(tables, "RATE_EPOCHS", (3, 4))
    short = _cells(tables.hstu_rectools_rate_table([*stems, tables.HSTU_RECTOOLS_RATE]))
    assert short[-2] == ["4e-3", "3", "0.4000", "", "0.4000 (3)", "0.1300 / 0.2000"]
    after = " ".join(tables.hstu_rectools_rate_after([*stems, tables.HSTU_RECTOOLS_RATE]).split())
    # Within the shorter 4e-3 run's 3 epochs: 4e-3's best 0.4 and 0.3; the 2e-3 seeds' 0.2, 0.3, 0.2:
    # the ranges meet at 0.3. 98% of the lowest 2e-3 best (0.4) is 0.392: epoch 3 for seed 3, none of
    # seed 4's 4 epochs; epochs 4, 4 and 4 at 2e-3.
    assert "After 3 epochs, the best validation NDCG@10 at 4e-3 (seeds 3 and 4) was 0.3000-0.4000" in after
    assert "against 0.2000-0.3000 for the 2e-3 seeds" in after
    assert "overlapping their range" in after
    assert (
        "98% of the lowest of the 2e-3 seeds' best (0.3920) came at epoch 3 (seed 3) and at none of its "
        "4 epochs (seed 4) at 4e-3, at epochs 4, 4 and 4 at 2e-3" in after
    )
    assert "hosts measured 210-220 GFLOP/s of fp32 matmul against the 2e-3 seeds' 480-500" in after
    # Two 4e-3 runs of 3 epochs that both stay below 0.392 (best 0.35 and 0.3): named once.
    (tmp_path / f"{tables.HSTU_RECTOOLS_RATE}.json").write_text(
        json.dumps(run(5, [0.3, 0.35, 0.35], 210.0) + run(6, [0.2, 0.25, 0.3], 220.0))
    )
    missed = " ".join(tables.hstu_rectools_rate_after([*stems, tables.HSTU_RECTOOLS_RATE]).split())
    assert "(0.3920) came at none of their 3 epochs (seeds 5 and 6) at 4e-3, at epochs 4, 4 and 4" in missed
    # One 4e-3 run alone (seed 3): ahead of every 2e-3 seed within its 3 epochs.
    (tmp_path / f"{tables.HSTU_RECTOOLS_RATE}.json").write_text(json.dumps(run(3, [0.3, 0.35, 0.4], 210.0)))
    alone = " ".join(tables.hstu_rectools_rate_after([*stems, tables.HSTU_RECTOOLS_RATE]).split())
    assert "at 4e-3 (seed 3) was 0.4000, against 0.2000-0.3000" in alone
    assert "ahead of their range" in alone
    assert "hosts measured 210 GFLOP/s" in alone


def test_a_section_shows_once_its_json_is_stored_and_leaves_not_stored(tmp_path, monkeypatch):
    tables = _tables()
    _stored(tmp_path, monkeypatch, tables, {"serving": SERVING})
    parts = {h: part for h, part in tables.sections().items() if h in ("Serving", "Cloze masking")}
    monkeypatch.setattr(tables, "sections", lambda: parts)
    monkeypatch.setattr(tables, "HEADLINES", [])
    readme = tables.benchmarks_readme()
    assert "## Serving" in readme and "## Cloze masking" not in readme
    assert "Stored: [`serving.json`](results/serving.json)." in readme
    assert "| 1 | 4.00 | 6.50 | 250 | 26.0 | 6.5 | 5% of 130\\* |" in readme
    not_stored = readme[readme.index("## Not stored yet") :]
    assert "benchmarks/results/masking.json" in not_stored
    assert "benchmarks/results/serving.json" not in not_stored

    # An absent JSON that no NOT_STORED command writes is an error naming the file.
    (tmp_path / "serving.json").unlink()
    monkeypatch.setattr(tables, "NOT_STORED", [w for w in tables.NOT_STORED if "serving.py" not in w[1]])
    with pytest.raises(ValueError, match=r"benchmarks/results/serving\.json is missing"):
        tables.benchmarks_readme()


def _side(library, ndcg, last_minute=25.0):
    """A library's side; ``last_minute``: when its last epoch ended (past the budget's 30: the
    budget ended it; before: early stopping)."""
    return {
        "library": library,
        "test": {"ndcg@10": ndcg, "hr@10": 2 * ndcg},
        "best_val_ndcg@10": ndcg + 0.01,
        "epochs": 10,
        "best_epoch": 8,
        "minutes_to_98pct_of_best": 12.0,
        "minutes_to_best": 20.0,
        "elapsed_seconds": [60.0 * last_minute * (i + 1) / 10 for i in range(10)],
    }


PEERS = {
    "protocol": {
        "name": "rectools",
        "data_file": "ml-1m/ml-1m_full_sequences.txt.gz",
        "validation": "last",
        "exclude_seen": "history",
        "training": {},
        "anchor": "RecTools: 0.2164 / 0.3642",
    },
    "data": "ml-1m/ml-1m_full_sequences.txt.gz",
    "anchored": True,
    "minutes": 30.0,
    "seed": 0,
    "environment": ENVIRONMENT,
    "command": "benchmarks/peers/side_by_side.py --protocol rectools --models hstu --json",
    "models": {
        "sasrec": [_side("tfseqrec", 0.2), _side("RecTools 0.19", 0.19, last_minute=31.0)],
        "hstu": [_side("tfseqrec", 0.21)],
    },
    # Two commands, one model each: the section lists both, once each, in the order they ran.
    "model_runs": {
        "sasrec": {
            "command": "benchmarks/peers/side_by_side.py --protocol rectools --models sasrec --json",
            "host_matmul_gflops": 211.6,
        },
        # Stored before runs measured their host.
        "hstu": {"command": "benchmarks/peers/side_by_side.py --protocol rectools --models hstu --json"},
    },
}


def test_a_peers_record_gets_a_section_of_its_protocol(tmp_path, monkeypatch):
    tables = _tables()
    _stored(tmp_path, monkeypatch, tables, {})
    assert tables.peers_sections() == []  # none until a run stores a record
    _stored(tmp_path, monkeypatch, tables, {"peers-rectools": PEERS})
    [section] = tables.peers_sections()
    assert (section.heading, section.protocol, section.stems) == (
        "tfseqrec and RecTools on `rectools`",
        "rectools",
        ["peers-rectools"],
    )
    assert tables.command("peers-rectools") == (
        "python benchmarks/peers/side_by_side.py --protocol rectools --models sasrec --json\n"
        "python benchmarks/peers/side_by_side.py --protocol rectools --models hstu --json"
    )
    text = section.render()
    assert "| sasrec | tfseqrec | 0.2000 | 0.4000 | 0.2100 | 10 (8) | 12.0 | 20.0 |" in text
    assert "| sasrec | RecTools 0.19 | 0.1900 | 0.3800 | 0.2000 | 10 (8) | 12.0 | 20.0 |" in text
    # Each model's host, in the order the models ran; a record stored before hosts were measured says so.
    assert "Host fp32 matmul (GFLOP/s) while each model ran: sasrec 212, hstu not measured." in text
    # The anchor as benchmarks/protocols.py words it today, not as the record stored it.
    assert f"Comparable with: {tables.protocols.get('rectools').anchor}." in text
    assert "RecTools: 0.2164 / 0.3642" not in text
    # The paragraph under the table, from the record: ratios to RecTools' tutorial figures
    # (SASRec 0.1622, HSTU 0.1745): 0.2 / 0.1622 = 1.23x, 0.21 / 0.1745 = 1.20x.
    assert " ".join(tables.peers_after(["peers-rectools"]).split()) == (
        "tfseqrec is ahead for every model run on both sides, 30 minutes each. SASRec: tfseqrec "
        "0.2000 / 0.4000 (levelled off: best epoch 8 of 10, 98% of its best at 12.0 minutes) against "
        "RecTools 0.19's 0.1900 / 0.3800 (the budget ran out at epoch 10, its best epoch 8, 98% of its "
        "best at 12.0 minutes); 1.23x the 0.1622 / 0.2878 of SASRec in RecTools' HSTU tutorial (MTS AI). HSTU: "
        "tfseqrec 0.2100 / 0.4200 (levelled off: best epoch 8 of 10, 98% of its best at 12.0 minutes), "
        "the peer not run; 1.20x the 0.1745 / 0.3087 of HSTU with relative position attention only (no "
        "timestamps) in RecTools' HSTU tutorial (MTS AI)."
    )
    # The front page's protocol table: a row a model, the peer's cell "not run" where it did not.
    assert tables.peers_summary().split("\n")[2:] == [
        "| SASRec | `rectools` | 0.2000 / 0.4000 (12.0 min) | 0.1900 / 0.3800 (12.0 min) | "
        "0.1622 / 0.2878, RecTools' HSTU tutorial (MTS AI) |",
        "| HSTU | `rectools` | 0.2100 / 0.4200 (12.0 min) | not run | 0.1745 / 0.3087, RecTools' HSTU "
        "tutorial (MTS AI) |",
    ]


def test_the_side_by_side_rows_hosts_are_named_where_measured():
    tables = _tables()
    # PEERS measured SASRec's host (211.6 GFLOP/s, printed 212) and not HSTU's.
    assert tables.peers_hosts([PEERS]) == (
        "Both libraries of a row ran on one host, so their minutes compare; rows ran on other days, on "
        "hosts whose fp32 matmul rate (GFLOP/s) was measured for SASRec on `rectools` (212), not for the "
        "others, so minutes across rows do not."
    )
    unmeasured = dict(PEERS, model_runs={"hstu": PEERS["model_runs"]["hstu"]})
    assert "on hosts not measured" in tables.peers_hosts([unmeasured])
    # Two protocols measured for SASRec, one for HSTU: each model named once, its rates in its
    # protocols' order.
    sasrec = PEERS["model_runs"]["sasrec"]
    paper = dict(
        PEERS,
        protocol=dict(PEERS["protocol"], name="hstu-paper"),
        model_runs={
            "sasrec": dict(sasrec, host_matmul_gflops=404.4),
            "hstu": dict(sasrec, host_matmul_gflops=219.0),
        },
    )
    assert tables.peers_hosts([PEERS, paper]) == (
        "Both libraries of a row ran on one host, so their minutes compare; rows ran on other days, on "
        "hosts whose fp32 matmul rate (GFLOP/s) was measured for SASRec on `rectools` and `hstu-paper` "
        "(212 and 404) and for HSTU on `hstu-paper` (219), not for the others, so minutes across rows do "
        "not."
    )


def test_published_figures_are_typed_once_in_protocols():
    # Every table and anchor reads a published figure from protocols.PUBLISHED: a figure retyped
    # elsewhere in the benchmark code could drift from it.
    protocols = _tables().protocols
    sources = {}
    for folder in (BENCHMARKS, os.path.join(BENCHMARKS, "peers")):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    sources[os.path.relpath(os.path.join(folder, name), ROOT)] = f.read()
    for key, published in protocols.PUBLISHED.items():
        for value in (published.ndcg, published.hr):
            text = f"{value:.4f}"
            where = {path: source.count(text) for path, source in sources.items() if text in source}
            assert where == {"benchmarks/protocols.py": 1}, f"{key}: {text} typed in {where}"
    assert protocols.published("hstu-paper/hstu").figures == "0.1893 / 0.3294"
    assert protocols.published("sasrec-plus/bert4rec").labelled == "0.1537 NDCG@10 / 0.2843 HR@10"
    with pytest.raises(KeyError, match="sasrec-plus/sasrec"):
        protocols.published("sasrec-plus/hstu")


def test_quoted_figures_are_typed_once_in_protocols():
    protocols = _tables().protocols
    with open(os.path.join(BENCHMARKS, "tables.py")) as f:
        source = f.read()
    for key, (_, value) in protocols.QUOTED.items():
        assert f"{value:.4f}" not in source, f"{key}: {value:.4f} typed in benchmarks/tables.py"
    assert protocols.quoted("sasrec-paper/sampled") == "0.5905"


def test_a_hand_written_note_quotes_only_figures_its_runs_hold(tmp_path, monkeypatch):
    tables = _tables()
    own = {"model": "sasrec", "results": {"ndcg@10": 0.18871, "hr@10": 0.3210}}
    other = {"model": "sasrec", "results": {"ndcg@10": 0.1711}}
    _stored(tmp_path, monkeypatch, tables, {"own": own, "other": other})
    # 0.1887 and 0.3210 are the run's (0.18871 at four places); 0.2549 is their mean (by hand:
    # (0.1887 + 0.3210) / 2 = 0.25485, printed 0.2549 as the tables print it); 0.1857 is
    # SASRec+'s published figure and 0.5905 the SASRec paper's, quoted in protocols.
    text = "0.1887 / 0.3210, mean 0.2549; SASRec+ 0.1857; the paper's sampled 0.5905"
    assert tables.unbacked_figures(text, ["own"]) == []
    # A typo, and a figure of another run the note does not cite, are both refused.
    assert tables.unbacked_figures(text + "; typo 0.1897; other 0.1711", ["own"]) == ["0.1711", "0.1897"]
    assert tables.unbacked_figures("other 0.1711", ["own", "other"]) == []

    section = tables.Section("Probe", "sasrec-plus", ["own"], lambda stems: "", after="beside 0.1711")
    monkeypatch.setattr(tables, "protocol_of", lambda stem: "sasrec-plus")
    monkeypatch.setattr(tables, "command", lambda stem: f"python benchmarks/ml1m.py --json {stem}.json")
    with pytest.raises(ValueError, match=r"section 'Probe' quotes 0\.1711, which neither its runs"):
        section.render()
    cited = tables.Section(
        "Probe", "sasrec-plus", ["own"], lambda stems: "", after="beside 0.1711", cites=("other",)
    )
    assert (
        "Stored: [`own.json`](results/own.json). The notes also quote [`other.json`](results/other.json)."
        in (cited.render())
    )


def _seed_run(seed, ndcg, hr, wall_seconds, near_minutes):
    return {
        "model": "sasrec",
        "seed": seed,
        "epochs": 10,
        "best_epoch": 8,
        "config": {"max_train_minutes": 30.0, "epochs": 200},
        "train_wall_seconds": wall_seconds,
        "epoch_seconds_median": 12.0,
        "minutes_to_98pct_of_best": near_minutes,
        "results": {"full_exclude_seen=True": {"ndcg@10": ndcg, "hr@10": hr}},
    }


def test_probes_table_and_paragraph_by_hand(tmp_path, monkeypatch):
    tables = _tables()

    def run(seed, ndcg, near, **options):
        return {
            **_seed_run(seed, ndcg, 2 * ndcg, 600.0, near),
            "config": {"model": "sasrec", "max_train_minutes": 30.0, "seed": seed, **options},
            "best_val_ndcg@10": ndcg + 0.01,
            "minutes_to_best": near + 1,
        }

    defaults = [run(0, 0.18, 10.0), run(1, 0.20, 12.0)]
    probe = [run(0, 0.19, 9.0, learning_rate=0.004, learning_rate_schedule="cosine")]
    _stored(tmp_path, monkeypatch, tables, {"defaults": defaults, "probe": probe})
    table = tables.ml1m_probes_table(["defaults", "probe"]).split("\n")
    # Row: options, seed, test NDCG@10 / HR@10, best validation (+0.01), epochs (best), minutes
    # to 98% and to best, 600 s of training = 10.0 minutes, 12.0 s an epoch.
    assert table[2] == "| defaults | 0 | 0.1800 | 0.3600 | 0.1900 | 10 (8) | 10.0 | 11.0 | 10.0 | 12.0 |"
    assert table[4].startswith("| learning_rate=0.004, learning_rate_schedule=cosine | 0 | 0.1900 | 0.3800 |")
    # The defaults' mean by hand: (0.18 + 0.20) / 2 = 0.19, HR (0.36 + 0.40) / 2 = 0.38.
    after = " ".join(tables.ml1m_probes_after(["defaults", "probe"]).split())
    assert "defaults: 0.1900 / 0.3800 (the mean of 2 seeds), 98% of best after 10.0-12.0 minutes;" in after
    assert (
        "learning_rate_schedule=cosine: 0.1900 / 0.3800 (one seed), 98% of best after 9.0 minutes." in after
    )


def test_window_stride_paragraph_weighs_the_gain_against_the_defaults_spread(tmp_path, monkeypatch):
    tables = _tables()

    def run(seed, ndcg, **options):
        return {
            **_seed_run(seed, ndcg, 2 * ndcg, 1800.0, 10.0),
            "config": {"model": "sasrec", "max_train_minutes": 30.0, "seed": seed, **options},
            "best_val_ndcg@10": ndcg + 0.01,
            "minutes_to_best": 20.0,
        }

    first, rest = tables.SASREC_STRIDE_STEMS
    stored = {"defaults": [run(0, 0.18), run(1, 0.20)], first: [run(0, 0.21, window_stride=200)]}
    _stored(tmp_path, monkeypatch, tables, {**stored, rest: [run(1, 0.22, window_stride=200)]})
    after = " ".join(tables.sasrec_stride_after(["defaults", first, rest]).split())
    # By hand: the stride's mean 0.215 against the defaults' 0.19 gains 0.025; their spread is 0.02.
    assert (
        "The stride gains 0.0250 test NDCG@10 on the mean, more than the defaults' spread over seeds (0.0200)."
        in after
    )
    assert "With `window_stride: 200`, the mean over 2 seeds, 0.2150 / 0.4300," in after
    _stored(tmp_path, monkeypatch, tables, {**stored, rest: [run(1, 0.17, window_stride=200)]})
    after = " ".join(tables.sasrec_stride_after(["defaults", first, rest]).split())
    assert "gains 0.0000 test NDCG@10 on the mean, no more than the defaults' spread" in after


def test_defaults_stride_paragraph_by_hand(tmp_path, monkeypatch):
    tables = _tables()

    def run(seed, **ndcg):
        rows = [
            {"dataset": "ml-100k", "model": m, "test": {"ndcg@10": v}, "best_val_ndcg@10": v + 0.01}
            for m, v in ndcg.items()
        ]
        return {"args": {"seed": seed}, "rows": rows}

    defaults = {"d0": run(0, sasrec=0.20, hstu=0.18), "d1": run(1, sasrec=0.22, hstu=0.18)}
    monkeypatch.setattr(tables, "DEFAULTS_SEEDS", list(defaults))
    _stored(tmp_path, monkeypatch, tables, {**defaults, "s0": run(0, sasrec=0.17, hstu=0.19)})
    _stored(tmp_path, monkeypatch, tables, {"s1": run(1, sasrec=0.19, hstu=0.19)})
    after = " ".join(tables.defaults_stride_after(["s0", "s1"]).split())
    # By hand: SASRec's mean 0.18 against 0.21 falls 0.03, more than the defaults' spread 0.02;
    # HSTU's 0.19 is above its defaults' 0.18.
    assert (
        "SASRec 0.1700 and 0.1900 (mean 0.1800) against the defaults' 0.2000 and 0.2200 (mean 0.2100, "
        "spread 0.0200); best validation 0.1900 against 0.2200 on the mean;" in after
    )
    assert "HSTU 0.1900 and 0.1900 (mean 0.1900) against the defaults' 0.1800 and 0.1800" in after
    assert "The stride falls by more than the defaults' spread for SASRec:" in after
    _stored(tmp_path, monkeypatch, tables, {"s1": run(1, sasrec=0.23, hstu=0.19)})
    after = " ".join(tables.defaults_stride_after(["s0", "s1"]).split())
    assert "(mean 0.2000)" in after and "No model falls by more than the defaults' spread" in after


def test_bert4rec_stride_paragraph_by_hand(tmp_path, monkeypatch):
    tables = _tables()
    run = {
        "seed": 0,
        "config": {"model": "bert4rec", "max_train_minutes": 30.0, "seed": 0, "window_stride": 200},
        "results": {"full_exclude_seen=True": {"ndcg@10": 0.15, "hr@10": 0.28}},
        "epochs": 3,
        "best_epoch": 3,
        "best_val_ndcg@10": 0.16,
        "minutes_at_epoch": [0.5, 1.0, 1.5],  # 30 s an epoch
    }
    side = {
        "library": "tfseqrec",
        "config": {"model": "bert4rec", "max_train_minutes": 30.0, "seed": 0},
        "test": {"ndcg@10": 0.17, "hr@10": 0.30},
        "epochs": 4,
        "best_epoch": 2,
        "best_val_ndcg@10": 0.18,
        "elapsed_seconds": [20.0, 40.0, 60.0, 80.0],  # 20 s an epoch
    }
    peers = {"models": {"bert4rec": [side, {**side, "library": "rectools"}]}}
    first, rest = tables.BERT4REC_SEED_STEMS
    seeds = {first: [run], rest: [{**run, "results": {"full_exclude_seen=True": {"ndcg@10": 0.175}}}]}
    _stored(tmp_path, monkeypatch, tables, {"stride": [run], "peers-sasrec-plus": peers, **seeds})
    after = " ".join(tables.bert4rec_stride_after(["stride"]).split())
    # By hand: 0.15 - 0.17 = -0.02, within the headline seeds' spread, 0.175 - 0.15 = 0.025.
    assert (
        "One seed: the stride's -0.0200 is within the spread of BERT4Rec's three 60-minute seeds (0.0250)"
        in after
    )
    assert after.startswith(
        "With `window_stride: 200`, seed 0: test NDCG@10 / HR@10 0.1500 / 0.2800 after 3 epochs (best 3, "
        "best validation 0.1600, 30.0 s an epoch with its validation), against the defaults' 0.1700 / "
        "0.3000 after 4 epochs (best 2, best validation 0.1800, 20.0 s an epoch) in the same 30 minutes"
    )
    _stored(
        tmp_path,
        monkeypatch,
        tables,
        {rest: [{**run, "results": {"full_exclude_seen=True": {"ndcg@10": 0.16}}}]},
    )
    after = " ".join(tables.bert4rec_stride_after(["stride"]).split())
    assert "the stride's -0.0200 is beyond the spread of BERT4Rec's three 60-minute seeds (0.0100)" in after
    _stored(tmp_path, monkeypatch, tables, {"stride": [{**run, "seed": 1}]})
    with pytest.raises(ValueError, match="differ in seed or budget"):
        tables.bert4rec_stride_after(["stride"])


def test_seeds_paragraph_is_written_from_the_stored_runs(tmp_path, monkeypatch):
    tables = _tables()
    runs = [
        _seed_run(0, 0.20, 0.33, 1800.0, 10.0),
        _seed_run(1, 0.18, 0.31, 1500.0, 12.5),  # 25 minutes: patience ended it
        _seed_run(2, 0.19, 0.32, 1790.0, 11.0),  # within two 12 s epochs of the budget
    ]
    _stored(tmp_path, monkeypatch, tables, {"seeds": runs})
    after = tables.seeds_after([("sasrec-plus/sasrec", "SASRec+'s {fig}")], target=0.19)
    # Mean 0.19, sample sd 0.01: SASRec+'s 0.1857 is within one sd, so "level with".
    assert " ".join(after(["seeds"]).split()) == (
        "The mean over 3 seeds, 0.1900 / 0.3200, is level with SASRec+'s 0.1857 / 0.3159; seeds 0 "
        "and 2 reached 0.19 (0.1800-0.2000 over the seeds). Seed 1 stopped early (patience) after 25 minutes. 98% of "
        "each seed's best validation NDCG@10 came after 10.0-12.5 minutes."
    )
    # A run that ended at its epoch cap (a fixed-length decay) was not stopped by patience.
    capped = {**runs[1], "config": {"max_train_minutes": 30.0, "epochs": 10}}
    _stored(tmp_path, monkeypatch, tables, {"capped": [runs[0], capped, runs[2]]})
    assert "stopped early" not in after(["capped"])
    # Without a target the sentence has no "reached".
    untargeted = tables.seeds_after([("sasrec-plus/sasrec", "SASRec+'s {fig}")])(["seeds"])
    assert "is level with SASRec+'s 0.1857 / 0.3159 (0.1800-0.2000 over the seeds)." in " ".join(
        untargeted.split()
    )
    # One seed: its ratio to the published figure (0.2 / 0.1857), no spread.
    _stored(tmp_path, monkeypatch, tables, {"seed": runs[:1]})
    one = tables.seeds_after([("sasrec-plus/sasrec", "SASRec+'s {fig}")])(["seed"])
    assert " ".join(one.split()) == (
        "One seed so far: 0.2000 / 0.3300, 1.08x SASRec+'s 0.1857 / 0.3159. 98% of its best "
        "validation NDCG@10 came after 10.0 minutes; its best epoch was 8 of 10."
    )
    assert tables.relation([0.19, 0.2], 0.1) == "above" and tables.relation([0.19, 0.2], 0.3) == "below"


def test_minutes_to_a_level_and_validation_at_minutes_by_hand():
    tables = _tables()
    run = {"minutes_at_epoch": [0.5, 1.0, 1.5, 2.0], "val_ndcg@10": [0.10, 0.20, 0.15, 0.25]}
    # By hand: 0.2 is first reached at the second epoch's end (1.0 minutes); 0.3 never.
    assert tables.minutes_to(run, 0.2) == 1.0 and tables.minutes_to(run, 0.3) is None
    # The last epoch ended within 1.7 minutes is the third (1.5 minutes): its 0.15, not the best so far.
    assert tables.val_at_minutes(run, 1.7) == 0.15 and tables.val_at_minutes(run, 2.0) == 0.25
