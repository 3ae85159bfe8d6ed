"""The Beam steps on Beam's DaskRunner against a real ``dask.distributed`` cluster: a scheduler
and two worker processes, which write what the DirectRunner writes."""

import glob

import pytest
import tensorflow as tf
from dask.distributed import LocalCluster
from tfx.types import standard_artifacts

from components import dask_runner
from components.event_example_gen import EventExampleGen
from tests.components.conftest import BEAM_ARGS, make_artifact, run_executor
from tests.components.test_sequence_builder import _build_from, _records
from tfseqrec.data import synthetic
from tfseqrec.data import vocab as vocab_lib


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def _csv_files(root, log):
    """The log in three CSV files, a user's events spread over them."""
    root.mkdir()
    for part in range(3):
        rows = [
            f"u{u},{i},{t},{'buy' if i % 3 else 'view'}"
            for n, (u, i, t) in enumerate(zip(log.users, log.items, log.timestamps))
            if n % 3 == part
        ]
        (root / f"events-{part}.csv").write_text("user_id,item_id,timestamp,kind\n" + "\n".join(rows) + "\n")
    return root


def _event_records(examples):
    """Each event record's features, sorted (a map's serialized order differs between processes)."""
    paths = sorted(glob.glob(f"{examples.uri}/Split-train/*"))
    events = []
    for record in tf.data.TFRecordDataset(paths, compression_type="GZIP"):
        features = tf.train.Example.FromString(record.numpy()).features.feature
        events.append(tuple(sorted((k, v.bytes_list.value[0].decode()) for k, v in features.items())))
    return sorted(events)


def test_events_and_sequences_on_dask_equal_the_direct_runner_s(tmp_path, cluster):
    log = synthetic.generate(num_events=1_200, num_items=60, num_users=50, seed=3)
    csv = _csv_files(tmp_path / "csv", log)
    dask_args = ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}"]
    outputs = {}
    for name, args in (("direct", BEAM_ARGS), ("dask", dask_runner.runner_args(dask_args))):
        examples = make_artifact(standard_artifacts.Examples, tmp_path / name / "events")
        parameters = {"input_base": str(csv), "event_columns": "kind"}
        run_executor(EventExampleGen, {}, {"examples": [examples]}, parameters, beam=True, beam_args=args)
        sequences, vocabulary = _build_from(tmp_path / name, examples, args, event_columns="kind")
        vocab = vocab_lib.ItemVocabulary.load(f"{vocabulary.uri}/item_vocab.tsv")
        outputs[name] = (
            _event_records(examples),
            vocab.items,
            vocab.counts.tolist(),
            _records(sequences, vocab),
        )
    assert len(outputs["direct"][0]) == 1_200 and len(outputs["direct"][3]["test"]) > 0
    assert outputs["dask"] == outputs["direct"]
    # The cluster ran it: its scheduler saw the tasks of the file reads and of a GroupByKey's shuffle.
    assert {"file_events-flatten", "shuffle-group"} <= set(cluster.scheduler.task_prefixes)


def test_a_bad_row_read_on_a_dask_worker_fails_with_its_file_and_line(tmp_path, cluster):
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "a.csv").write_text("user_id,item_id,timestamp\nu,1,1\nu,2,nan\n")
    examples = make_artifact(standard_artifacts.Examples, tmp_path / "events")
    args = dask_runner.runner_args(["--runner=dask", f"--dask_client_address={cluster.scheduler_address}"])
    with pytest.raises(
        ValueError, match=r"a.csv:3: column 'timestamp': timestamp 'nan' is not a finite number"
    ):
        run_executor(
            EventExampleGen,
            {},
            {"examples": [examples]},
            {"input_base": str(tmp_path / "csv")},
            beam=True,
            beam_args=args,
        )
    assert not glob.glob(f"{examples.uri}/Split-train/*.gz")
