"""TFX components for tfseqrec (primary stack: Python 3.10, tfx 1.16).

    SequenceBuilder     Examples of events -> Examples of per-user sequences
                        (train / eval / test, leave-one-out) + the item vocabulary
    trainer_module      run_fn(fn_args) for the standard Trainer
    RankingEvaluator    full-catalogue NDCG@K / HR@K of the exported model; ModelBlessing
    ReportWriter        tfseqrec report's page of the exported model and the last blessed one
    pipeline            create_pipeline(...) and run(...) with LocalDagRunner

Importing this package needs TFX; the ``tfseqrec`` library itself does not.
"""
