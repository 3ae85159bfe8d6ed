"""The tfseqrec TFX pipeline: CSV events to a blessed, pushed TF Serving model.

::

    EventExampleGen ─> SequenceBuilder ──> Trainer ──────────────> RankingEvaluator ──> Pusher
    (user,item,         (Beam: group by     (run_fn: fit,            ^  (NDCG@10 on test,     (saved_models/
     timestamp CSV)      user, vocabulary,    export the serving     |   threshold and        <name>/<version>/)
                         leave-one-out)       SavedModel)            |   last blessed model)
                                              ^ base model           |
                                              Resolver(LatestBlessedModelStrategy) ──┘

With ``bulk_inference`` the standard ``BulkInferrer`` then scores every user's whole history
(the SequenceBuilder's ``full`` split) with the blessed model's ``predict_examples``
signature: each user's top items as ``PredictionLog`` records, a pipeline artifact
(``InferenceResult``); a model not blessed infers nothing.

With ``report`` a ``ReportWriter`` writes the page of ``tfseqrec report`` beside the evaluation:
the trained model and the last blessed one, side by side, as their exports answer.

Run again on a log that grew, the Trainer warm-starts from the last blessed model (its
``base_model``; ``components.trainer_module``), and the evaluator blesses the new model only
if it beats that one.

``create_pipeline`` builds it; ``run`` runs it with ``LocalDagRunner`` and a SQLite ML
Metadata store. The same pipeline object runs on Kubeflow Pipelines or Vertex AI
(``tfx.orchestration.experimental.KubeflowV2DagRunner``) with a container image that
has tfseqrec installed, and ``beam_pipeline_args`` move the Beam work (ExampleGen,
SequenceBuilder) to a distributed runner, for example::

    ["--runner=DataflowRunner", "--project=P", "--region=R", "--temp_location=gs://B/tmp"]
    ["--runner=DaskRunner", "--dask_client_address=HOST:8786"]

On the DaskRunner (``components.dask_runner``) the BulkInferrer stays on the DirectRunner.
"""

import os

import tensorflow as tf
from tfx import v1 as tfx

from components import dask_runner
from components.artifacts import Report
from components.event_example_gen import EventExampleGen
from components.ranking_evaluator import RankingEvaluator, check_metric
from components.report_writer import PAGE, ReportWriter
from components.sequence_builder import SequenceBuilder
from tfseqrec.data import events as events_lib

TRAINER_RUN_FN = "components.trainer_module.run_fn"
DEFAULT_CONFIG = {"model": "sasrec", "epochs": 20, "patience": 3, "max_sequence_length": 50, "hidden_dim": 64}
LOCAL_BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def create_pipeline(
    data_root,
    pipeline_root,
    metadata_path,
    serving_model_dir,
    custom_config=None,
    pipeline_name="tfseqrec",
    train_steps=None,
    threshold=0.0,
    min_improvement=0.0,
    metric="ndcg@10",
    user_column="user_id",
    item_column="item_id",
    time_column="timestamp",
    beam_pipeline_args=None,
    warm_start=True,
    bulk_inference=False,
    report=False,
):
    """The pipeline over the CSV files in ``data_root``.

    Args:
        data_root: directory of CSV (or TSV) files with a header
            (``user_id,item_id,timestamp`` by default; other columns are ignored).
        pipeline_root: where artifacts go.
        metadata_path: the SQLite ML Metadata file.
        serving_model_dir: the Pusher's TF Serving base path (``saved_models/<name>``).
        custom_config: training options (``tfseqrec.training.TrainConfig`` keys; the
            model's options flat or under ``model_options``) and ``serving_k``, merged
            over ``DEFAULT_CONFIG``. Its ``event_features`` (columns of the CSV files) are
            read by EventExampleGen, carried by the SequenceBuilder and embedded by the
            Trainer's model; the RankingEvaluator asks the export with them.
        pipeline_name: the pipeline's name in ML Metadata.
        train_steps: cap on training steps (``None``: the epochs of the config).
        threshold: the least ``metric`` a model needs to be blessed.
        min_improvement: how much it must beat the last blessed model by.
        metric: the blessing metric (``ndcg@10``, ``hr@10``, ``mrr``, ...).
        user_column, item_column, time_column: the CSV's column names.
        beam_pipeline_args: Beam options (default: the in-process DirectRunner).
        warm_start: train from the last blessed model when there is one (its weights,
            optimizer state and vocabulary, grown by the new items); ``False`` trains anew.
        bulk_inference: add a ``BulkInferrer`` writing every user's recommendations.
        report: add a ``ReportWriter`` writing the report page of the trained model beside the
            last blessed one (``tfseqrec report``'s page, a ``tfseqrec.Report`` artifact), items
            named by the config's ``item_text`` or ``item_features`` when it has them.
    """
    components = _components(
        beam_pipeline_args or (),
        data_root,
        serving_model_dir,
        custom_config,
        train_steps,
        threshold,
        min_improvement,
        metric,
        user_column,
        item_column,
        time_column,
        warm_start,
        bulk_inference,
        report,
    )
    return tfx.dsl.Pipeline(
        pipeline_name=pipeline_name,
        pipeline_root=os.fspath(pipeline_root),
        components=components,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            os.fspath(metadata_path)
        ),
        beam_pipeline_args=dask_runner.runner_args(beam_pipeline_args or LOCAL_BEAM_ARGS),
    )


def _components(
    beam_pipeline_args,
    data_root,
    serving_model_dir,
    custom_config,
    train_steps,
    threshold,
    min_improvement,
    metric,
    user_column,
    item_column,
    time_column,
    warm_start=True,
    bulk_inference=False,
    report=False,
):
    """The components in pipeline order (see ``create_pipeline``)."""
    check_metric(metric)
    config = {**DEFAULT_CONFIG, **(custom_config or {})}
    context = ",".join(events_lib.check_names(config.get("event_features") or ()))
    # Not CsvExampleGen: its type inference merges ids "007" and "7" (see event_example_gen).
    example_gen = EventExampleGen(
        input_base=os.fspath(data_root),
        user_column=user_column,
        item_column=item_column,
        time_column=time_column,
        event_columns=context,
    )
    builder = SequenceBuilder(
        examples=example_gen.outputs["examples"],
        user_column=user_column,
        item_column=item_column,
        time_column=time_column,
        event_columns=context,
    )
    baseline = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    trainer = tfx.components.Trainer(
        run_fn=TRAINER_RUN_FN,
        examples=builder.outputs["sequences"],
        train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=train_steps),
        eval_args=tfx.proto.EvalArgs(splits=["eval"]),
        custom_config=config,
        base_model=baseline.outputs["model"] if warm_start else None,
    )
    evaluator = RankingEvaluator(
        examples=builder.outputs["sequences"],
        model=trainer.outputs["model"],
        baseline_model=baseline.outputs["model"],
        metric=metric,
        threshold=float(threshold),
        min_improvement=float(min_improvement),
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=os.fspath(serving_model_dir))
        ),
    )
    components = [example_gen, builder, baseline, trainer, evaluator, pusher]
    optional = _optional(builder, trainer, evaluator, baseline, config, bulk_inference, report)
    if dask_runner.uses_dask(beam_pipeline_args):
        # The BulkInferrer's RunInference needs what the DaskRunner cannot run (components.dask_runner).
        for component in optional:
            if isinstance(component, tfx.components.BulkInferrer):
                component.with_beam_pipeline_args(["--runner=DirectRunner", *LOCAL_BEAM_ARGS])
    return components + optional


def _optional(builder, trainer, evaluator, baseline, config, bulk_inference, report):
    """The components after the Pusher that ``bulk_inference`` and ``report`` ask for."""
    components = []
    if bulk_inference:
        components.append(
            tfx.components.BulkInferrer(
                examples=builder.outputs["sequences"],
                model=trainer.outputs["model"],
                model_blessing=evaluator.outputs["blessing"],
                data_spec=tfx.proto.DataSpec(example_splits=["full"]),
                model_spec=tfx.proto.ModelSpec(model_signature_name=["predict_examples"]),
            )
        )
    if report:
        components.append(
            ReportWriter(
                examples=builder.outputs["sequences"],
                model=trainer.outputs["model"],
                baseline_model=baseline.outputs["model"],
                item_text=config.get("item_text") or "",
                item_features=config.get("item_features") or "",
            )
        )
    return components


def run(**kwargs):
    """Builds the pipeline with ``create_pipeline(**kwargs)``, runs it locally, returns a summary.

    The summary is read back from ML Metadata: the last evaluation's metrics, whether
    the model was pushed and where, and the pipeline's root and metadata paths.
    """
    os.makedirs(os.path.dirname(os.path.abspath(kwargs["metadata_path"])), exist_ok=True)
    pipeline = create_pipeline(**kwargs)
    tfx.orchestration.LocalDagRunner().run(pipeline)
    return summary(kwargs["metadata_path"], kwargs["pipeline_root"])


def summary(metadata_path, pipeline_root):
    """What the last run evaluated and pushed, from the ML Metadata store at ``metadata_path``."""
    from ml_metadata.metadata_store import metadata_store  # TFX's store: only this summary reads it

    config = tfx.orchestration.metadata.sqlite_metadata_connection_config(os.fspath(metadata_path))
    store = metadata_store.MetadataStore(config)
    evaluation = max(store.get_artifacts_by_type("ModelEvaluation"), key=lambda a: a.id)
    pushed = max(store.get_artifacts_by_type("PushedModel"), key=lambda a: a.id)
    props = pushed.custom_properties
    return {
        "metrics": {
            k: v.double_value
            for k, v in sorted(evaluation.custom_properties.items())
            if v.HasField("double_value")
        },
        "pushed": bool(props["pushed"].int_value) if "pushed" in props else False,
        "pushed_destination": props["pushed_destination"].string_value
        if "pushed_destination" in props
        else None,
        "pipeline_root": os.fspath(pipeline_root),
        "metadata_path": os.fspath(metadata_path),
        "recommendations": _inference_result(store, evaluation),
        "report": _report_page(store, evaluation),
    }


def _report_page(store, evaluation):
    """The ReportWriter's page of this run; ``None`` without one."""
    pages = [a for a in store.get_artifacts_by_type(Report.TYPE_NAME) if a.id > evaluation.id]
    return os.path.join(max(pages, key=lambda a: a.id).uri, PAGE) if pages else None


def _inference_result(store, evaluation):
    """The directory of the BulkInferrer's ``PredictionLog`` records of this run; ``None`` without
    a BulkInferrer or when it had no blessed model to run."""
    results = [a for a in store.get_artifacts_by_type("InferenceResult") if a.id > evaluation.id]
    uri = max(results, key=lambda a: a.id).uri if results else None
    return uri if uri and tf.io.gfile.glob(os.path.join(uri, "*.gz")) else None
