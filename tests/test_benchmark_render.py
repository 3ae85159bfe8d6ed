"""``benchmarks/render.py`` and ``benchmarks/records.py``: the committed tables are the stored
records rendered, every record keeps the schema, and the staleness check reads git (no training)."""

import json
import os
import subprocess

import pytest

from tests.test_case import benchmark_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


render = benchmark_script("render")
records = benchmark_script("records")


def test_committed_tables_are_the_records_rendered():
    for page, wanted in render.outputs().items():
        with open(page, encoding="utf-8") as f:
            assert f.read() == wanted, f"{page}: run python benchmarks/render.py"


@pytest.mark.parametrize("stem", records.stems())
def test_every_stored_record_keeps_the_schema(stem):
    stored = records.load(stem)
    assert isinstance(stored, list) and stored
    for i, rec in enumerate(stored):
        assert records.validate(rec) == [], f"{stem} record {i}"


def test_the_schema_refuses_a_record_without_its_fields(tmp_path):
    rec = records.record("sasrec", "sasrec-plus", "ml-1m/ml-1m.txt", seed=0)
    assert records.validate(rec) == []
    assert records.validate({**rec, "seed": "0"}) == ["'seed' is str"]
    assert records.validate({k: v for k, v in rec.items() if k != "commit"}) == ["no field 'commit'"]
    assert records.validate({**rec, "curve": [{"epoch": 1}]}) == [
        "curve point 0 lacks epoch, minutes or val_ndcg@10"
    ]
    with pytest.raises(ValueError, match="record 0: unknown field 'anchor'"):
        records.write(str(tmp_path / "x.json"), [{**rec, "anchor": "0.1857"}])
    with pytest.raises(ValueError, match="not record fields"):
        records.record("sasrec", "p", test=1)


def test_a_script_run_becomes_a_record_with_its_figures():
    run = {
        "model": "hstu",
        "seed": 1,
        "protocol": "hstu-paper",
        "data": "ml-1m/ml-1m_full_sequences.txt.gz",
        "config": {"model": "hstu", "seed": 1, "max_train_minutes": 60.0},
        "val_ndcg@10": [],
        "minutes_at_epoch": [0.5, 1.25],
        "epochs": 2,
        "results": {
            "full_exclude_seen=window": {"ndcg@10": 0.17, "hr@10": 0.3},
            "full_exclude_seen=False": {"ndcg@10": 0.1, "hr@10": 0.2},
        },
        "commit": "abc1234",
        "host_matmul_gflops": 420.5,
        "command": "python benchmarks/ml1m.py --model hstu",
    }
    rec = records.from_ml1m(run)
    assert records.validate(rec) == []
    assert rec["metrics"] == {"ndcg@10": 0.17, "hr@10": 0.3}
    assert rec["options"] == {"max_train_minutes": 60.0} and rec["seed"] == 1
    assert rec["curve"] == [
        {"epoch": 1, "minutes": 0.5, "val_ndcg@10": None},
        {"epoch": 2, "minutes": 1.25, "val_ndcg@10": None},
    ]
    assert rec["extra"] == {
        "epochs": 2,
        "results": {"full_exclude_seen=False": {"ndcg@10": 0.1, "hr@10": 0.2}},
    }
    assert (rec["commit"], rec["host_matmul_gflops"], rec["dataset"]) == (
        "abc1234",
        420.5,
        "ml-1m/ml-1m_full_sequences.txt.gz",
    )


def _store(tmp_path):
    def rec(model, seed, ndcg, hr, day):
        return records.record(
            model,
            "p",
            "d.txt",
            seed=seed,
            commit="abc1234",
            started=f"2026-01-0{day} 03:04 UTC",
            options={"max_train_minutes": 10.0, "learning_rate": 0.004},
            metrics={"ndcg@10": ndcg, "hr@10": hr},
        )

    results = tmp_path / "results"
    results.mkdir()
    records.write(
        str(results / "runs-a.json"), [rec("sasrec", 0, 0.12346, 0.2, 2), rec("sasrec", 1, 0.13346, 0.3, 3)]
    )
    records.write(str(results / "runs-b.json"), [rec("bert4rec", 0, 0.1, 0.2, 4)])
    return render.Store(str(results))


SPEC = {
    "columns": [
        ["model", "name"],
        ["seed", "seed"],
        ["NDCG@10", "metrics/ndcg@10", ".4f"],
        ["HR@10", "metrics/hr@10", ".4f"],
        ["options", "options"],
        ["published", "anchor"],
        ["ran", "date"],
        ["record", "record"],
    ],
    "rows": [
        {"records": "runs-*", "where": {"model": "sasrec"}},
        {"name": "SASRec, mean", "records": "runs-a", "mean": True, "anchor": "p/x"},
    ],
}
ANCHORS = {"p/x": {"id": "p/x", "model": "X", "cite": "Someone 2020", "ndcg@10": 0.1, "hr@10": 0.25}}


def test_a_table_from_hand_made_records(tmp_path):
    store = _store(tmp_path)
    table = render.render_table(SPEC, store, "results/", ANCHORS)
    assert table.split("\n") == [
        "| model | seed | NDCG@10 | HR@10 | options | published | ran | record |",
        "|---|---|---|---|---|---|---|---|",
        "| sasrec | 0 | 0.1235 | 0.2000 | learning_rate=0.004 |  | 2026-01-02 | [runs-a](results/runs-a.json) |",
        "| sasrec | 1 | 0.1335 | 0.3000 | learning_rate=0.004 |  | 2026-01-03 | [runs-a](results/runs-a.json) |",
        "| SASRec, mean | 0, 1 | 0.1285 | 0.2500 | learning_rate=0.004 | 0.1000 / 0.2500 (X, Someone 2020) | "
        "2026-01-02, 2026-01-03 | [runs-a](results/runs-a.json) |",
    ]
    with pytest.raises(ValueError, match="no stored records match 'runs-c'"):
        render.render_table({**SPEC, "rows": [{"records": "runs-c"}]}, store, "", ANCHORS)


def test_a_page_keeps_its_hand_written_text(tmp_path):
    store = _store(tmp_path)
    page = "intro\n<!-- table:t:begin -->\nold\n<!-- table:t:end -->\n*2026-01-05.* A note.\n"
    got = render.render_page(page, {"t": SPEC}, store, "results/", ANCHORS)
    table = render.render_table(SPEC, store, "results/", ANCHORS)
    assert got == f"intro\n<!-- table:t:begin -->\n{table}\n<!-- table:t:end -->\n*2026-01-05.* A note.\n"
    with pytest.raises(ValueError, match="no table 'u'"):
        render.render_page("<!-- table:u:begin -->\n<!-- table:u:end -->\n", {"t": SPEC}, store, "", ANCHORS)


def _git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit(repo, path, text):
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    _git(repo, "add", path)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", path)
    return _git(repo, "rev-parse", "--short", "HEAD")


def test_staleness_follows_later_commits_to_the_code(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    first = _commit(repo, "tfseqrec/models/a.py", "a = 1\n")
    _commit(repo, "README.md", "words\n")  # not the code a result depends on
    loss = _commit(repo, "tfseqrec/losses.py", "b = 2\n")
    assert records.later_commits(first, repo) == [loss]
    assert records.later_commits(first + "+dirty", repo) == [loss]
    assert records.later_commits(loss, repo) == []
    assert records.later_commits("0000000", repo) is None
    assert records.later_commits(None, repo) is None

    results = tmp_path / "results"
    results.mkdir()
    old = records.record("sasrec", "p", commit=first, metrics={"ndcg@10": 0.1})
    records.write(str(results / "old.json"), [old])
    records.write(str(results / "new.json"), [{**old, "commit": loss}])
    records.write(str(results / "lost.json"), [{**old, "commit": None}])
    page = tmp_path / "page.md"
    page.write_text("<!-- table:t:begin -->\n<!-- table:t:end -->\n*2026-01-05.* Beside `new` and `lost`.\n")
    spec = {"t": {"columns": [["model", "name"]], "rows": [{"records": "old"}, {"records": "new"}]}}
    lines = render.stale_report([str(page)], spec, render.Store(str(results)), repo)
    assert lines == [
        f"table t, row old: old ({first}): 1 later commits touch the code ({loss})",
        "note of 2026-01-05: lost (None): unknown commit",
    ]


def test_anchors_name_their_source():
    anchors = render.read_json(render.ANCHORS)
    assert len({a["id"] for a in anchors}) == len(anchors)
    for anchor in anchors:
        assert anchor["source"] and anchor["cite"] and anchor["protocol"] and anchor["assumes"], anchor["id"]
        assert isinstance(anchor["ndcg@10"], float), anchor["id"]
    # RecTools' tutorial on main, without timestamps: the anchor of HSTU on `rectools`.
    by_id = {a["id"]: a for a in anchors}
    assert (by_id["rectools/hstu"]["ndcg@10"], by_id["rectools/hstu"]["hr@10"]) == (0.1718, 0.3023)


def test_every_table_row_selects_records_and_every_file_is_listed():
    specs = render.read_json(render.SPECS)
    store = render.Store()
    for name, spec in specs.items():
        for row in spec.get("rows", []):
            assert store.select(row), (name, row)
    with open(os.path.join(BENCHMARKS, "results", "README.md"), encoding="utf-8") as f:
        index = f.read()
    for stem in records.stems():
        assert f"[{stem}]({stem}.json)" in index
    assert json.dumps(specs)  # the specs are plain data


def test_validation_at_a_budget_and_against_sasrec():
    def run(model, seed, curve):
        points = [{"epoch": i + 1, "minutes": m, "val_ndcg@10": v} for i, (m, v) in enumerate(curve)]
        return records.record(model, "p", "d.csv", seed=seed, curve=points)

    sasrec = run("sasrec", 0, [(2.0, 0.20), (4.5, 0.30), (9.0, 0.40)])
    bert = run("bert4rec", 0, [(6.0, 0.10), (12.0, 0.32)])
    other_seed = run("sasrec", 1, [(1.0, 0.9)])
    peers = [sasrec, bert, other_seed]
    at = {m: render.value(bert, ["", f"val_at/{m}"]) for m in (5, 10, 20)}
    assert at == {5: None, 10: 0.10, 20: 0.32}  # no epoch done by 5 minutes
    assert render.value(sasrec, ["", "val_at/5"]) == 0.30
    # By 10 minutes: 0.10 against SASRec's 0.40; by 20: 0.32 against 0.40 (seed 0's SASRec, not seed 1's).
    assert render.value(bert, ["", "vs_sasrec/val_at/10"], peers) == pytest.approx(0.25)
    assert render.value(bert, ["", "vs_sasrec/val_at/20"], peers) == pytest.approx(0.8)
    assert render.value(bert, ["", "vs_sasrec/val_at/5"], peers) is None
    # A run of a 10-minute budget has no figure by 20 minutes, however late its last epoch ended.
    short = run("bert4rec", 0, [(6.0, 0.10), (10.5, 0.32)])
    short["options"] = {"max_train_minutes": 10.0}
    assert [render.value(short, ["", f"val_at/{m}"]) for m in (5, 10, 20)] == [None, 0.10, None]
