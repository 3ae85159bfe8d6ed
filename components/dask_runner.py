"""Beam's DaskRunner, usable against a ``dask.distributed`` cluster with Beam 2.59.

Beam 2.59 (the version TFX 1.16 pins) ships ``apache_beam.runners.dask.dask_runner``, but
its name is not among the runners ``--runner=`` knows, it passes every pipeline option
(``runner`` included) to ``distributed.Client``, which refuses them, and its result
waits with a ``Client.wait_for_workers`` call that distributed 2024 no longer takes. It
also computes every intermediate collection of the pipeline and gathers them all back
to the launching process. ``DaskRunner`` here keeps Beam's translation (``Create``,
``ParDo``/``Map``/``FlatMap``/``Filter``, ``GroupByKey``, ``Flatten``) and fixes those
four: ``--runner=DaskRunner`` names it (``runner_args``), the client gets the Dask
options only, and only the pipeline's sinks are computed, their (small) results
gathered.

What the DaskRunner cannot run: side inputs, tagged outputs, ``CombinePerKey`` and
``Combine.Globally``, Beam's file sources and sinks (``ReadFromTFRecord``,
``WriteToTFRecord``), and a DoFn's ``setup``/``start_bundle`` (it calls ``process``
alone). ``EventExampleGen`` and ``SequenceBuilder`` are written with the translated
transforms only (``components.beam_io``), so they run on it as on every other runner.
"""

import dataclasses

from apache_beam.runners.dask import dask_runner
from apache_beam.runners.dask.overrides import dask_overrides
from apache_beam.runners.runner import PipelineState

# ``--runner=DaskRunner`` (any case, with or without "Runner") means this class.
QUALIFIED_NAME = "components.dask_runner.DaskRunner"
_NAMES = ("dask", "daskrunner")
# distributed.Client's arguments among Beam's DaskOptions.
_CLIENT_OPTIONS = ("address", "timeout", "scheduler_file", "name", "connection_limit")


def runner_args(beam_args):
    """``beam_args`` with ``--runner=DaskRunner`` (or ``--runner DaskRunner``) naming this class.

    >>> runner_args(["--runner=DaskRunner", "--dask_client_address=h:8786"])
    ['--runner=components.dask_runner.DaskRunner', '--dask_client_address=h:8786']
    >>> runner_args(["--runner", "dask", "--direct_num_workers=2"])
    ['--runner', 'components.dask_runner.DaskRunner', '--direct_num_workers=2']
    """
    out = list(beam_args)
    for i, arg in enumerate(out):
        if arg.startswith("--runner=") and arg.split("=", 1)[1].lower() in _NAMES:
            out[i] = "--runner=" + QUALIFIED_NAME
        elif arg == "--runner" and i + 1 < len(out) and out[i + 1].lower() in _NAMES:
            out[i + 1] = QUALIFIED_NAME
    return out


def uses_dask(beam_args):
    """Whether ``beam_args`` (after ``runner_args``) run on the DaskRunner."""
    args = runner_args(beam_args)
    return any(a in ("--runner=" + QUALIFIED_NAME, QUALIFIED_NAME) for a in args)


@dataclasses.dataclass
class _Result(dask_runner.DaskRunnerResult):
    """Waits for the sinks' futures, raises a task's error, and closes the client."""

    def wait_until_finish(self, duration=None):
        try:
            self.client.gather(self.futures, errors="raise")
            self._state = PipelineState.DONE
        except BaseException:
            self._state = PipelineState.FAILED
            raise
        finally:
            self.client.close()
        return self._state


class DaskRunner(dask_runner.DaskRunner):
    """Runs a pipeline of translated transforms on the ``dask.distributed`` cluster that
    ``--dask_client_address`` names (a ``LocalCluster`` of this process when none)."""

    def run_pipeline(self, pipeline, options):
        # Imported here, as Beam's runner imports it: dask is needed only when this runs.
        import dask.distributed

        dask_options = options.view_as(dask_runner.DaskOptions)
        client_kwargs = {
            k: getattr(dask_options, k) for k in _CLIENT_OPTIONS if getattr(dask_options, k, None) is not None
        }
        client = dask.distributed.Client(**client_kwargs)
        pipeline.replace_all(dask_overrides())
        visitor = self.to_dask_bag_visitor()
        pipeline.visit(visitor)
        consumed = {value.producer for node in visitor.bags for value in node.inputs}
        sinks = [bag for node, bag in visitor.bags.items() if node not in consumed]
        return _Result(client, client.compute(sinks))
