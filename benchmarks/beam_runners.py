"""The pipeline's Beam steps on a synthetic log, on the DirectRunner and on Dask.

For each ``--events`` size, a seeded synthetic log (``tfseqrec.data.synthetic``: users = events
/ 50, items = events / 100) is written as ``--files`` CSV files; then ``EventExampleGen`` and
``SequenceBuilder`` (the pipeline's Beam work) run on it, timed apart, on each runner:

- ``direct``: Beam's DirectRunner in this process (the pipeline's default);
- ``dask``: Beam's DaskRunner (``components.dask_runner``) against a ``dask.distributed``
  ``LocalCluster`` of ``--workers`` worker processes, one thread each, started first (not timed).

A record per size and runner: seconds of each step, events a second over both, and whether
its outputs (the vocabulary and every split's record count) equal the DirectRunner's.

Usage (the primary stack: TFX and dask):
    python benchmarks/beam_runners.py --events 1000000 10000000 --json benchmarks/results/beam-runners.json
    python benchmarks/beam_runners.py --events 20000        # a quick check
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import machine  # noqa: E402  (benchmarks/machine.py)
import records  # noqa: E402  (benchmarks/records.py)
from dask.distributed import LocalCluster  # noqa: E402
from tfx.dsl.components.base import base_beam_executor  # noqa: E402
from tfx.types import artifact_utils, standard_artifacts  # noqa: E402

from components import dask_runner  # noqa: E402
from components.artifacts import ItemVocabulary  # noqa: E402
from components.event_example_gen import EventExampleGen  # noqa: E402
from components.pipeline import LOCAL_BEAM_ARGS  # noqa: E402
from components.sequence_builder import SequenceBuilder  # noqa: E402
from tfseqrec.data import synthetic  # noqa: E402


def write_csv(num_events, files, root, seed=0):
    """The seeded log as ``files`` CSV files (events dealt round-robin) under ``root``."""
    log = synthetic.generate(
        num_events=num_events,
        num_items=max(100, num_events // 100),
        num_users=max(10, num_events // 50),
        seed=seed,
    )
    os.makedirs(root, exist_ok=True)
    for part in range(files):
        with open(os.path.join(root, f"events-{part:03d}.csv"), "w") as f:
            f.write("user_id,item_id,timestamp\n")
            rows = zip(log.users[part::files], log.items[part::files], log.timestamps[part::files])
            f.writelines(f"{u},{i},{t}\n" for u, i, t in rows)
    return root


def _artifact(cls, uri):
    artifact = cls()
    artifact.uri = uri
    os.makedirs(uri, exist_ok=True)
    return artifact


def _execute(component, inputs, outputs, parameters, beam_args, tmp):
    context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=list(beam_args), tmp_dir=tmp)
    component.EXECUTOR_SPEC.executor_class(context=context).Do(inputs, outputs, parameters)


def run_steps(csv_root, out, beam_args):
    """``{"example_gen_seconds", "sequence_builder_seconds", "summary"}`` of one runner."""
    examples = _artifact(standard_artifacts.Examples, os.path.join(out, "events"))
    start = time.perf_counter()
    _execute(EventExampleGen, {}, {"examples": [examples]}, {"input_base": csv_root}, beam_args, out + "/tmp")
    example_gen = time.perf_counter() - start
    examples.split_names = artifact_utils.encode_split_names(["train"])
    sequences = _artifact(standard_artifacts.Examples, os.path.join(out, "sequences"))
    vocabulary = _artifact(ItemVocabulary, os.path.join(out, "vocabulary"))
    start = time.perf_counter()
    _execute(
        SequenceBuilder,
        {"examples": [examples]},
        {"sequences": [sequences], "vocabulary": [vocabulary]},
        {},
        beam_args,
        out + "/tmp",
    )
    builder = time.perf_counter() - start
    with open(os.path.join(sequences.uri, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(vocabulary.uri, "item_vocab.tsv")) as f:
        summary["vocabulary"] = f.read()
    return {"example_gen_seconds": example_gen, "sequence_builder_seconds": builder, "summary": summary}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--files", type=int, default=8, help="CSV files the log is written as")
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    parser.add_argument("--json", help="write the records here (rewritten after every run)")
    args = parser.parse_args()
    header = machine.run_header("beam_runners.py", matmul=True)
    out = []
    with LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        runners = {
            "direct": LOCAL_BEAM_ARGS,
            "dask": dask_runner.runner_args(
                ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}"]
            ),
        }
        for num_events in args.events:
            work = tempfile.mkdtemp(prefix="beam-runners-")
            csv_root = write_csv(num_events, args.files, os.path.join(work, "csv"))
            results = {}
            for name, beam in runners.items():  # each runner's record written as it ends
                results[name] = result = run_steps(csv_root, os.path.join(work, name), beam)
                seconds = result["example_gen_seconds"] + result["sequence_builder_seconds"]
                metrics = {
                    "example_gen_seconds": result["example_gen_seconds"],
                    "sequence_builder_seconds": result["sequence_builder_seconds"],
                    "events_per_second": num_events / seconds,
                    "same_output_as_direct": result["summary"] == results["direct"]["summary"],
                    "num_users": result["summary"]["num_users"],
                    "num_items": result["summary"]["num_items"],
                }
                print(
                    f"{num_events:,} events, {name}: {seconds:.1f} s ({metrics['events_per_second']:,.0f} events/s)"
                )
                options = {"events": num_events, "files": args.files, "runner": name}
                if name == "dask":
                    options["workers"] = args.workers
                out.append(
                    records.record(
                        "pipeline",
                        "beam-runners",
                        None,
                        options=options,
                        metrics=metrics,
                        ended=machine.now(),
                        **header,
                    )
                )
                if args.json:
                    records.write(args.json, out)


if __name__ == "__main__":
    main()
