"""``tfseqrec pipeline run`` on bad CSV input: the user's fault in one line, not Beam's traceback.

The bad-CSV tests run the real command (a process: its whole stderr is checked) and the
local pipeline (Beam's DirectRunner) until its ExampleGen fails; a blessing metric the
evaluator does not compute is refused before the pipeline is built.
"""

import os

import pytest

from components import pipeline, ranking_evaluator
from tests.test_cli import _tfseqrec
from tfseqrec import cli

ROWS = ["u1,a,1", "u1,b,2", "u1,c,3", "u2,a,4", "u2,b,5", "u2,c,6"]


@pytest.mark.parametrize(
    "header, bad_row, message",
    [
        (
            "user_id,item_id,timestamp",
            "u2,b,yesterday",
            "events.csv:6: column 'timestamp': cannot parse timestamp",
        ),
        ("user_id,item_id", "u2,b", "'timestamp'"),
    ],
    ids=["bad timestamp", "missing column"],
)
def test_bad_csv_is_one_line(tmp_path, header, bad_row, message):
    rows = [r if header.count(",") == 2 else r.rsplit(",", 1)[0] for r in ROWS]
    rows[4] = bad_row
    data = tmp_path / "data"
    data.mkdir()
    (data / "events.csv").write_text("\n".join([header, *rows]) + "\n")
    out = tmp_path / "out"
    result = _tfseqrec(
        "pipeline",
        "run",
        "--data-root",
        data,
        "--pipeline-root",
        out / "root",
        "--metadata-path",
        out / "metadata.db",
        "--serving-model-dir",
        out / "served",
        check=False,
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and not result.stdout and len(lines) == 1, result.stderr
    assert (
        lines[0].startswith("tfseqrec: error: ") and message in lines[0] and "while running" not in lines[0]
    )


def test_the_blessing_metric_is_checked_before_the_pipeline_is_built(tmp_path):
    assert cli.BLESSING_METRICS == ranking_evaluator.BLESSING_METRICS
    for metric in ("ndcg@7", "num_users"):
        with pytest.raises(ValueError, match=f"unknown blessing metric '{metric}'"):
            pipeline.create_pipeline(
                data_root=tmp_path,
                pipeline_root=tmp_path / "root",
                metadata_path=tmp_path / "metadata.db",
                serving_model_dir=tmp_path / "served",
                metric=metric,
            )
    assert sorted(os.listdir(tmp_path)) == []
