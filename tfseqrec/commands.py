"""What each ``tfseqrec`` command does, once ``tfseqrec.cli`` has parsed its flags.

Every function here takes the parsed ``argparse.Namespace`` and ``stdout``, the stream its
result goes to (one JSON document, or a text table where the command prints one), and
returns the exit code; ``COMMANDS`` maps the name the parser records (``args.run``) to it.
Anything else a command prints goes to ``sys.stdout``, which ``cli.main`` points at
stderr while the command runs. Errors the user can fix are raised as ``ValueError`` or
``OSError``; ``cli.main`` prints them in one line.
"""

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import sys

import numpy as np

from tfseqrec import bulk, checks, evaluation, export, kinds, plot, report, serving
from tfseqrec.data import download, events, features, readers, splits, synthetic, tfrecord, vocab
from tfseqrec.training import directory, id_models, pretrain


def run(args, stdout):
    """Runs the command ``args`` was parsed for, its result written to ``stdout``; its exit code.

    A full disk, however the writer reports it (h5py, TensorFlow's file writers), is
    one ``OSError`` line; ``train`` and ``export`` say more in their own.
    """
    try:
        return COMMANDS[args.run](args, stdout) or 0
    except Exception as error:
        if not directory.is_full_disk(error):
            raise
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise OSError(
            f"no space left on the device: 'tfseqrec {args.run}' stopped ({first}); free space and run it again"
        ) from None


def _resolve(path):
    root = os.environ.get("TFSEQREC_DATA")
    if path and not os.path.exists(path) and root and os.path.exists(os.path.join(root, path)):
        return os.path.join(root, path)
    return path


def _read_kwargs(args):
    return {
        "format": args.format,
        "user_col": args.user_col,
        "item_col": args.item_col,
        "time_col": args.time_col or None,
        "encoding": args.encoding,
    }


def _load(args, vocabulary=None, split_options=None, event_vocabulary=None, event_columns=None):
    """The log of ``args`` read and split (with a trained model's vocabularies, when given;
    ``event_columns`` without a vocabulary: those columns read, their slots the data's own)."""
    read_kwargs = _read_kwargs(args)
    if event_vocabulary is not None or event_columns:
        read_kwargs["event_columns"] = event_columns or event_vocabulary.columns
    interactions = readers.read_interactions(
        _resolve(args.path if hasattr(args, "path") else args.data), **read_kwargs
    )
    split, vocabulary, report = splits.prepare(
        interactions,
        getattr(args, "min_user_interactions", 0),
        getattr(args, "min_item_interactions", 0),
        vocabulary,
        event_vocabulary=event_vocabulary,
        **(split_options or {}),
    )
    return interactions, split, vocabulary, report


def _split_options(args, info):
    """How ``evaluate`` splits the data: as the model's training did (its ``train_config.json``),
    unless ``--test-start`` (a temporal split at that time) says otherwise."""
    config = dict(info.get("config") or {})
    if args.test_start is not None:
        config = {"split": "temporal", "test_start": args.test_start, "valid_start": args.valid_start}
    elif args.valid_start is not None:
        raise ValueError("--valid-start needs --test-start")
    if args.targets is not None:
        config["targets"] = args.targets
    return id_models.split_options(config)


def _data_stats(args, stdout):
    options = {}
    if args.split == "temporal" or args.test_start is not None:
        options = {"split": "temporal", "test_start": args.test_start, "valid_start": args.valid_start}
        options["targets"] = args.targets or "all"
    elif args.valid_start is not None or args.targets is not None:
        raise ValueError("--valid-start and --targets are for --split temporal --test-start T")
    interactions, _, _, report = _load(args, split_options=options)
    stats = {
        "path": interactions.path,
        "format": interactions.format,
        "has_timestamps": interactions.has_time,
        "num_users": report["num_users"],
        "num_items": report["num_items"],
        "num_interactions": report["num_interactions"],
        "sequence_length": report["sequence_length"],
        "density": round(report["num_interactions"] / (report["num_users"] * report["num_items"]), 6),
        "splits": {
            key: report[key]
            for key in ("train_users", "train_interactions", "valid_cases", "test_cases", "train_only_users")
        },
        "removed": {k: v for k, v in report.items() if k.startswith("removed_") or k == "oov_interactions"},
    }
    if options:  # each period: its events, users, users without earlier events, items new in it
        stats["periods"] = {
            period: {
                key: report[f"{period}_{key}"]
                for key in ("start", "events", "users", "users_without_history", "new_items")
                if f"{period}_{key}" in report
            }
            for period in ("valid", "test")
            if f"{period}_start" in report and report[f"{period}_start"] is not None
        }
    if args.json:
        _print_json(stdout, stats)
    else:
        width = max(len(k) for k in stats)
        for key, value in stats.items():
            print(f"{key:<{width}}  {value}", file=stdout)
    return 0


def _data_download(args, stdout):
    sources = None
    if args.base_url:
        base = args.base_url.rstrip("/")
        sources = [
            dataclasses.replace(s, url=f"{base}/{s.filename}") for s in download.DATASETS[args.dataset]
        ]
    folder = download.download(args.dataset, args.dir, sources)
    _print_json(
        stdout,
        {
            "dataset": args.dataset,
            "folder": folder,
            "files": sorted(os.listdir(folder)),
            "data_root": os.path.dirname(folder),
        },
    )
    return 0


def _mapped_item_text(args):
    """``(text, missing)``: the item text of ``args.path``, keyed by ``--id-map``'s ids when given
    (``missing``: the mapped ids without text)."""
    inputs = {"PATH": _resolve(args.path), "--id-map": _resolve(args.id_map)}
    checks.check_output_apart("--output", args.output, inputs)
    text = readers.read_item_text(_resolve(args.path))
    missing = []
    if args.id_map:
        mapping = readers.read_id_map(_resolve(args.id_map))
        missing = [new for new, original in mapping.items() if original not in text]
        text = {new: text[original] for new, original in mapping.items() if original in text}
    return text, missing


def _data_item_features(args, stdout):
    if not args.output.endswith(".csv"):
        raise ValueError(f"--output {args.output}: the name must end in .csv")
    raw_text, missing = _mapped_item_text(args)
    columns, rows = features.from_item_text(raw_text)
    with _written_whole(args.output) as partial:
        features.write_csv(partial, columns, rows)
    summary = {"output": args.output, "items": len(rows), "columns": columns}
    if args.id_map:
        summary["mapped_ids_without_item"] = len(missing)
    _print_json(stdout, summary)
    return 0


def _data_item_text(args, stdout):
    if not args.output.endswith(".item.json"):
        raise ValueError(
            f"--output {args.output}: the name must end in .item.json (that is how readers know it)"
        )
    text, missing = _mapped_item_text(args)
    with _written_whole(args.output) as partial, open(partial, "w", encoding="utf-8") as f:
        json.dump(text, f, ensure_ascii=False)
    _print_json(
        stdout,
        {
            "output": args.output,
            "items": len(text),
            "mapped_ids_without_text": len(missing),
            "attributes": sorted({a for attrs in text.values() for a in attrs}),
        },
    )
    return 0


def _data_synthetic(args, stdout):
    if not args.output.endswith((".csv", ".csv.gz")):
        raise ValueError(f"--output {args.output}: the name must end in .csv or .csv.gz")
    log = synthetic.generate(
        args.events,
        args.items,
        args.users,
        seed=args.seed,
        zipf_exponent=args.zipf_exponent,
        follow_prob=args.follow_prob,
    )
    with _written_whole(args.output) as partial:
        synthetic.write_csv(log, partial)
    _print_json(
        stdout,
        {
            "output": args.output,
            "events": len(log),
            "users": log.num_users,
            "items_used": log.num_items,
            "catalogue": args.items,
            "seed": args.seed,
        },
    )
    return 0


def _data_tfrecord(args, stdout):
    checks.check_output_apart("--output", args.output, {"PATH": _resolve(args.path)})
    _, split, vocabulary, report = _load(args)
    created = not os.path.exists(args.output)
    os.makedirs(args.output, exist_ok=True)
    counts = {}
    try:
        for name, part in (("train", split.train), ("valid", split.valid), ("test", split.test)):
            with _written_whole(os.path.join(args.output, f"{name}.tfrecord.gz")) as partial:
                counts[name] = tfrecord.write_examples(partial, part, vocabulary, "GZIP")
        vocabulary.save(args.output)
    except BaseException:
        if created:  # what this run wrote goes with the folder it made
            shutil.rmtree(args.output, ignore_errors=True)
        raise
    _print_json(stdout, {"output": args.output, "records": counts, "num_items": vocabulary.num_items})
    return 0


def _train(args, stdout):
    kind = kinds.get(args.model)
    if args.item_text and not kind.needs_item_text:
        raise ValueError(f"--item-text is for models that read item text; {args.model} reads item ids only")
    if args.item_features and kind.needs_item_text:
        raise ValueError(
            f"--item-features is for the id models; {args.model} reads the items' text (--item-text)"
        )
    options = _json_option("--config", args.config) or {}
    for name in args.option_flags:
        if getattr(args, name) is not None:
            if not kind.takes_option(name):
                raise ValueError(
                    f"--{name.replace('_', '-')} is not an option of {args.model}; its options: "
                    f"{sorted(kind.option_names())} (--config JSON)"
                )
            _set_option(kind, options, name, getattr(args, name))
    if args.preset is not None:
        kind.options({}, preset=args.preset)  # an unknown preset fails here, naming the model's
        options["preset"] = args.preset
    checks.check_output_apart(
        "--output",
        args.output,
        {
            "--data": _resolve(args.data),
            "--item-text": _resolve(args.item_text),
            "--item-features": _resolve(args.item_features),
            "--init-from": options.get("init_from"),
            "--warm-start": args.warm_start,
        },
    )
    warm = {}
    if args.warm_start:
        if kind.needs_item_text:
            raise ValueError(f"--warm-start is for sasrec, bert4rec and hstu; {args.model} reads item text")
        warm = {"warm_start": args.warm_start}
    model, split, epochs = kind.train(
        _resolve(args.data),
        args.output,
        options,
        item_text=_resolve(args.item_text),
        item_features=_resolve(args.item_features),
        verbose=2 if args.quiet else "auto",
        overwrite=args.overwrite,
        strategy=args.strategy,
        **warm,
        **_read_kwargs(args),
    )
    result = evaluation.evaluate(model, split.test, progress=not args.quiet and None)
    result["model_dir"] = args.output
    result["epochs"] = epochs
    _print_json(stdout, result)
    return 0


def _set_option(kind, options, name, value):
    """Sets a flag's option, a model option under ``options["model_options"]`` when the kind has
    them, so that the flag wins over a ``--config`` that gives the same option there."""
    names = kind.option_names()
    if name in names or "model_options" not in names:
        options[name] = value
    else:
        options["model_options"] = {**(options.get("model_options") or {}), name: value}


def _pretrain(args, stdout):
    if len(args.data) != len(args.item_text):
        raise ValueError(
            f"give one --item-text per --data, in the same order: got {len(args.data)} --data and "
            f"{len(args.item_text)} --item-text"
        )
    options = _json_option("--config", args.config) or {}
    for name in args.option_flags:
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    datasets = [(_resolve(d), _resolve(t)) for d, t in zip(args.data, args.item_text)]
    for data, text in datasets:
        checks.check_output_apart("--output", args.output, {"--data": data, "--item-text": text})
    rows = pretrain.pretrain(
        kinds.get(args.model),
        datasets,
        args.output,
        options,
        verbose=2 if args.quiet else "auto",
        overwrite=args.overwrite,
    )
    _print_json(
        stdout,
        {
            "output": args.output,
            "model": args.model,
            "datasets": len(datasets),
            "epochs": len(rows),
            "loss": rows[-1]["loss"] if rows else None,
        },
    )
    return 0


def _evaluate(args, stdout):
    model, vocabulary, info = kinds.load(args.model_dir)
    options = _split_options(args, info)
    interactions, split, _, report = _load(args, vocabulary, options, events.EventVocabulary.of_model(model))
    if not args.allow_other_data:
        _require_training_data(args.model_dir, info, interactions.path, report)
    sampled = None
    if args.sampled_negatives:
        sampled = {"num_negatives": args.sampled_negatives, "sampler": args.sampler}
    result = evaluation.evaluate(
        model,
        split.test if args.split == "test" else split.valid,
        exclude_seen=evaluation.WINDOW if args.exclude_seen_window else args.exclude_seen,
        batch_size=args.batch_size,
        sampled=sampled,
        item_counts=vocabulary.counts,
        metrics=args.metrics.strip(),
        **evaluation.beyond_accuracy_inputs(model, vocabulary, split.train),
    )
    if result["num_unknown_targets"]:
        print(
            f"tfseqrec: {result['num_unknown_targets']} cases predict an item the model's vocabulary "
            "lacks; they count as misses (num_unknown_targets)",
            file=sys.stderr,
        )
    result["split"] = args.split
    if options:
        result["temporal"] = {
            **options,
            **{
                k: report[k]
                for k in ("test_users", "test_users_without_history", "test_new_items")
                if k in report
            },
        }
    result["skipped_unknown_targets"] = 0  # kept for old readers: unknown targets are misses, none is skipped
    result["oov_interactions"] = report["oov_interactions"]
    _print_json(stdout, result)
    return 0 if np.isfinite(result["mrr"]) else 1


def _report(args, stdout):
    entries, data, options = [], None, None
    for i, model_dir in enumerate(args.model_dir):
        export_dir = _export_version(model_dir)
        if export_dir:  # what is in production, ranked by its own signatures
            model = evaluation.Exported(export_dir)
            vocabulary, info, history = model.vocabulary, {}, None
        else:
            model, vocabulary, info = kinds.load(model_dir)
            history = os.path.join(model_dir, "history.csv")
            options = id_models.split_options(dict(info.get("config") or {}))
        event_vocabulary = None if export_dir else events.EventVocabulary.of_model(model)
        columns = model.event_features if export_dir else None  # the data's own slots, decoded
        interactions, split, _, load_report = _load(args, vocabulary, options, event_vocabulary, columns)
        if export_dir:
            model.event_vocabulary = split.event_vocabulary
        else:
            _require_training_data(model_dir, info, interactions.path, load_report)
        label = os.path.basename(os.path.normpath(export_dir or model_dir))
        if export_dir:
            label = f"{os.path.basename(os.path.dirname(os.path.normpath(export_dir)))} v{label}"
        if label in [e.label for e in entries]:
            label = f"{label} ({i + 1})"
        entries.append(report.Entry(label, model, vocabulary, split.test, split.train, history))
        data = interactions.path
    requested = [u.strip() for u in args.users.split(",") if u.strip()] if args.users else None
    users, unknown = report.sample_users(entries[0].cases, requested, args.sample, args.seed)
    if unknown:
        print(f"tfseqrec: users not in {data}, skipped: {', '.join(unknown)}", file=sys.stderr)
    names = report.item_names(args.item_text and _resolve(args.item_text), args.item_features)
    results = report.write(args.output, entries, data, names, users, unknown)
    summary = {
        "output": args.output,
        "models": [{"label": e.label, "metrics": r} for e, r in zip(entries, results)],
        "users": users,
        "skipped_users": unknown,
    }
    _print_json(stdout, summary)
    return 0


def _export_version(path):
    """The SavedModel version ``path`` names (a version, or a base whose newest version is
    taken), or ``None`` where it is a run directory."""
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    versions = [v for v in os.listdir(path) if v.isdigit()] if os.path.isdir(path) else []
    versions = [v for v in versions if os.path.exists(os.path.join(path, v, "saved_model.pb"))]
    return os.path.join(path, max(versions, key=int)) if versions else None


def _require_training_data(model_dir, info, path, report):
    """Refuses to evaluate on data other than the model's (``--allow-other-data`` allows it).

    Another data set's ids overlap the model's by chance (ML-100K's items are ML-1M's
    numbers 1..1682, of other films): its metrics would be printed as if they meant
    something. The same data is the same file (by path, or by name where it moved), with
    the same number of events where the model recorded it.
    """
    trained = info.get("data")
    if not trained:
        return
    here, there = os.path.realpath(path), os.path.realpath(trained)
    names = {os.path.basename(here), os.path.basename(os.path.dirname(here))}
    same = here == there or os.path.dirname(here) == there or os.path.basename(there) in names
    before = (info.get("report") or {}).get("input_interactions")
    if same and (before is None or before == report.get("input_interactions")):
        return
    counted = "" if before is None else f"; {before} events there, {report.get('input_interactions')} here"
    raise ValueError(
        f"{path} is not the data {model_dir} was trained on ({trained}{counted}); its test cases "
        "would be ranked by a model of another catalogue. Pass --allow-other-data to evaluate on it anyway"
    )


def _plot(args, stdout):
    kind = kinds.for_model_dir(args.model_dir)
    if not kind.attention_maps:
        raise ValueError(
            f"plot draws attention maps, which {kind.name} models do not have; "
            "their training curves are in the model directory's history.csv"
        )
    model, vocabulary, info = kind.load(args.model_dir)
    out = args.output or args.model_dir
    os.makedirs(out, exist_ok=True)
    written = [os.path.join(out, "training_curves.png")]
    with _written_whole(written[0]) as partial:
        plot.training_curves(os.path.join(args.model_dir, "history.csv"), partial)
    if not args.history:
        log = splits.sort_by_time(readers.read_interactions(info["data"], format=info["format"]))
        user = args.user if args.user is not None else log.users[0]
        mine = log.users == user
        args.history = " ".join(str(i) for i in log.items[mine][-20:])
        if not args.history:
            raise ValueError(f"user {user!r} is not in {info['data']}")
        if model.uses_timestamps:
            args.timestamps = log.timestamps[mine][-20:].tolist()
    ids, times, _ = _known_history(args, model, vocabulary)
    if not ids:
        raise ValueError("none of the history's items is in the model's vocabulary")
    written.append(os.path.join(out, "attention.png"))
    with _written_whole(written[-1]) as partial:
        plot.attention_map(model, ids, partial, labels=vocabulary.to_raw(ids), timestamps=times)
    _print_json(stdout, {"written": written})
    return 0


def _recommend(args, stdout):
    if args.histories:
        return _recommend_all(args, stdout)
    if args.output or args.exclude:
        raise ValueError("--output and --exclude are for --histories (every user of a file)")
    model, vocabulary, _ = kinds.load(args.model_dir)
    history, times, context = _known_history(args, model, vocabulary)
    if history:
        # Only a model that reads times takes them (a Recformer's recommend has no such argument).
        timed = {} if times is None else {"timestamps": [times]}
        if context is not None:
            timed["events"] = {column: [slots] for column, slots in context.items()}
        top_ids, top_scores = model.recommend([history], k=args.k, exclude_seen=args.exclude_seen, **timed)
    else:
        # As the SavedModel answers a history with no known item: by popularity.
        print(
            "tfseqrec: no item of the history is known; recommending the most popular items", file=sys.stderr
        )
        top_ids, top_scores = bulk.popular_items(vocabulary, args.k)
    # Only items that can be recommended come back: never one of the history (with
    # --exclude-seen), so fewer than --k when fewer are left.
    count = int(np.sum(top_ids[0] != vocab.PAD_ID))
    if count < args.k:
        print(
            f"tfseqrec: {count} item(s) can be recommended (the catalogue's {vocabulary.num_items}"
            f"{' less the history' if args.exclude_seen else ''}), fewer than --k {args.k}",
            file=sys.stderr,
        )
    items = vocabulary.to_raw(top_ids[0][:count])
    scores = [float(s) for s in top_scores[0][:count]]
    if args.json:
        _print_json(stdout, {"item_ids": items, "scores": scores})
    else:
        for rank, (item, score) in enumerate(zip(items, scores), start=1):
            print(f"{rank}\t{item}\t{score:.6f}", file=stdout)
    return 0


def _recommend_all(args, stdout):
    """``recommend --histories FILE --output OUT``: every history of FILE (``tfseqrec.bulk``)."""
    if not args.output:
        raise ValueError("--histories needs --output: a .jsonl or .csv file for the recommendations")
    if args.timestamps or args.event:
        raise ValueError("--timestamps and --event are for --history; --histories reads them from the file")
    checks.check_output_apart("--output", args.output, {"--histories": _resolve(args.histories)})
    model, vocabulary, _ = kinds.load(args.model_dir)
    path = _resolve(args.histories)
    histories = bulk.read_histories(path, model, **_read_kwargs(args))
    exclude = []
    if args.exclude:
        with open(args.exclude, encoding="utf-8") as f:
            exclude = [line.strip() for line in f if line.strip()]
    result = bulk.recommend_file(
        model, vocabulary, histories, args.output, k=args.k, exclude=exclude, batch_size=args.batch_size
    )
    _print_json(stdout, result)
    return 0


def _known_history(args, model, vocabulary):
    """``(ids, times, context)`` of ``--history``'s known items (``times``: of ``--timestamps``,
    ``context``: ``{column: slots}`` of ``--event``, or ``None``)."""
    raw, times = args.history.split(), args.timestamps
    context = _history_context(getattr(args, "event", None), model, len(raw))
    if model.uses_timestamps:
        if times is None:
            raise ValueError(
                "this model reads the items' event times (a time bias): give --timestamps, "
                "one time in seconds per --history item"
            )
        if len(times) != len(raw):
            raise ValueError(
                f"--history has {len(raw)} items but --timestamps {len(times)} times (one per item)"
            )
    elif times is not None:
        raise ValueError(
            "--timestamps is for models that read event times (hstu trained with a time bias); "
            "this model reads item ids only"
        )
    for t in times or ():
        serving.check_seconds("--timestamps", t)
    ids = vocabulary.lookup(raw)
    unknown = [r for r, i in zip(raw, ids) if i == vocab.OOV_ID]
    if unknown:
        print(f"tfseqrec: ignoring {len(unknown)} unknown item id(s): {unknown[:10]}", file=sys.stderr)
    known = [n for n, i in enumerate(ids) if i != vocab.OOV_ID]
    if context is not None:
        context = {column: [int(slots[n]) for n in known] for column, slots in context.items()}
    return [int(ids[n]) for n in known], None if times is None else [times[n] for n in known], context


def _history_context(given, model, length):
    """``{column: slots}`` of ``--event COLUMN="v1 v2 ..."`` flags for a model that reads event
    context (``None`` for one that does not, which must get none)."""
    given = dict(item.split("=", 1) if "=" in item else (item, None) for item in given or ())
    vocabulary = events.EventVocabulary.of_model(model)
    if vocabulary is None:
        if given:
            raise ValueError("--event is for models trained with --event-features; this one reads none")
        return None
    wanted = vocabulary.columns
    if sorted(given) != sorted(wanted) or any(v is None for v in given.values()):
        flags = " ".join(f'--event {c}="v1 v2 ..."' for c in wanted)
        raise ValueError(
            f"this model reads each event's {wanted}: give {flags}, one value per --history item"
        )
    raw = {column: given[column].split() for column in wanted}
    for column, values in raw.items():
        if len(values) != length:
            raise ValueError(
                f"--history has {length} items but --event {column} {len(values)} values (one per item)"
            )
    encoded = vocabulary.encode({column: np.asarray(values, object) for column, values in raw.items()})
    return {column: slots.tolist() for column, slots in encoded.items()}


def _export(args, stdout):
    checks.check_output_apart(
        "--output", args.output, {"--model-dir": args.model_dir, "--item-text": _resolve(args.item_text)}
    )
    kind = kinds.for_model_dir(args.model_dir)
    model, vocabulary, info = kind.load(args.model_dir)
    added = []
    if args.item_text and args.item_features:
        raise ValueError("--item-text and --item-features: give the one the model reads")
    if args.item_text:
        model, vocabulary, added = kind.add_items(
            model, vocabulary, info, readers.read_item_text(_resolve(args.item_text))
        )
    if args.item_features:
        model, vocabulary, added = kind.add_featured_items(
            model, vocabulary, args.model_dir, _resolve(args.item_features)
        )
    path, version = export.export_version(
        kind, model, vocabulary, args.output, args.version, k=args.k, warmup=args.warmup
    )
    _print_json(
        stdout,
        {
            "path": path,
            "version": version,
            "k": min(args.k, vocabulary.num_items),
            "num_items": vocabulary.num_items,
            "added_items": len(added),
            "signatures": export.saved_signatures(path),
        },
    )
    return 0


def _pipeline_run(args, stdout):
    try:
        # TFX is an optional heavy dependency (the primary stack only): imported when a pipeline runs.
        from components import pipeline
    except ImportError as e:
        raise ValueError(
            f"the TFX pipeline needs the primary stack (pip install 'tfseqrec[tfx]'): {e}"
        ) from None

    if not os.path.isdir(args.data_root):
        raise FileNotFoundError(f"--data-root {args.data_root}: no such directory (it holds the CSV files)")
    for flag in ("--pipeline-root", "--metadata-path", "--serving-model-dir"):
        output = getattr(args, flag[2:].replace("-", "_"))
        checks.check_output_apart(flag, output, {"--data-root": args.data_root})
    try:
        with _runner_errors_unlogged():
            summary = _run_pipeline(pipeline, args)
    except Exception as error:
        cause = _user_error(error)
        if cause is None:
            raise
        # Beam wraps a component's error in its own (a RuntimeError with the whole worker
        # traceback); the user's fault is the first ValueError or OSError it was raised from.
        raise ValueError(re.sub(r" \[while running '[^']*'\]$", "", str(cause))) from None
    _print_json(stdout, summary)
    return 0


@contextlib.contextmanager
def _runner_errors_unlogged():
    """Keeps Beam and TFX from logging a failing component's traceback (their warnings stay).

    Beam's DoFn runner logs the traceback of an error in a component, and TFX logs the
    execution's failure; the error itself is raised, and ``_pipeline_run`` says it.
    """
    runner, tfx_log = logging.getLogger("apache_beam.runners.common"), logging.getLogger("absl")
    level = runner.level

    def below_error(record):
        return record.levelno < logging.ERROR

    runner.setLevel(logging.CRITICAL)
    tfx_log.addFilter(below_error)
    try:
        yield
    finally:
        runner.setLevel(level)
        tfx_log.removeFilter(below_error)


def _user_error(error):
    """The first ``ValueError`` or ``OSError`` in ``error``'s chain of causes; ``None`` when none."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (ValueError, OSError)):
            return error
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return None


def _run_pipeline(pipeline, args):
    return pipeline.run(
        data_root=os.path.abspath(args.data_root),
        pipeline_root=os.path.abspath(args.pipeline_root),
        metadata_path=os.path.abspath(args.metadata_path),
        serving_model_dir=os.path.abspath(args.serving_model_dir),
        custom_config=_pipeline_config(args),
        pipeline_name=args.pipeline_name,
        train_steps=args.train_steps,
        threshold=args.threshold,
        min_improvement=args.min_improvement,
        metric=args.metric,
        user_column=args.user_col,
        item_column=args.item_col,
        time_column=args.time_col,
        beam_pipeline_args=args.beam_args,
        warm_start=args.warm_start,
        bulk_inference=args.bulk_inference,
        report=args.report,
    )


def _pipeline_config(args):
    """``--custom-config`` with ``--event-features`` as its ``event_features`` (both given must agree)."""
    config = _json_option("--custom-config", args.custom_config)
    if args.event_features is None:
        return config
    config = dict(config or {})
    given = config.get("event_features")
    if given is not None and list(given) != list(args.event_features):
        raise ValueError(
            f"--event-features {','.join(args.event_features)} and --custom-config's event_features {given} differ"
        )
    config["event_features"] = list(args.event_features)
    return config


# --- output and option helpers -----------------------------------------------------


@contextlib.contextmanager
def _written_whole(path):
    """A hidden name beside ``path`` to write, renamed to ``path`` when the block completes.

    A failed write (a full disk) leaves no half file under ``path``: the hidden one is
    removed, and a file already at ``path`` stays as it was. The hidden name keeps
    ``path``'s suffix (``.gz``: the writers compress by name).
    """
    path = os.fspath(path)
    partial = os.path.join(os.path.dirname(path), ".partial." + os.path.basename(path))
    try:
        yield partial
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _print_json(stdout, value):
    """Prints ``value`` to ``stdout`` as strict JSON: a non-finite float becomes ``null``, never ``-Infinity``."""

    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    print(json.dumps(clean(value), allow_nan=False), file=stdout)


def _json_option(flag, text):
    if not text:
        return None
    text = open(text).read() if os.path.exists(text) else text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{flag}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag}: expected a JSON object, got {type(value).__name__}")
    return value


COMMANDS = {
    "data stats": _data_stats,
    "data download": _data_download,
    "data item-text": _data_item_text,
    "data item-features": _data_item_features,
    "data synthetic": _data_synthetic,
    "data tfrecord": _data_tfrecord,
    "train": _train,
    "pretrain": _pretrain,
    "evaluate": _evaluate,
    "plot": _plot,
    "report": _report,
    "recommend": _recommend,
    "export": _export,
    "pipeline run": _pipeline_run,
}
