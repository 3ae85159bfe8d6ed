"""``tfseqrec report`` on two ML-1M models, opened in headless Chromium."""

import contextlib
import io
import json
import os
import re
import shutil

import numpy as np
import pytest

from tfseqrec import beyond_accuracy, cli, report
from tfseqrec.data import splits

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
TINY = ["--epochs", 1, "--hidden-dim", 8, "--max-sequence-length", 20, "--batch-size", 256, "--quiet"]


def _tfseqrec(*args):
    """``tfseqrec ARGS`` in this process (no interpreter to start): ``(stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in args])
    assert status == 0, err.getvalue()
    return out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def page(data_root, tmp_path_factory):
    """SASRec and HSTU trained for an epoch on ML-1M, the report of both and its summary."""
    work = tmp_path_factory.mktemp("report")
    ml1m = data_root / "ml-1m"
    for model in ("sasrec", "hstu"):
        _tfseqrec("train", "--model", model, "--data", ml1m / "ml-1m.txt", "--output", work / model, *TINY)
    names = work / "ml-1m.item.json"
    _tfseqrec(
        "data",
        "item-text",
        ml1m / "movies.dat",
        "--id-map",
        ml1m / "sas_to_original_items.txt",
        "--output",
        names,
    )
    out = work / "report.html"
    args = [
        "report",
        "--model-dir",
        work / "sasrec",
        "--model-dir",
        work / "hstu",
        "--data",
        ml1m / "ml-1m.txt",
    ]
    stdout, stderr = _tfseqrec(*args, "--item-text", names, "--output", out, "--users", "1,2,no-such-user")
    return work, out, json.loads(stdout), stderr


@pytest.mark.primary
def test_the_page_renders_in_chromium_with_evaluate_numbers(page, data_root):
    if not (CHROMIUM and CHROMEDRIVER):  # CI installs them (.ci/run): there, a skip would hide a failure
        message = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    from selenium import webdriver  # the test extra that drives the browser
    from selenium.webdriver.chrome.service import Service

    work, out, summary, stderr = page
    assert "skipped: no-such-user" in stderr and summary["skipped_users"] == ["no-such-user"]
    text = out.read_text()
    # Self-contained: no script, no stylesheet, no reference but to the page itself.
    assert "<script" not in text and "<link" not in text
    assert re.findall(r'(?:src|href)="(?!#)', text) == []
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(out.as_uri())
        assert driver.get_log("browser") == []  # no console error, nothing failed to load
        cells = driver.execute_script(
            "return Array.from(document.querySelectorAll('#metrics td[data-key]'))"
            ".map(c => [c.dataset.key, Number(c.dataset.model), c.textContent])"
        )
        plots = driver.execute_script(
            "return Array.from(document.querySelectorAll('figure.plot')).map(f => [f.dataset.plot,"
            " f.querySelector('svg').getBoundingClientRect().width,"
            " f.querySelector('svg').getBoundingClientRect().height, f.querySelectorAll('path').length])"
        )
        users = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.user')).map(t => [t.dataset.user,"
            " t.querySelectorAll('td')[1].querySelectorAll('li').length, t.textContent])"
        )
        assert driver.get_screenshot_as_png()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        driver.quit()
    # The table holds the numbers that `tfseqrec evaluate` prints for each model.
    for i, model in enumerate(("sasrec", "hstu")):
        evaluated = json.loads(
            _tfseqrec("evaluate", "--model-dir", work / model, "--data", data_root / "ml-1m" / "ml-1m.txt")[0]
        )
        shown = {key: value for key, m, value in cells if m == i and value}
        assert set(shown) >= {"ndcg@10", "hr@10", "mrr", "coverage@10", "novelty@10", "serendipity@10"}
        for key, value in shown.items():
            assert float(value) == pytest.approx(evaluated[key], abs=5e-5), (model, key)
    assert {name for name, *_ in plots} == {"curves", "breakdowns", "popularity"}
    assert all(width > 100 and height > 100 and paths > 10 for _, width, height, paths in plots), plots
    # Users 1 and 2, each with ten recommendations named by title.
    assert [u for u, *_ in users] == ["1", "2"] and all(n == 10 for _, n, _ in users)
    assert any("(19" in t for *_, t in users)  # a title with its year, e.g. "Toy Story (1995) (1)"


def test_sample_users_spans_history_lengths_and_names_unknown_ones():
    lengths = [2, 3, 7, 12, 30, 60, 250, 4]
    histories = splits.Sequences.from_list([f"u{i}" for i in range(8)], [[3] * n for n in lengths])
    cases = splits.Cases(histories, np.full(8, 3))
    users, unknown = report.sample_users(cases, None, 5, seed=0)
    buckets = {
        np.searchsorted(beyond_accuracy.LENGTH_EDGES, lengths[int(u[1:])], side="right") for u in users
    }
    assert len(users) == 5 and len(buckets) == 5  # five buckets, one user each
    assert report.sample_users(cases, ["u3", "x"], 5, seed=0) == (["u3"], ["x"])


def test_item_names_fall_back_to_ids_and_are_escaped(tmp_path):
    path = tmp_path / "items.item.json"
    path.write_text(json.dumps({"1": {"title": "<b>A</b>"}, "2": {"brand": "B"}}))
    names = report.item_names(item_text=os.fspath(path))
    assert names == {"1": "<b>A</b>", "2": "B"}
    assert report._name("1", names) == "&lt;b&gt;A&lt;/b&gt; (1)" and report._name("3", names) == "3"
