"""Every measured table, printed from the stored runs in ``benchmarks/results/*.json``.

Writes ``benchmarks/README.md`` (every table: its protocol, the published anchor it is
comparable with, the command that reproduces it, a link to its JSON) and the results
table of the front page, the lines of ``README.md`` between ``<!-- results-table:begin -->``
and ``<!-- results-table:end -->``. Nothing is trained: the tables come from the JSON, so
they cannot drift from it; the provenance of each run (commit, start, end, environment)
stays in its JSON. The formatting is the benchmark scripts' own (``ml1m.py``, ``text.py``,
``time_bias.py``, ``scale.py``, ``transfer.py``, ``serving.py``, ``masking.py``), imported;
the prose around the tables is written here.

Usage:
    python benchmarks/tables.py           # write benchmarks/README.md and README.md's table
    python benchmarks/tables.py --check   # exit 1 naming each file that differs; write nothing

A new stored run: write it with the script's ``--json benchmarks/results/NAME.json``, give
it a protocol (a ``"protocol"`` field in the JSON, or an entry of ``FILE_PROTOCOLS``),
add it to a section of ``sections()``, and run this script. A stored JSON that no
section shows is an error, so none is left out by mistake. A section whose JSON is absent
is left out only while ``NOT_STORED`` holds the command that writes it (that command is then
listed under "Not stored yet"); any other absent JSON is an error naming the file.
"""

import argparse
import contextlib
import dataclasses
import glob
import io
import itertools
import json
import os
import shlex
import sys
import textwrap

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))

import defaults  # noqa: E402  (benchmarks/defaults.py: its table)
import gpu  # noqa: E402  (benchmarks/gpu.py: its table)
import hstu_step  # noqa: E402  (benchmarks/hstu_step.py: its tables)
import masking  # noqa: E402  (benchmarks/masking.py: its tables)
import ml1m  # noqa: E402  (benchmarks/ml1m.py: its tables)
import numpy as np  # noqa: E402
import protocols  # noqa: E402  (benchmarks/protocols.py: the ML-1M protocols and their anchors)
import scale  # noqa: E402
import serving  # noqa: E402  (benchmarks/serving.py: its table)
import side_by_side  # noqa: E402  (benchmarks/peers/side_by_side.py: its table)
import text  # noqa: E402
import time_bias  # noqa: E402
import transfer  # noqa: E402

from tfseqrec import kinds  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
BENCHMARKS_README = os.path.join(HERE, "README.md")
FRONT_README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- results-table:begin -->", "<!-- results-table:end -->"


def _figures(metrics):
    """A result's NDCG@10 / HR@10 as the tables print them, four places each (``Published.figures``'s twin)."""
    return f"{metrics['ndcg@10']:.4f} / {metrics['hr@10']:.4f}"


def fig(key):
    """``protocols.PUBLISHED[key]`` as the tables print it: NDCG@10 / HR@10, four places each."""
    return protocols.published(key).figures


def lab(key):
    """``protocols.PUBLISHED[key]`` with its metrics named: ``"N NDCG@10 / H HR@10"``."""
    return protocols.published(key).labelled


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How a table's numbers were measured, and what published figure they may be set beside."""

    data: str
    split: str
    ranking: str
    seen: str
    anchor: str
    summary: str  # the one line a table carries
    comparable: str  # the anchor, in a table's line


def protocol_line(name, anchor=None):
    """A table's line: its protocol in short and what published figure it is comparable with."""
    p = PROTOCOLS[name]
    return f"Protocol [`{name}`](#protocols): {p.summary}. Comparable with: {anchor or p.comparable}."


LOO = "leave-one-out, the last item of each user tested and the one before it validated"
PROTOCOLS = {
    "sasrec-plus": Protocol(
        data="`ml-1m/ml-1m.txt`, SASRec's 5-core ML-1M (6,040 users, 3,416 items, order only)",
        split=LOO,
        ranking="full ranking over all 3,416 items",
        seen="the user's whole history filtered",
        anchor=f"{protocols.SASREC_PLUS} on the same file and protocol: SASRec "
        f"{lab('sasrec-plus/sasrec')} with 3,000 negatives ({fig('sasrec-plus/sasrec-softmax')} full "
        f"softmax), BERT4Rec {fig('sasrec-plus/bert4rec')}. No HSTU figure: HSTU's rows here are not "
        f"comparable with the HSTU paper's {fig('hstu-paper/hstu')} (protocol `hstu-paper`) nor with "
        "RecTools' HSTU figures (protocol `rectools`)",
        summary="`ml-1m/ml-1m.txt` (SASRec's 5-core ML-1M), leave-one-out with a validation split, full "
        "ranking over 3,416 items, the whole history filtered",
        comparable=f"{protocols.SASREC_PLUS}: SASRec {protocols.published('sasrec-plus/sasrec').ndcg:.4f} "
        f"NDCG@10 with 3,000 negatives, BERT4Rec {protocols.published('sasrec-plus/bert4rec').ndcg:.4f}",
    ),
    "rectools": Protocol(
        data="`ml-1m/ml-1m_full_sequences.txt.gz`, the raw ML-1M ratings in time order without their "
        "timestamps (6,040 users, 3,706 items, no k-core)",
        split=LOO,
        ranking="full ranking over all 3,706 items",
        seen="the user's whole history filtered",
        anchor=protocols.get("rectools").anchor,
        summary="`ml-1m/ml-1m_full_sequences.txt.gz` (the raw ratings), leave-one-out with a validation "
        "split, full ranking over 3,706 items, the whole history filtered",
        comparable=f"RecTools' HSTU tutorial: HSTU {lab('rectools/hstu')} with position attention only "
        f"({fig('rectools/hstu-time')} with time attention, from timestamps this file lacks)",
    ),
    "hstu-paper": Protocol(
        data="`ml-1m/ml-1m_full_sequences.txt.gz`, the raw ML-1M ratings in time order without their "
        "timestamps (6,040 users, 3,706 items, no k-core)",
        split="leave-one-out without a validation split: the last item of each user tested, the one "
        "before it a training target; sampled softmax with 128 uniform negatives per position, a "
        "fixed 101 epochs (the reference code's)",
        ranking="full ranking over all 3,706 items",
        seen="only the items of the model's input window (its last 200) filtered",
        anchor=protocols.get("hstu-paper").anchor,
        summary="`ml-1m/ml-1m_full_sequences.txt.gz` (the raw ratings), leave-one-out without a "
        "validation split, 128 uniform negatives per position for 101 epochs, full ranking over 3,706 "
        "items, the input window filtered",
        comparable=f"the HSTU paper's HSTU-large: {lab('hstu-paper/hstu')}; its reference code's "
        f"SASRec: {fig('hstu-paper/sasrec')}",
    ),
    "scientific": Protocol(
        data="`amazon-scientific-text/Scientific.inter.json` and `Scientific.item.json` (8,317 users, "
        "4,344 items; 73 test targets never in training: the cold cases)",
        split=LOO,
        ranking="full ranking over all 4,344 items",
        seen="the user's history filtered",
        anchor="no anchor (the UniSRec and Recformer papers filter this Amazon category "
        "differently); the ratios to this library's SASRec on the same split are the comparison",
        summary="`amazon-scientific-text/Scientific.inter.json` with `Scientific.item.json`, "
        "leave-one-out with a validation split, full ranking over 4,344 items, the history filtered",
        comparable="no anchor (ratios to SASRec on the same split)",
    ),
    "ml100k": Protocol(
        data="`ml-100k/u.data` with its event times (943 users, 1,682 items)",
        split=LOO,
        ranking="full ranking over all items",
        seen="the user's history filtered",
        anchor="no anchor",
        summary="`ml-100k/u.data` with its event times, leave-one-out with a validation split, full "
        "ranking over 1,682 items, the history filtered",
        comparable="no anchor",
    ),
    "transfer": Protocol(
        data="trained on `ml-1m/ml-1m.txt` with `movies.dat`'s titles and genres only, tested on "
        "`ml-100k/u.data` and `amazon-scientific-text/Scientific.inter.json`",
        split="the target's leave-one-out test split, none of its interactions read (but by "
        "its popularity row)",
        ranking="full ranking over the target's items",
        seen="the user's history filtered",
        anchor="no anchor",
        summary="UniSRec trained on `ml-1m/ml-1m.txt` with `movies.dat`'s text, tested on "
        "`ml-100k/u.data` and `Scientific.inter.json` without reading their interactions (but by "
        "popularity), leave-one-out test split, full ranking, the history filtered",
        comparable="no anchor",
    ),
    "synthetic": Protocol(
        data="seeded synthetic logs (`tfseqrec data synthetic`), users = events / 50",
        split="leave-one-out",
        ranking="full ranking over the catalogue (validation on a 1,000-user sample)",
        seen="the user's history filtered",
        anchor="no anchor (a measure of cost, not of accuracy)",
        summary="seeded synthetic logs (`tfseqrec data synthetic`), leave-one-out, full ranking over "
        "the catalogue, the history filtered",
        comparable="no anchor (a measure of cost)",
    ),
    "serving": Protocol(
        data="`ml-1m/ml-1m.txt`: its 3,416-item vocabulary, and as requests the newest 200 items of "
        "each user with at least 200",
        split="none measured: the model is a SASRec trained for one epoch (latency does not depend on "
        "how well the weights are trained)",
        ranking="`serving_default` of the export: scores over all 3,416 items, the top 10 returned",
        seen="the request's history excluded, as `serving_default` does",
        anchor="no anchor (a measure of cost, not of accuracy)",
        summary="the export of a one-epoch SASRec on `ml-1m/ml-1m.txt`, `serving_default` through the "
        "session loader TF Serving uses, requests of 200 items of its users, top 10 of 3,416 items",
        comparable="no anchor (a measure of cost)",
    ),
    "defaults": Protocol(
        data="`ml-100k/u.data` (with its event times), `amazon-scientific-text/Scientific.inter.json` "
        "and `ml-1m/ml-1m.txt`, each read as a new user's `tfseqrec train --data FILE` reads it",
        split=LOO,
        ranking="full ranking over each dataset's items",
        seen="the user's history filtered",
        anchor="no anchor: the ratio to this library's SASRec on the same dataset and budget",
        summary="each model's defaults (`tfseqrec train --model NAME --data FILE`) on ML-100K, Amazon "
        "Scientific and ML-1M, leave-one-out with a validation split, full ranking, the history filtered",
        comparable="no anchor (ratios to SASRec on the same dataset and budget)",
    ),
    "hstu-step": Protocol(
        data="seeded uniform item ids over ML-1M's 3,416 items: 128 left-padded windows a batch, each "
        "between half the batch's width and the width",
        split="none",
        ranking="none: one training step of HSTU at ML-1M's size is timed (the full softmax over the "
        "catalogue without the sequence's items, Adam)",
        seen="not applicable",
        anchor="no anchor (a measure of cost); the comparison is the host's own fp32 matmul rate",
        summary="seeded uniform item ids over 3,416 items, batches of 128 windows at each training width; "
        "HSTU's training step timed in float32, with XLA and with bfloat16 activations, and its backbone alone",
        comparable="no anchor (a measure of cost)",
    ),
    "masking": Protocol(
        data="seeded uniform item ids over ML-1M's 3,416 items, every position a real item (the worst case)",
        split="none",
        ranking="none: Cloze masking is timed alone and inside a BERT4Rec training step (full "
        "softmax on the masked positions)",
        seen="not applicable",
        anchor="no anchor (a measure of cost); the comparison is the per-item Python loop of PyTorch "
        "BERT4Rec ports' `BertTrainDataset`, timed on the same batch",
        summary="seeded uniform item ids over 3,416 items, every position a real item; masking timed "
        "alone, in a `tf.data` map and inside a BERT4Rec training step",
        comparable="no anchor (a measure of cost; the per-item loop is timed beside it)",
    ),
}

# The protocol of each stored file that does not say it (no "protocol" field), by file name.
FILE_PROTOCOLS = {
    **dict.fromkeys(
        [
            "ml1m-ablation-bert4rec-1",
            "ml1m-ablation-bert4rec-2",
            "ml1m-ablation-hstu-1",
            "ml1m-ablation-hstu-2",
            "ml1m-ablation-sasrec-1",
            "ml1m-ablation-sasrec-2",
            "ml1m-bert4rec-keras-init-seed-0",
            "ml1m-bert4rec-seed-0",
            "ml1m-bert4rec-seeds-1-2",
            "ml1m-hstu-seed-0",
            "ml1m-sasrec-cosine-speed-check",
        ],
        "sasrec-plus",
    ),
    **dict.fromkeys(
        [
            "text-recformer-cached",
            "text-recformer-linear",
            "text-recformer-pretrained",
            "text-recformer-zero-shot-cached-kept",
            "text-recformer-zero-shot-full",
            "text-recformer-zero-shot-mean",
            "text-seeds",
            "text-unisrec-384-more",
            "text-unisrec-384",
            "text-unisrec-cold",
            "text-unisrec-id",
            "text-unisrec-pretrained",
            "text-unisrec-screen",
            "text-unisrec-transfer",
            "text-unisrec-wide",
            "text-unisrec",
        ],
        "scientific",
    ),
    "ml100k-hstu-time-bias": "ml100k",
    "transfer": "transfer",
    "transfer-ml100k": "transfer",
    "scale": "synthetic",
    "serving": "serving",
    "masking": "masking",
    "hstu-step": "hstu-step",
}


def is_stored(stem):
    return os.path.exists(os.path.join(RESULTS, f"{stem}.json"))


def load(stem):
    with open(os.path.join(RESULTS, f"{stem}.json")) as f:
        return json.load(f)


def stored_figures(stems):
    """Every number the stored runs ``stems`` hold, at four places as the tables print them."""
    found = set()

    def walk(value):
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, float):
            found.add(f"{value:.4f}")

    for stem in stems:
        walk(load(stem))
    return found


def unbacked_figures(text, stems=()):
    """The four-place figures of hand-written ``text`` that no run of ``stems`` holds, that
    ``protocols`` neither publishes nor quotes, and that are not the mean of two or three backed
    figures of the text: a typo, or a run the text quotes without naming it."""
    known = protocols.published_figures() | {protocols.quoted(key) for key in protocols.QUOTED}
    figures = set(protocols.FIGURE.findall(text))
    if not figures - known:
        return []
    known |= stored_figures(stems)
    backed = sorted(float(f) for f in figures & known)
    means = {f"{np.mean(group):.4f}" for size in (2, 3) for group in itertools.combinations(backed, size)}
    return sorted(figures - known - means)


def protocol_of(stem):
    """The JSON's own ``protocol`` field, else ``FILE_PROTOCOLS``'s entry; an error if neither."""
    data = load(stem)
    first = data[0] if isinstance(data, list) else data
    name = first.get("protocol") or FILE_PROTOCOLS.get(stem)
    if isinstance(name, dict):  # side_by_side.py stores the protocol's options, its name among them
        name = name.get("name")
    if name not in PROTOCOLS:
        raise ValueError(
            f"benchmarks/results/{stem}.json: protocol {name!r} is not one of {sorted(PROTOCOLS)}; give the "
            'JSON a "protocol" field or benchmarks/tables.py\'s FILE_PROTOCOLS an entry'
        )
    return name


# === Commands, from what each JSON stored ===


def _flag(name, value):
    """``--name value``, the value quoted for a POSIX shell (JSON for a dict or list)."""
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    elif isinstance(value, float):
        value = f"{value:g}"
    value = str(value)
    # An apostrophe ("the paper's") reads better in double quotes, where nothing else is special.
    quoted = f'"{value}"' if "'" in value and not set('"$`\\!') & set(value) else shlex.quote(value)
    return f"--{name.replace('_', '-')} {quoted}"


# The keys of an ml1m.py run's config that are the run's own (model, budget, seed), not options it set.
ML1M_RUN_OPTIONS = ("model", "max_train_minutes", "seed")


def ml1m_command(stem, runs):
    """``benchmarks/ml1m.py``'s command for a file of runs: one model and budget, its seeds and variants."""
    (model,) = {r["model"] for r in runs}
    (protocol,) = {ml1m.protocol_of(r) for r in runs}
    fixed = protocols.get(protocol).training_options()
    (minutes,) = {r["config"]["max_train_minutes"] for r in runs}
    seeds = list(dict.fromkeys(r["seed"] for r in runs))
    variants = list(dict.fromkeys(r["variant"] for r in runs if "variant" in r))
    extra = {}
    for r in runs:
        overrides = ml1m.ABLATIONS[model][r["variant"]] if "variant" in r else {}
        for key, value in r["config"].items():
            if key in ML1M_RUN_OPTIONS or fixed.get(key, object()) == value:
                continue
            if overrides.get(key, object()) != value:
                extra[key] = value
    parts = [f"python benchmarks/ml1m.py --model {model}", _flag("minutes", float(minutes))]
    if protocol != "sasrec-plus":
        parts.append(_flag("protocol", protocol))
    parts.append("--seeds " + " ".join(str(s) for s in seeds))
    if variants:
        parts.append(_flag("ablation", ",".join(variants)))
    if extra:
        parts.append(_flag("config", extra))
    return " ".join(parts + [f"--json benchmarks/results/{stem}.json"])


def text_command(stem, run):
    """``benchmarks/text.py``'s command: the stored arguments that differ from the script's defaults."""
    defaults = vars(text.build_parser().parse_args([]))
    args = run["args"]
    parts = ["python benchmarks/text.py", _flag("models", args["models"])]
    for key in (
        "minutes",
        "recformer_minutes",
        "layers",
        "pretrain_minutes",
        "sasrec_config",
        "unisrec_config",
        "recformer_config",
    ):
        if args.get(key, defaults[key]) != defaults[key]:
            parts.append(_flag(key, args[key]))
    return " ".join(parts + [f"--json benchmarks/results/{stem}.json"])


def transfer_command(stem, run):
    args = run["args"]
    parts = [
        "python benchmarks/transfer.py",
        _flag("epochs", args["epochs"]),
        _flag("minutes", args["minutes"]),
    ]
    if args["targets"] != ",".join(transfer.TARGETS):
        parts.append(_flag("targets", args["targets"]))
    if args.get("no_zero_shot"):
        parts.append("--no-zero-shot")
    return " ".join(parts + [f"--json benchmarks/results/{stem}.json"])


def time_bias_command(stem, run):
    seeds = " ".join(str(s) for s in dict.fromkeys(r["seed"] for r in run["runs"]))
    return f"python benchmarks/time_bias.py --epochs {run['epochs']} --seeds {seeds} --json benchmarks/results/{stem}.json"


def scale_command(stem, run):
    sizes = " ".join(f"{r['events']}:{r['items']}" for r in run["rows"])
    return f"python benchmarks/scale.py --sizes {sizes} --json benchmarks/results/{stem}.json"


def stored_command(stem, run):
    """The command a script recorded in its JSON (``serving.py``, ``masking.py``)."""
    return run["command"]


# gpu_command leaves out the GPU machine's paths and the commit (the JSON keeps it).
DROPPED = ("--data-root", "--commit", "--json")


def gpu_command(stem, records):
    """``gpu.py``'s commands, one line per record, with the data root, commit and output as a user gives them."""
    lines = []
    for record in records:
        args = shlex.split(record["command"])[2:]  # past "python benchmarks/gpu.py"
        kept = [a for i, a in enumerate(args) if a not in DROPPED and (i == 0 or args[i - 1] not in DROPPED)]
        lines.append(shlex.join(["KERAS_BACKEND=jax", "python", "benchmarks/gpu.py", *kept]))
    return "\n".join(f"{line} --json benchmarks/results/{stem}.json" for line in lines)


def peers_command(stem, run):
    """``side_by_side.py``'s commands: each model's, in the order they ran (one line each, once)."""
    commands = dict.fromkeys(r["command"] for r in run["model_runs"].values())
    return "\n".join(f"python {c}" for c in commands)


def command(stem):
    """The command that wrote ``benchmarks/results/STEM.json``, rebuilt from what it stored."""
    for prefix, build in (
        ("ml1m-", ml1m_command),
        ("text-", text_command),
        ("transfer", transfer_command),
        ("ml100k-hstu-time-bias", time_bias_command),
        ("scale", scale_command),
        ("serving", stored_command),
        ("masking", stored_command),
        ("hstu-step", stored_command),
        ("defaults", stored_command),
        ("peers-", peers_command),
        ("gpu-", gpu_command),
    ):
        if stem.startswith(prefix):
            return build(stem, load(stem))
    raise ValueError(f"benchmarks/results/{stem}.json: no script known to have written it")


# === Tables ===


def ml1m_runs(stems, default_variant=False):
    """The runs of ML-1M files in order; ``default_variant`` names a plain run's variant "default"."""
    runs = [r for stem in stems for r in load(stem)]
    return [{**r, "variant": r.get("variant", "default")} for r in runs] if default_variant else runs


def ml1m_results(stems):
    runs = ml1m_runs(stems)
    tables = [ml1m.accuracy_table(runs), ml1m.speed_table(runs)]
    if len({r["seed"] for r in runs}) > 1:
        tables.append(ml1m.seed_summary(runs))
    return "\n\n".join(tables)


def ml1m_ablation(stems):
    return ml1m.ablation_table(ml1m_runs(stems, default_variant=True))


def _options(run):
    """``"learning_rate=0.004, epochs=100"``: the options an ML-1M run's ``--config`` set; "defaults" if none."""
    return defaults.options_text({k: v for k, v in run["config"].items() if k not in ML1M_RUN_OPTIONS})


def ml1m_probes_after(stems):
    """The paragraph under ``ml1m_probes_table``: each set of options' test NDCG@10 / HR@10 (the
    mean over its seeds) and its minutes to 98% of best validation, read from the stored runs."""
    groups = {}
    for r in ml1m_runs(stems):
        groups.setdefault(_options(r), []).append(r)
    parts = []
    for options, runs in groups.items():
        tests = [ml1m.filtered(r) for r in runs]
        mean = {k: np.mean([t[k] for t in tests]) for k in ("ndcg@10", "hr@10")}
        near = [r["minutes_to_98pct_of_best"] for r in runs]
        spread = f"{min(near):.1f}" if len(near) == 1 else f"{min(near):.1f}-{max(near):.1f}"
        seeds = "one seed" if len(runs) == 1 else f"the mean of {len(runs)} seeds"
        parts.append(f"{options}: {_figures(mean)} ({seeds}), 98% of best after {spread} minutes")
    return textwrap.fill(
        "Test NDCG@10 / HR@10, and the minutes of `fit` to 98% of the best validation NDCG@10: "
        + "; ".join(parts)
        + ".",
        width=92,
    )


def ml1m_probes_table(stems):
    """Markdown: a row per ML-1M run, the ``--config`` options it set beside the defaults, its
    test metrics, best validation and the minutes to 98% of it: what a probe of the options
    gained, and how soon, against the stored runs of the defaults."""
    lines = [
        "| options | seed | test NDCG@10 | test HR@10 | best val NDCG@10 | epochs (best) | "
        "min to 98% of best | min to best | train min | s/epoch |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ml1m_runs(stems):
        test = ml1m.filtered(r)
        lines.append(
            f"| {_options(r)} | {r['seed']} | {test['ndcg@10']:.4f} | {test['hr@10']:.4f} | "
            f"{r['best_val_ndcg@10']:.4f} | {r['epochs']} ({r['best_epoch']}) | "
            f"{ml1m.minutes_cell(r['minutes_to_98pct_of_best'])} | {r['minutes_to_best']:.1f} | "
            f"{r['train_wall_seconds'] / 60:.1f} | {r['epoch_seconds_median']:.1f} |"
        )
    return "\n".join(lines)


def best_so_far_table(stems, epochs=(10, 20, 40, 60, 80, 100), labels=None):
    """Markdown: the best validation NDCG@10 so far at the given epochs, a row a run (blank past
    a run's last epoch). ``labels``: the first columns' headings and a function of a stem and a
    run giving their cells; by default one column, the run's variant."""
    headings, label = labels or (["variant"], lambda stem, r: [r["variant"]])
    lines = [
        "| "
        + " | ".join([*headings, *(f"epoch {e}" for e in epochs), "best (epoch)", "test NDCG@10 / HR@10"])
        + " |",
        "|" + "---|" * (len(headings) + len(epochs) + 2),
    ]
    for stem in stems:
        for r in ml1m_runs([stem], default_variant=True):
            val = np.maximum.accumulate(r["val_ndcg@10"])
            cells = [f"{val[e - 1]:.4f}" if e <= len(val) else "" for e in epochs]
            best = f"{r['best_val_ndcg@10']:.4f} ({r['best_epoch']})"
            lines.append(
                "| " + " | ".join([*label(stem, r), *cells, best, _figures(ml1m.filtered(r))]) + " |"
            )
    return "\n".join(lines)


def text_rows(stems, rows=None):
    """``text.py``'s table of stored rows (``rows``: their names, as ``--report --rows`` takes them)."""
    results, seconds, epochs, _ = text.stored_rows([os.path.join(RESULTS, f"{s}.json") for s in stems], rows)
    return text.table(results, seconds, epochs)


def _printed(function, *args):
    """What a script's ``print_tables`` prints, as text."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(*args)
    return out.getvalue().strip("\n")


def time_bias_table(stems):
    return time_bias.table([r for s in stems for r in load(s)["runs"]])


def _captioned(stems, caption, table):
    """Each stored run's table under its caption line, ``caption(run)`` and ``table(run)``."""
    return "\n\n".join(f"{caption(run)}\n\n{table(run)}" for run in map(load, stems))


def defaults_tables(stems):
    """``defaults.py``'s table of each stored run, under the line that says its budget and machine."""
    return _captioned(
        stems,
        lambda run: (
            f"{run['args']['minutes']:g} minutes of `fit` a model, seed {run['args']['seed']}; "
            f"{run['environment']}."
        ),
        lambda run: defaults.table(run["rows"]),
    )


# The prose under the seeds table of the defaults (a constant: the Section list is long enough).
def defaults_seeds_after(stems):
    """The paragraph under the defaults' seeds table, its ratios read from the stored runs
    (``defaults.seed_ratios``): today's, the first three seeds' (before BERT4Rec's learning
    rate followed the batch), and two-layer BERT4Rec's on Scientific (before one layer)."""

    def ratios(files):
        return defaults.seed_ratios([load(s) for s in files])

    def by_seed(table, dataset, model):
        """ "0.81x, 0.80x and 0.79x": the model's NDCG@10 over SASRec's, seed by seed."""
        mine, base = table[(dataset, model)][0], table[(dataset, "sasrec")][0]
        return _listed([f"{mine[s] / base[s]:.2f}x" for s in mine if s in base])

    now = ratios(stems)
    first = ratios(stems[:3])  # defaults.json and seeds 1 and 2, as first run
    two_layers = ratios(stems[: stems.index("defaults-layers-seed-0")])
    early = first[("ml-100k", "bert4rec")][0]
    text = (
        "With today's defaults BERT4Rec reaches "
        f"{now[('ml-100k', 'bert4rec')][1]:.2f}x SASRec's mean on ML-100K over three seeds, every seed at "
        f"{now[('ml-100k', 'bert4rec')][2]:.2f}x or more. Before its learning rate followed the settled "
        "batch (4e-3 at batches of 32), seed 1 never left the plateau near popularity: test NDCG@10 "
        f"{_listed([f'{early[s]:.4f}' for s in sorted(early)])} over seeds "
        f"{_listed([str(s) for s in sorted(early)])}, {first[('ml-100k', 'bert4rec')][1]:.2f}x "
        f"({', '.join(f'`{s}.json`' for s in stems[:3])}; the probes below). On Scientific BERT4Rec "
        f"reaches {now[('scientific', 'bert4rec')][1]:.2f}x SASRec's mean "
        f"({by_seed(now, 'scientific', 'bert4rec')} seed by seed) with one layer, its default on short "
        "histories since the probes below; with two it was "
        f"{two_layers[('scientific', 'bert4rec')][1]:.2f}x ({by_seed(two_layers, 'scientific', 'bert4rec')}). "
        "BERT4Rec on Scientific was rerun at each seed for it (`--datasets scientific --models "
        "bert4rec`), and each run repeated its one-layer probe to the digit. HSTU over three seeds: "
        f"{now[('scientific', 'hstu')][1]:.2f}x on Scientific, {now[('ml-100k', 'hstu')][1]:.2f}x on "
        f"ML-100K. UniSRec with ids, at seed 1: {now[('scientific', 'unisrec')][1]:.2f}x on Scientific, "
        f"{now[('ml-100k', 'unisrec')][1]:.2f}x on ML-100K with `u.item`'s titles and genres."
    )
    return textwrap.fill(text, width=92, break_on_hyphens=False)


# HSTU on Scientific, seeds 0, 1 and 2, after its rate became 4e-3 at batches of 128 (ML-100K's
# batches of 32 scale it to the 2e-3 it had, so its ML-100K rows stand).
HSTU_RATE_DEFAULTS_STEMS = [f"defaults-hstu-rate-seed-{seed}" for seed in (0, 1, 2)]
# The stored runs of the defaults, seed by seed, in the order they ran (``defaults.seed_ratios``).
DEFAULTS_SEEDS = [
    "defaults",
    "defaults-seed-1",
    "defaults-seed-2",
    "defaults-rate-seed-0",
    "defaults-rate-seed-1",
    "defaults-rate-seed-2",
    "defaults-hstu-seed-2",
    "defaults-layers-seed-0",
    "defaults-layers-seed-1",
    "defaults-layers-seed-2",
    *HSTU_RATE_DEFAULTS_STEMS,
]


# defaults.py with --config '{"window_stride": 200}' on ML-100K, seeds 0, 1 and 2.
DEFAULTS_STRIDE_STEMS = [f"defaults-probes-window-stride-seed-{seed}" for seed in (0, 1, 2)]
# defaults.py --models sasrec with SASRec's cosine decay over 60 epochs, seeds 0, 1 and 2.
DEFAULTS_SASREC_COSINE_STEMS = [f"defaults-sasrec-cosine-60-seed-{seed}" for seed in (0, 1, 2)]


def defaults_probe_after(option, worse_verdict, level_verdict, base_stems=None):
    """The paragraph under a probe of one option over the defaults' seeds (``defaults.py --config``):
    each model's test and best validation NDCG@10 over the seeds with ``option``, against the
    defaults' seeds (``base_stems``, else ``DEFAULTS_SEEDS``, each collected by ``defaults.by_seed``), then
    ``worse_verdict`` (formatted with the models that fell by more than the defaults' spread) or
    ``level_verdict``. Returns ``after`` for a ``Section``."""

    def best_val(row):
        return row["best_val_ndcg@10"]

    def trained(stem):
        """The stored run without popularity's rows (no validation; the same with or without the option)."""
        run = load(stem)
        return {**run, "rows": [r for r in run["rows"] if r["model"] != "popularity"]}

    def after(stems):
        probes, base_runs = list(map(trained, stems)), list(map(trained, base_stems or DEFAULTS_SEEDS))
        probe, probe_val = defaults.by_seed(probes), defaults.by_seed(probes, best_val)
        base, base_val = defaults.by_seed(base_runs), defaults.by_seed(base_runs, best_val)
        sentences, worse = [], []
        for key, by_seed in probe.items():
            model, theirs_by_seed = kinds.get(key[1]).model_class, base[key]
            seeds = sorted(by_seed)
            mine, theirs = np.mean([by_seed[s] for s in seeds]), np.mean([theirs_by_seed[s] for s in seeds])
            spread = np.ptp([theirs_by_seed[s] for s in seeds])
            where = f" on {DATASET_NAMES[key[0]]}" if len({k[0] for k in probe}) > 1 else ""
            if theirs - mine > spread:
                worse.append(model + where)
            sentences.append(
                f"{model}{where} {_listed([f'{by_seed[s]:.4f}' for s in seeds])} (mean {mine:.4f}) against "
                f"the defaults' {_listed([f'{theirs_by_seed[s]:.4f}' for s in seeds])} (mean {theirs:.4f}, "
                f"spread {spread:.4f}); best validation {np.mean([probe_val[key][s] for s in seeds]):.4f} "
                f"against {np.mean([base_val[key][s] for s in seeds]):.4f} on the mean"
            )
        verdict = worse_verdict.format(models=_listed(worse)) if worse else level_verdict
        text = f"Test NDCG@10 with {option}: {'; '.join(sentences)}. {verdict}"
        return textwrap.fill(text, width=92, break_on_hyphens=False)

    return after


DATASET_NAMES = {"ml-100k": "ML-100K", "scientific": "Scientific"}
defaults_stride_after = defaults_probe_after(
    "`window_stride: 200`",
    "The stride falls by more than the defaults' spread for {models}: what it gains on ML-1M it loses "
    "here, so it stays an option (`--window-stride`), not a default.",
    "No model falls by more than the defaults' spread on ML-100K.",
)
defaults_hstu_rate_after = defaults_probe_after(
    "Adam 4e-3",
    "It falls by more than the defaults' spread for {models}.",
    "The mean falls by no more than the defaults' spread, and ML-100K keeps its rate: so it became "
    "HSTU's default, and these runs are HSTU's seeds on Scientific in the seeds table above.",
    base_stems=DEFAULTS_SEEDS[: DEFAULTS_SEEDS.index(HSTU_RATE_DEFAULTS_STEMS[0])],
)
defaults_cosine_after = defaults_probe_after(
    "the cosine decay over 60 epochs",
    "It falls by more than the defaults' spread for {models}: a recipe for ML-1M, not a default.",
    "It falls by no more than the defaults' spread on either dataset; it stays a recipe, not a default, "
    "as its number of epochs is chosen in advance.",
)


def defaults_seeds_tables(stems):
    """``defaults.py --report``'s seeds table of the stored runs, in the order they ran (``seeds_table``)."""
    runs = [load(s) for s in stems]
    budgets = {(run["args"]["minutes"], run["environment"]) for run in runs}
    if len(budgets) != 1:
        raise ValueError(f"the seeds of {stems} ran with other budgets or machines: {sorted(budgets)}")
    [(minutes, environment)] = budgets
    return f"{minutes:g} minutes of `fit` a model; {environment}.\n\n{defaults.seeds_table(runs)}"


def gpu_tables(stems):
    """``gpu.py``'s table of each stored file, under the line that says the machine."""
    return _captioned(stems, lambda records: f"{records[0]['environment']}.", gpu.table)


def peers_tables(stems):
    """``side_by_side.py``'s table of each stored record."""
    return "\n\n".join(side_by_side.table(load(s)) for s in stems)


def peers_stems():
    """The stored ``peers-*.json`` records, by name."""
    return sorted(
        os.path.basename(p)[: -len(".json")] for p in glob.glob(os.path.join(RESULTS, "peers-*.json"))
    )


def peers_sections():
    """A section per stored ``peers-*.json`` (one protocol each); none until a run stores one."""
    stems = peers_stems()
    return [
        Section(
            f"tfseqrec and RecTools on `{protocol_of(s)}`",
            protocol_of(s),
            [s],
            peers_tables,
            after=peers_after,
        )
        for s in stems
    ]


def _progress(side, fixed_epochs, minutes):
    """How far one library's run got in the budget (``minutes``), from its stored epochs and curve."""
    if side["best_val_ndcg@10"] is None:  # no validation split: a fixed epoch count, the last one tested
        if fixed_epochs and side["epochs"] < fixed_epochs:
            return f"{side['epochs']} of the {fixed_epochs} epochs before the budget ran out"
        return f"all {side['epochs']} epochs in {side['minutes_to_best']:.0f} minutes"
    if side["best_epoch"] == side["epochs"]:
        return f"still improving when the budget ran out, at epoch {side['epochs']}"
    near = f"98% of its best at {side['minutes_to_98pct_of_best']:.1f} minutes"
    if side["elapsed_seconds"][-1] >= 60 * minutes:  # the budget, not early stopping, ended it
        return f"the budget ran out at epoch {side['epochs']}, its best epoch {side['best_epoch']}, {near}"
    return f"levelled off: best epoch {side['best_epoch']} of {side['epochs']}, {near}"


def peers_after(stems):
    """The paragraph under a side-by-side table, every figure read from its stored record."""
    (stem,) = stems
    record = load(stem)
    protocol = record["protocol"]["name"]
    fixed_epochs = record["protocol"]["training"].get("epochs")
    sentences, behind = [], []
    for model, sides in record["models"].items():
        ours = next(side for side in sides if side["library"] == "tfseqrec")
        others = [side for side in sides if side is not ours]
        name = kinds.get(model).model_class
        sentence = (
            f"{name}: tfseqrec {_figures(ours['test'])} ({_progress(ours, fixed_epochs, record['minutes'])})"
        )
        for theirs in others:
            if ours["test"]["ndcg@10"] <= theirs["test"]["ndcg@10"]:
                behind.append(name)
            sentence += f" against {theirs['library']}'s {_figures(theirs['test'])} ({_progress(theirs, fixed_epochs, record['minutes'])})"
        if not others:
            sentence += ", the peer not run"
        key = f"{protocol}/{model}"
        if key in protocols.PUBLISHED:
            p = protocols.published(key)
            sentence += (
                f"; {ours['test']['ndcg@10'] / p.ndcg:.2f}x the {p.figures} of {p.model} in {p.source}."
            )
        else:
            sentence += f"; no {name} figure is published on this protocol."
        sentences.append(sentence)
    lead = (
        f"tfseqrec is ahead for every model run on both sides, {record['minutes']:g} minutes each."
        if not behind
        else f"tfseqrec is behind or level for {_listed(behind)}, {record['minutes']:g} minutes each."
    )
    return textwrap.fill(" ".join([lead, *sentences]), width=92)


def scale_tables(stems):
    return "\n\n".join(_printed(scale.print_tables, load(s)["rows"]) for s in stems)


def serving_tables(stems):
    """``serving.py``'s table of each stored run, under the line that says what was served where."""
    return _captioned(
        stems,
        lambda r: (
            f"{r['model']}, vocabulary of {r['num_items']:,} items, history {r['history_length']}, "
            f"k = {r['k']}; {r['environment']}."
        ),
        lambda r: _printed(serving.print_tables, r),
    )


def masking_tables(stems):
    """``masking.py``'s tables of each stored run, under the line that says the batch masked."""
    return _captioned(
        stems,
        lambda r: (
            f"Batch {r['batch_size']:,} x length {r['length']}, {r['num_items']:,} items, mask_prob "
            f"{r['mask_prob']:g}; {r['environment']}."
        ),
        lambda r: _printed(masking.print_tables, r),
    )


def hstu_step_tables(stems):
    """``hstu_step.py``'s tables of each stored run, under the line that says the batch and machine."""
    return _captioned(
        stems,
        lambda r: (
            f"HSTU at ML-1M's size ({r['num_items']:,} items, length {r['length']}), batches of "
            f"{r['batch_size']}, the median of {r['rounds']} calls each in turn; {r['environment']}."
        ),
        lambda r: _printed(hstu_step.print_tables, r),
    )


def hstu_step_after(stems):
    """The paragraph under ``hstu_step_tables``: the widest batch's figures, and what each option
    did to the float32 step at every width, read from the stored run."""
    (run,) = map(load, stems)
    row = max(run["widths"], key=lambda r: r["width"])
    ms, flops = row["ms"], row["flops"]
    base, backbone = ms[hstu_step.BASE], ms[hstu_step.BACKBONE]
    attention = flops["attention"] / sum(flops.values())
    rate = sum(flops.values()) / 1e9 / (base / 1e3)
    text = (
        f"At width {row['width']}, the backbone's forward and backward took {backbone:.0f} of the step's "
        f"{base:.0f} ms ({100 * backbone / base:.0f}%): the loss over the catalogue and Adam are the rest. The "
        f"attention's two [n, n] products are {100 * attention:.0f}% of the step's matmul FLOPs, and the step "
        f"reaches {rate:.0f} GFLOP/s, {100 * rate / run['host_matmul_gflops']:.0f}% of the host's "
        f"{run['host_matmul_gflops']:.0f}: TensorFlow runs the attention as separate kernels, each a pass over "
        "[batch, heads, n, n] tensors in memory (the products, the biases, SiLU and their gradients), not as "
        "one fused kernel."
    )
    for name, _, _ in hstu_step.VARIANTS[1:]:
        ratios = [r["ms"][name] / r["ms"][hstu_step.BASE] for r in run["widths"]]
        low, high = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
        spread = f"{low}x" if low == high else f"{low}-{high}x"
        verdict = (
            "longer at every width"
            if min(ratios) > 1
            else "shorter at every width"
            if max(ratios) < 1
            else "longer at some widths, shorter at others"
        )
        text += f" {name}: {spread} the float32 step's time ({verdict})."
    if any(
        r["ms"][name] < r["ms"][hstu_step.BASE]
        for name, _, _ in hstu_step.VARIANTS[1:]
        for r in run["widths"]
    ):
        text += (
            " A shorter step is not yet a faster model: what an option does to accuracy takes a run of "
            "`benchmarks/ml1m.py` with it, which this table is not."
        )
    return textwrap.fill(text, width=92, break_on_hyphens=False)


def transfer_tables(stems):
    tables = []
    for s in stems:
        run = load(s)
        tables.append(
            _printed(transfer.print_tables, run["targets"], run["source"]["seconds"], run["source"]["epochs"])
        )
    return "\n\n".join(tables)


def mean_sd(values):
    """``mean ± sd`` (sample standard deviation) to four places."""
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.4f} ± {(v.std(ddof=1) if len(v) > 1 else 0.0):.4f}"


# The seeds of SASRec (width 64) and UniSRec with ids (384 wide) on Scientific: (file, row) each.
SCIENTIFIC_SEEDS = {
    "SASRec (width 64)": [
        ("text-unisrec-screen", "sasrec"),
        ("text-seeds", "sasrec [seed=1]"),
        ("text-seeds", "sasrec [seed=2]"),
    ],
    "UniSRec text + id (384 wide)": [
        ("text-unisrec-384", "unisrec-id [hidden_dim=384, num_heads=2]"),
        ("text-unisrec-384-more", "unisrec-id [hidden_dim=384, num_heads=2, seed=1, epochs=8]"),
        ("text-seeds", "unisrec-id [hidden_dim=384, num_heads=2, seed=2, epochs=8]"),
    ],
}


def seed_rows(pairs):
    return [load(stem)["results"][row] for stem, row in pairs]


def scientific_seeds_table(stems):
    """Markdown: per model, each seed's NDCG@10 and Recall@10, their mean ± sd, and against SASRec's mean."""
    lines = [
        "| model | metric | seed 0 | seed 1 | seed 2 | mean ± sd | / SASRec's mean |",
        "|---|---|---|---|---|---|---|",
    ]
    base = {}
    for model, pairs in SCIENTIFIC_SEEDS.items():
        rows = seed_rows(pairs)
        for key, label in (("ndcg@10", "NDCG@10"), ("hr@10", "Recall@10")):
            v = [r["all"][key] for r in rows]
            base.setdefault(key, np.mean(v))
            lines.append(
                f"| {model} | {label} | "
                + " | ".join(f"{x:.4f}" for x in v)
                + f" | {mean_sd(v)} | {np.mean(v) / base[key]:.3f} |"
            )
        ratios = [r["cold"]["ndcg@10"] / r["warm"]["ndcg@10"] for r in rows]
        lines.append(
            f"| {model} | cold / warm NDCG@10 | " + " | ".join(f"{x:.2f}" for x in ratios) + " | | |"
        )
    return "\n".join(lines)


# === benchmarks/README.md ===


@dataclasses.dataclass
class Section:
    heading: str
    protocol: str
    stems: list
    table: object  # stems -> markdown
    prose: str = ""
    after: object = ""  # text, or a function of the stems that writes it from the stored runs
    anchor: str = None  # instead of the protocol's
    cites: tuple = ()  # other stored runs whose figures the hand-written text quotes

    def render(self):
        for stem in self.stems:
            if protocol_of(stem) != self.protocol:
                raise ValueError(
                    f"benchmarks/results/{stem}.json is on protocol {protocol_of(stem)!r}, its section "
                    f"{self.heading!r} on {self.protocol!r}"
                )
        hand = self.prose + ("" if callable(self.after) else self.after)
        unbacked = unbacked_figures(hand, [*self.stems, *self.cites])
        if unbacked:
            raise ValueError(
                f"section {self.heading!r} quotes {', '.join(unbacked)}, which neither its runs nor "
                "the runs it cites hold, nor protocols.PUBLISHED or QUOTED: correct the figure, or "
                "name the run that holds it in cites"
            )
        links = ", ".join(f"[`{s}.json`](results/{s}.json)" for s in self.stems)
        cited = ", ".join(f"[`{s}.json`](results/{s}.json)" for s in self.cites)
        commands = "\n".join(command(s) for s in self.stems)
        parts = [
            f"### {self.heading}",
            protocol_line(self.protocol, self.anchor),
            f"Stored: {links}." + (f" The notes also quote {cited}." if cited else ""),
            self.prose.strip(),
            f"```bash\n{commands}\n```",
            self.table(self.stems),
            (self.after(self.stems) if callable(self.after) else self.after).strip(),
        ]
        return "\n\n".join(p for p in parts if p)


def relation(values, published):
    """How the mean of ``values`` stands to a published NDCG@10: within one standard deviation
    of the seeds is "level with", else "above" or "below"."""
    mean, sd = np.mean(values), np.std(values, ddof=1)
    return "level with" if abs(mean - published) <= sd else ("above" if mean > published else "below")


def _listed(words):
    """ "a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _seeds(seeds):
    """ "seed 3", "seeds 5 and 6": ``seeds`` as strings."""
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {_listed(seeds)}"


def epoch_cap(run):
    """The most epochs a stored ML-1M run could train: its ``epochs``, or the default it ran with."""
    return kinds.get(run["model"]).options(run["config"]).epochs


def seeds_after(compared, target=None, host=""):
    """The paragraph under an ML-1M seeds table, its figures read from the stored runs.

    ``compared``: ``(published key, wording)`` pairs the mean NDCG@10 is set against;
    ``target``: an NDCG@10 asked of every seed, or ``None``; ``host``: a sentence on the
    runs' host. Returns ``after`` for a ``Section``: a function of the section's stems.
    """

    def after(stems):
        runs = ml1m_runs(stems)
        ndcg = [ml1m.filtered(r)["ndcg@10"] for r in runs]
        hr = [ml1m.filtered(r)["hr@10"] for r in runs]
        near = [r["minutes_to_98pct_of_best"] for r in runs]
        published = [(protocols.published(key), wording.format(fig=fig(key))) for key, wording in compared]
        reach = ""
        if target is not None:
            reached = [str(r["seed"]) for r, v in zip(runs, ndcg) if v >= target]
            reach = (
                f"seeds {_listed(reached)} reached {target:g}" if reached else f"no seed reached {target:g}"
            )
            reach = f"; {reach}"
        if len(runs) > 1:
            standing = _listed([f"{relation(ndcg, p.ndcg)} {wording}" for p, wording in published])
            lead = (
                f"The mean over {len(runs)} seeds, {np.mean(ndcg):.4f} / {np.mean(hr):.4f}, is {standing}"
                f"{reach} ({min(ndcg):.4f}-{max(ndcg):.4f} over the seeds)."
            )
            quality = f"98% of each seed's best validation NDCG@10 came after {min(near):.1f}-{max(near):.1f} minutes."
        else:  # one seed so far: no spread to stand within
            standing = _listed([f"{ndcg[0] / p.ndcg:.2f}x {wording}" for p, wording in published])
            lead = f"One seed so far: {_figures(ml1m.filtered(runs[0]))}, {standing}{reach}."
            quality = (
                f"98% of its best validation NDCG@10 came after {near[0]:.1f} minutes; its best epoch "
                f"was {runs[0]['best_epoch']} of {runs[0]['epochs']}."
            )
        # Stopped early: more than two epochs of the budget were left and the epoch cap was not
        # reached (patience ended the run).
        early = [
            r
            for r in runs
            if r["train_wall_seconds"] < 60 * r["config"]["max_train_minutes"] - 2 * r["epoch_seconds_median"]
            and r["epochs"] < epoch_cap(r)
        ]
        stopped = ""
        if early:
            seeds = _listed([str(r["seed"]) for r in early])
            minutes = _listed([f"{r['train_wall_seconds'] / 60:.0f}" for r in early])
            stopped = f" Seed{'s' if len(early) > 1 else ''} {seeds} stopped early (patience) after {minutes} minutes."
        return textwrap.fill(f"{lead}{stopped} {quality} {host}".strip(), width=92)

    return after


# What a SASRec mean on `sasrec-plus` is set against: SASRec+'s two published figures.
SASREC_PLUS_COMPARED = [
    ("sasrec-plus/sasrec", "SASRec+'s published {fig} (3,000 negatives)"),
    ("sasrec-plus/sasrec-softmax", "its full softmax ({fig})"),
]
SASREC_SEEDS_AFTER = seeds_after(
    SASREC_PLUS_COMPARED,
    target=0.19,
    host="An epoch took 10.8-12.0 s, against 12.1-12.4 s for the seeds before the block-wise softmax "
    "(next table), which ran on a faster host (466 GFLOP/s of fp32 matmul against 400-440 here); on one "
    "host, one run after the other, the change made SASRec's epochs about 1.4x as fast "
    "([below](#the-full-softmax-a-block-of-positions-at-a-time-before-and-after)). The minutes to 98% rose "
    "all the same: seeds 1 and 2 needed 78 and 88 epochs to get there, against 50 and 54 before (seed 0: "
    "60 and 61). With the sums in another order a seed's run is another run, and the epoch at which a "
    "validation curve flattens varies more than an epoch's cost.",
)
SASREC_SEEDS_BEFORE_AFTER = seeds_after(
    SASREC_PLUS_COMPARED,
    target=0.19,
    host="These runs had a faster host than the project's earlier ones: a large fp32 matmul ran at "
    "about 450 GFLOP/s on it, measured after the runs, against the 130-190 of the machine notes, so an "
    "epoch took 12 s where the 10-minute ablation below took 23 s, and the table's share of the "
    "assumed 130 GFLOP/s overstates how much of this host the training used (about a quarter).",
)


def before_after_table(after):
    """A table of one row a run of before-and-after files (runs alternate, before first); ``after``
    names the code after the change."""

    def table(stems):
        lines = [
            "| model | code | epochs | s/epoch | val NDCG@10 at epoch 2 | GFLOP/s | share of the host's fp32 matmul |",
            "|---|---|---|---|---|---|---|",
        ]
        for stem in stems:
            for i, r in enumerate(load(stem)):
                code = "before" if i % 2 == 0 else after
                lines.append(
                    f"| {r['model']} | {code} | {r['epochs']} | {r['epoch_seconds_median']:.1f} | "
                    f"{r['val_ndcg@10'][1]:.4f} | {r['train_gflops']:.1f} | "
                    f"{r['train_gflops'] / r['host_matmul_gflops']:.0%} of {r['host_matmul_gflops']:.0f} |"
                )
        return "\n".join(lines)

    return table


softmax_before_after_table = before_after_table("block-wise")


def alternating_seconds(runs):
    """s/epoch of a before-and-after file's runs (they alternate, before first): (before, after)."""
    return [r["epoch_seconds_median"] for r in runs[::2]], [r["epoch_seconds_median"] for r in runs[1::2]]


def softmax_before_after(stems):
    """The paragraph under the block-wise softmax's before-and-after runs: each model's s/epoch."""
    parts = []
    for stem in stems:
        runs = load(stem)
        before, after = alternating_seconds(runs)
        name = kinds.get(runs[0]["model"]).model_class
        parts.append(
            f"{name} {' and '.join(f'{b:.1f}' for b in before)} s/epoch before, "
            f"{' and '.join(f'{a:.1f}' for a in after)} after ({np.mean(before) / np.mean(after):.2f}x)"
        )
    return textwrap.fill(
        "; ".join(parts) + ". SASRec and HSTU score every position of a window, so the loss is a large "
        "part of their step; BERT4Rec scores its masked positions only, a fifth of them, and gains little. "
        "The validation NDCG@10 of the first epochs agrees to three decimal places before and after: the "
        "loss is the same, summed in another order.",
        width=92,
    )


SOFTMAX_BEFORE_AFTER = softmax_before_after


def mask_bias_before_after(stems):
    """The paragraph under HSTU's mask-bias before-and-after runs: s/epoch and epoch 2's validation."""
    (stem,) = stems
    runs = load(stem)
    before, after = alternating_seconds(runs)
    ratio = np.mean(before) / np.mean(after)
    spread = max(max(before) - min(before), max(after) - min(after)) / np.mean(before)
    if abs(ratio - 1) <= spread:
        verdict = (
            f"({ratio:.2f}x): no difference an epoch can show, within the spread of one code's runs on "
            "this host. The attention is a part of HSTU's step; its forward and backward through the 8 "
            "layers at the longest batch lose a sixth of their time in a microbenchmark, and the rest of "
            "the step (the projections, the norms, the loss, the shorter batches) is unchanged. "
        )
    else:
        verdict = f"({ratio:.2f}x). "
    val = {
        code: sorted({f"{r['val_ndcg@10'][1]:.4f}" for r in runs[i::2]})
        for i, code in enumerate(["before", "after"])
    }
    return textwrap.fill(
        f"HSTU {' and '.join(f'{x:.1f}' for x in before)} s/epoch before, "
        f"{' and '.join(f'{x:.1f}' for x in after)} after "
        + verdict
        + f"The validation NDCG@10 after two epochs: {' and '.join(val['before'])} before, "
        f"{' and '.join(val['after'])} after (each code repeats its own figure). The layer computes the "
        "same function (its tests hold it to the NumPy transcription of the paper's equations; the outputs "
        "and gradients of both codes agree to float32 rounding), its sums in another order, and two epochs "
        "of training amplify the difference.",
        width=92,
    )


# HSTU's 60-minute defaults at the current code (Adam 4e-3, the block-wise softmax, the mask as a
# bias); the same hour at Adam 2e-3, the default before, at the same code; and that command's run
# before the block-wise softmax and the mask bias.
HSTU_DEFAULTS_STEMS = ["ml1m-hstu-rate-4e-3-seed-0"]
HSTU_RATE_BEFORE = "ml1m-hstu-mask-bias-seed-0"
HSTU_DEFAULTS_BEFORE = "ml1m-hstu-seed-0"
# SASRec's defaults at the current code (the block-wise full softmax); "ml1m-sasrec-seeds-0-1-2"
# holds the same command's seeds before it, against which the 30-minute probes ran.
SASREC_DEFAULTS_STEMS = ["ml1m-sasrec-blockwise-seed-0", "ml1m-sasrec-blockwise-seeds-1-2"]
SASREC_STRIDE_STEMS = ["ml1m-sasrec-window-stride-200", "ml1m-sasrec-window-stride-200-seeds-1-2"]
# SASRec at Adam 4e-3 decayed to 0 by a cosine over 60 epochs (one warm-up epoch), three seeds at
# the code of SASREC_DEFAULTS_STEMS: the same test figures in half the time.
SASREC_COSINE_STEMS = ["ml1m-sasrec-cosine-60-seed-0", "ml1m-sasrec-cosine-60-seeds-1-2"]
# The seeds paragraph of a SASRec recipe on `sasrec-plus`: against SASRec+ and the 0.19 asked.
SASREC_TARGET_SEEDS_AFTER = seeds_after(SASREC_PLUS_COMPARED, target=0.19)
# The window stride and the cosine decay together (SASREC_STRIDE_STEMS ran before the block-wise softmax).
SASREC_STRIDE_COSINE_STEMS = [
    "ml1m-sasrec-window-stride-cosine-60-seed-0",
    "ml1m-sasrec-window-stride-cosine-60-seeds-1-2",
]
# The same over 80 epochs: SASRec's preset "ml1m-cosine" (tfseqrec/models/sasrec/presets.py).
SASREC_PRESET_COSINE_STEMS = [
    "ml1m-sasrec-window-stride-cosine-80-seed-0",
    "ml1m-sasrec-window-stride-cosine-80-seeds-1-2",
]


def sasrec_preset_cosine_after(stems):
    """The paragraphs under the window stride and cosine probes: every option's figures
    (``ml1m_probes_after``), then the 80-epoch decay's seeds, which the preset ``ml1m-cosine`` pins,
    against SASRec+ and the 0.19 / 0.33 asked, and against the defaults' seeds at the same code."""
    runs = ml1m_runs(SASREC_PRESET_COSINE_STEMS)
    preset = kinds.get("sasrec").options({}, preset="ml1m-cosine")
    for r in runs:  # the preset pins every option the runs set beside the defaults
        for key, value in r["config"].items():
            if key not in ("model", "max_train_minutes", "seed") and getattr(preset, key) != value:
                raise ValueError(f"the preset ml1m-cosine's {key} is not its stored runs' ({value!r})")
    seeds = " ".join(SASREC_TARGET_SEEDS_AFTER(SASREC_PRESET_COSINE_STEMS).split())
    defaults = ml1m_runs(SASREC_DEFAULTS_STEMS)

    def mean(rs, key):
        return np.mean([ml1m.filtered(r)[key] for r in rs])

    wall = [r["train_wall_seconds"] / 60 for r in runs]
    capped = [r for r in runs if r["epochs"] == epoch_cap(r)]
    if len(capped) == len(runs):
        ended = f"Each run ended at its {preset.epochs}th epoch"
    else:
        ended = (
            f"{len(capped)} of {len(runs)} runs ended at the {preset.epochs}th epoch, the others when the "
            f"budget ran out (after epoch {_listed([str(r['epochs']) for r in runs if r not in capped])})"
        )
    text = (
        f"Over {preset.epochs} epochs (SASRec's preset `ml1m-cosine`): "
        f"{seeds[0].lower()}{seeds[1:]} {ended}, after {min(wall):.1f}-{max(wall):.1f} "
        f"minutes of `fit`. The defaults' three seeds at the same code: {mean(defaults, 'ndcg@10'):.4f} / "
        f"{mean(defaults, 'hr@10'):.4f} "
        "([defaults](#sasrec-defaults-three-seeds-30-minutes))."
    )
    return ml1m_probes_after(stems) + "\n\n" + textwrap.fill(text, width=92, break_on_hyphens=False)


def epochs_to_98(run):
    """The first epoch (counted from 1) whose validation NDCG@10 is within 98% of the run's best."""
    return ml1m.near_best_epoch(run["val_ndcg@10"]) + 1


def minutes_to(run, level):
    """The minutes of ``fit`` after which the run's validation NDCG@10 first reached ``level``; ``None`` if never."""
    for minutes, value in zip(run["minutes_at_epoch"], run["val_ndcg@10"]):
        if value >= level:
            return minutes
    return None


def epoch_to(run, level):
    """The first epoch (counted from 1) whose validation NDCG@10 reached ``level``; ``None`` if none did."""
    return next((i + 1 for i, value in enumerate(run["val_ndcg@10"]) if value >= level), None)


def val_at_minutes(run, minutes):
    """The validation NDCG@10 of the last epoch that ended within ``minutes`` of ``fit``."""
    ended = [v for m, v in zip(run["minutes_at_epoch"], run["val_ndcg@10"]) if m <= minutes]
    return ended[-1]


def how_the_hour_ended(run):
    """Why a budgeted run stopped: still improving, the budget, or early stopping."""
    if run["best_epoch"] >= run["epochs"] - 2:
        return "still improving when the hour ended"
    if run["train_wall_seconds"] >= 60 * run["config"]["max_train_minutes"]:
        return "the hour ended before early stopping would have"
    return "early stopping ended the run"


def hstu_defaults_after(stems):
    """The paragraph under HSTU's 60-minute defaults (Adam 4e-3): its time to 98% of its best, and
    how soon it reached what the same hour at 2e-3, the default before, reached at the same code."""
    (run,) = ml1m_runs(stems)
    (before,) = ml1m_runs([HSTU_RATE_BEFORE])
    still = how_the_hour_ended(run)
    near = 0.98 * before["best_val_ndcg@10"]
    reached = minutes_to(run, near)
    marks = (10, 20, 30)
    return textwrap.fill(
        f"The best epoch was {run['best_epoch']} of {run['epochs']}: {still}. 98% of its best validation "
        f"NDCG@10 ({run['best_val_ndcg@10']:.4f}) came after {run['minutes_to_98pct_of_best']:.1f} minutes "
        f"(epoch {epochs_to_98(run)}). The same hour at Adam 2e-3, the default before, at the same code "
        f"([below](#hstu-at-adam-2e-3-60-minutes)): best {before['best_val_ndcg@10']:.4f}, 98% of it after "
        f"{before['minutes_to_98pct_of_best']:.1f} minutes; at 4e-3 that level ({near:.4f}) came after "
        f"{reached:.1f} minutes. Test NDCG@10 / HR@10 {_figures(ml1m.filtered(run))} at 4e-3 against "
        f"{_figures(ml1m.filtered(before))} at 2e-3. Validation NDCG@10 after {_listed([str(m) for m in marks])} minutes: "
        f"{_listed([f'{val_at_minutes(run, m):.4f}' for m in marks])} at 4e-3 against "
        f"{_listed([f'{val_at_minutes(before, m):.4f}' for m in marks])} at 2e-3. An HSTU epoch costs about "
        "twice a SASRec one (8 layers of width 50 against 2 of 64). One seed of each: the spread over "
        "seeds is not measured.",
        width=92,
        break_on_hyphens=False,
    )


def hstu_rate_before_after(stems):
    """The paragraph under HSTU's hour at 2e-3: its curve and its time to 98% of its best,
    against the same command's run before the block-wise softmax and the mask bias."""
    (run,) = ml1m_runs(stems)
    (before,) = load(HSTU_DEFAULTS_BEFORE)
    softmax_before, softmax_after = alternating_seconds(load("ml1m-hstu-softmax-before-after"))
    blockwise = np.mean(softmax_before) / np.mean(softmax_after)
    still = how_the_hour_ended(run)
    later = ""
    if run["best_val_ndcg@10"] > before["best_val_ndcg@10"] and epochs_to_98(run) > epochs_to_98(before):
        later = (
            f"In the hour, the faster epochs went on to a higher best validation NDCG@10 "
            f"({run['best_val_ndcg@10']:.4f} against {before['best_val_ndcg@10']:.4f}), so 98% of it came "
            "later in epochs. "
        )
    return textwrap.fill(
        f"The best epoch was {run['best_epoch']} of {run['epochs']}: {still}. 98% of its best validation "
        f"NDCG@10 came after {run['minutes_to_98pct_of_best']:.1f} minutes (epoch {epochs_to_98(run)}), "
        f"against {before['minutes_to_98pct_of_best']:.1f} minutes (epoch {epochs_to_98(before)}) for the "
        f"same command at the code before the block-wise softmax and the mask bias (next table), whose "
        f"epochs took {before['epoch_seconds_median']:.1f} s of training against "
        f"{run['epoch_seconds_median']:.1f} s (the block-wise softmax made them {blockwise:.2f}x as fast on one "
        "host, [below](#the-full-softmax-a-block-of-positions-at-a-time-before-and-after); the rest is "
        "the host's speed). " + later + "An HSTU epoch costs about twice a SASRec one "
        "(8 layers of width 50 against 2 of 64). One seed: the spread over seeds is not measured yet.",
        width=92,
        break_on_hyphens=False,
    )


def sasrec_cosine_after(stems):
    """The paragraphs under SASRec's cosine probes: every option's figures (``ml1m_probes_after``),
    then the epochs each group took to 98% of its best and to its end."""
    groups = {}
    for r in ml1m_runs(stems):
        groups.setdefault(_options(r) == "defaults", []).append(r)
    cosine, constant = groups[False], groups[True]

    def mean_of(runs, key):
        return np.mean([r[key] for r in runs])

    def spread(values, digits=0):
        low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
        return low if low == high else f"{low}-{high}"

    text = (
        f"In epochs, which do not depend on the host: the cosine's seeds came within 98% of their best "
        f"validation after {spread([epochs_to_98(r) for r in cosine])} epochs and ended after "
        f"{spread([r['epochs'] for r in cosine])} ({spread([r['train_wall_seconds'] / 60 for r in cosine], 1)} "
        f"minutes); the defaults' after {spread([epochs_to_98(r) for r in constant])} and ended after "
        f"{spread([r['epochs'] for r in constant])} ({spread([r['train_wall_seconds'] / 60 for r in constant], 1)} "
        f"minutes). Mean best validation NDCG@10 {mean_of(cosine, 'best_val_ndcg@10'):.4f} against the "
        f"defaults' {mean_of(constant, 'best_val_ndcg@10'):.4f}, mean test NDCG@10 "
        f"{np.mean([ml1m.filtered(r)['ndcg@10'] for r in cosine]):.4f} against "
        f"{np.mean([ml1m.filtered(r)['ndcg@10'] for r in constant]):.4f}. It is not the `ml1m` preset: "
        "that preset pins the library's defaults, which train until validation stops improving on any "
        "data, where a decay needs its number of epochs chosen in advance; on ML-100K and Amazon "
        "Scientific the same options lowered SASRec's test NDCG@10 "
        "([probes](#probes-sasrecs-cosine-decay-over-60-epochs-on-ml-100k-and-scientific))."
    )
    return ml1m_probes_after(stems) + "\n\n" + textwrap.fill(text, width=92)


def hstu_cosine_after(stems, epochs=(10, 20, 30, 40, 50)):
    """The paragraphs under HSTU's cosine probe: each run's figures (``ml1m_probes_after``), then
    the validation NDCG@10 of each at the same epochs."""
    runs = ml1m_runs(stems)
    constant, cosine = runs  # the defaults' run, then the decay's
    curves = "; ".join(
        f"{_options(r)}: "
        + ", ".join(f"{r['val_ndcg@10'][e - 1]:.4f}" for e in epochs if e <= len(r["val_ndcg@10"]))
        for r in runs
    )
    near = "; ".join(f"{_options(r)}: epoch {epochs_to_98(r)} of {r['epochs']}" for r in runs)
    text = (
        f"Validation NDCG@10 after epochs {_listed([str(e) for e in epochs])}: {curves}. "
        f"The first epoch within 98% of the run's best: {near}. "
        f"The decay ends at {ml1m.filtered(cosine)['ndcg@10'] / ml1m.filtered(constant)['ndcg@10']:.2f}x "
        "the defaults' test NDCG@10: HSTU leaves popularity's level slowly (its pointwise attention) and "
        "still gains at its full rate when a decay over 50 epochs has lowered it, so it keeps the constant "
        "rate, and its time to 98% of a good model stays bound by the epochs it needs."
    )
    return ml1m_probes_after(stems) + "\n\n" + textwrap.fill(text, width=92)


def sasrec_stride_after(stems):
    """The paragraphs under SASRec's window-stride probes: every option's figures
    (``ml1m_probes_after``), then the stride's seeds against SASRec+ and the 0.19 asked."""
    stride = ml1m_runs(SASREC_STRIDE_STEMS)
    defaults = [r for r in ml1m_runs(stems) if r not in stride]
    gain = np.mean([ml1m.filtered(r)["ndcg@10"] for r in stride]) - np.mean(
        [ml1m.filtered(r)["ndcg@10"] for r in defaults]
    )
    spread = np.ptp([ml1m.filtered(r)["ndcg@10"] for r in defaults])
    rule = textwrap.fill(
        f"The stride gains {gain:.4f} test NDCG@10 on the mean, "
        + ("more" if gain > spread else "no more")
        + f" than the defaults' spread over seeds ({spread:.4f}). It is not the `ml1m` preset: "
        "that preset pins the library's defaults, the options `tfseqrec train` takes on any data, and "
        "a default must hold on other data too; on ML-100K it does not "
        "([probes](#probes-every-id-model-on-the-earlier-windows-of-long-histories-ml-100k)).",
        width=92,
        break_long_words=False,
        break_on_hyphens=False,
    )
    seeds = " ".join(SASREC_TARGET_SEEDS_AFTER(SASREC_STRIDE_STEMS).split())
    seeds = textwrap.fill(f"With `window_stride: 200`, {seeds[0].lower()}{seeds[1:]}", width=92)
    return f"{ml1m_probes_after(stems)}\n\n{seeds}\n\n{rule}"


BERT4REC_SEED_STEMS = ["ml1m-bert4rec-seed-0", "ml1m-bert4rec-seeds-1-2"]  # its headline seeds, 60 minutes


def bert4rec_stride_after(stems):
    """The paragraph under BERT4Rec's window-stride probe on ML-1M: its run against tfseqrec's
    BERT4Rec with the defaults in the side-by-side record of the same protocol and budget."""
    (run,) = ml1m_runs(stems)
    record = load("peers-sasrec-plus")
    (side,) = [s for s in record["models"]["bert4rec"] if s["library"] == "tfseqrec"]
    if side["config"]["seed"] != run["seed"] or side["config"]["max_train_minutes"] != run["config"].get(
        "max_train_minutes"
    ):
        raise ValueError("the stride probe and the side-by-side run differ in seed or budget")
    test = ml1m.filtered(run)
    # Both from the fit time at each epoch's end: an epoch's training and its validation.
    mine = 60 * float(np.median(np.diff([0.0, *run["minutes_at_epoch"]])))
    seconds = float(np.median(np.diff([0.0, *side["elapsed_seconds"]])))
    text = (
        f"With `window_stride: 200`, seed {run['seed']}: test NDCG@10 / HR@10 {test['ndcg@10']:.4f} / "
        f"{test['hr@10']:.4f} after {run['epochs']} epochs (best {run['best_epoch']}, best validation "
        f"{run['best_val_ndcg@10']:.4f}, {mine:.1f} s an epoch with its validation), against the defaults' "
        f"{side['test']['ndcg@10']:.4f} / {side['test']['hr@10']:.4f} after {side['epochs']} epochs (best "
        f"{side['best_epoch']}, best validation {side['best_val_ndcg@10']:.4f}, {seconds:.1f} s an epoch) in the "
        f"same {run['config']['max_train_minutes']:g} minutes of the side-by-side run "
        "([tfseqrec and RecTools on `sasrec-plus`](#tfseqrec-and-rectools-on-sasrec-plus))."
    )
    seeds = [ml1m.filtered(r)["ndcg@10"] for r in ml1m_runs(BERT4REC_SEED_STEMS)]
    gain, spread = test["ndcg@10"] - side["test"]["ndcg@10"], float(np.ptp(seeds))
    text += (
        f" One seed: the stride's {gain:+.4f} is "
        + ("within" if abs(gain) <= spread else "beyond")
        + f" the spread of BERT4Rec's three 60-minute seeds ({spread:.4f})"
        + (", from fewer, longer epochs." if run["epochs"] < side["epochs"] else ".")
    )
    return textwrap.fill(text, width=92, break_long_words=False, break_on_hyphens=False)


HSTU_RECTOOLS_SEEDS_AFTER = seeds_after(
    [
        ("rectools/hstu", "RecTools' HSTU tutorial's {fig} (without timestamps, as here)"),
        ("rectools/hstu-time", "its {fig} with them"),
    ],
    # Issue 40 asked for the HSTU-large figure quoted for RecTools (protocols.QUOTED).
    target=protocols.QUOTED["rectools/hstu-large-quoted"][1],
)


HSTU_RECTOOLS_SEEDS = [
    "ml1m-hstu-rectools-seed-0",
    "ml1m-hstu-rectools-seed-1",
    "ml1m-hstu-rectools-seed-2",
]  # 2e-3
HSTU_RECTOOLS_RATE = "ml1m-hstu-rectools-rate-4e-3-40-epochs"
RATE_EPOCHS = (5, 10, 15, 20, 30, 40)


def hstu_rectools_rate_table(stems):
    """Markdown: each run's best validation NDCG@10 so far at ``RATE_EPOCHS``: the 2e-3 seeds,
    then (the last stem) the 4e-3 run, epoch by epoch."""

    def label(stem, run):
        return ["4e-3" if stem == stems[-1] else "2e-3", str(run["seed"])]

    return best_so_far_table(stems, RATE_EPOCHS, labels=(["Adam", "seed"], label))


def _span(values, digits=4):
    """ "0.1809" for one value, "0.1795-0.1809" for several (lowest to highest)."""
    low, high = min(values), max(values)
    return (
        f"{low:.{digits}f}"
        if f"{low:.{digits}f}" == f"{high:.{digits}f}"
        else f"{low:.{digits}f}-{high:.{digits}f}"
    )


def hstu_rectools_rate_after(stems):
    """The paragraph under ``hstu_rectools_rate_table``: the 4e-3 runs' (the last stem's, a run a
    seed) best validation against the 2e-3 seeds' (the other stems') at the same epochs, read
    from the stored runs."""
    *seed_stems, probe = stems
    runs = ml1m_runs([probe])
    seeds = ml1m_runs(seed_stems)
    n = min(r["epochs"] for r in runs)
    mine = [max(r["val_ndcg@10"][:n]) for r in runs]
    theirs = [max(r["val_ndcg@10"][:n]) for r in seeds]
    if min(mine) > max(theirs):
        verdict = "ahead of their range"
    elif max(mine) < min(theirs):
        verdict = "behind their range"
    else:
        verdict = "overlapping their range"
    level = 0.98 * min(r["best_val_ndcg@10"] for r in seeds)
    their_epochs = [epoch_to(r, level) for r in seeds]  # each reached its own best, above the level
    epochs_to_level = [epoch_to(r, level) for r in runs]
    reached = [f"at epoch {e} (seed {r['seed']})" for r, e in zip(runs, epochs_to_level) if e]
    missed = [r for r, e in zip(runs, epochs_to_level) if not e]  # named once for their epoch count
    for epochs in sorted({r["epochs"] for r in missed}):
        group = [str(r["seed"]) for r in missed if r["epochs"] == epochs]
        whose = "its" if len(group) == 1 else "their"
        reached.append(f"at none of {whose} {epochs} epochs ({_seeds(group)})")
    at_4e3 = _listed(reached) + " at 4e-3"
    label = _seeds([str(r["seed"]) for r in runs])
    text = (
        f"After {n} epochs, the best validation NDCG@10 at 4e-3 ({label}) was {_span(mine)}, against "
        f"{_span(theirs)} for the 2e-3 seeds after as many epochs of their hour; {verdict}. "
        f"98% of the lowest of the 2e-3 seeds' best ({level:.4f}) came {at_4e3}, at epochs "
        f"{_listed([str(e) for e in their_epochs])} at 2e-3. The test figures are each run's best "
        f"validation epoch's: {n} epochs at 4e-3 against the 2e-3 seeds' hour, so they do not compare. "
        f"The 4e-3 runs' hosts measured {_span([r['host_matmul_gflops'] for r in runs], 0)} GFLOP/s of fp32 "
        f"matmul against the 2e-3 seeds' {_span([r['host_matmul_gflops'] for r in seeds], 0)}: their minutes "
        "do not compare either, their epochs do."
    )
    return textwrap.fill(text, width=92, break_on_hyphens=False)


def gpu_preset_run(stem, model):
    """The first run of ``model`` in ``gpu.py``'s stored ``stem`` with the preset's own options."""
    return next(
        r for record in load(stem) if not record.get("config") for r in record["runs"] if r["model"] == model
    )


def hstu_paper_after(stems):
    """The paragraph under HSTU on ``hstu-paper``, its figures read from the stored runs."""
    (run,) = ml1m_runs(stems)
    test = ml1m.filtered(run)
    paper = protocols.published("hstu-paper/hstu")
    (sasrec_plus,) = ml1m_runs(HSTU_DEFAULTS_STEMS)
    gpu = gpu_preset_run("gpu-rectools", "hstu")
    minutes = run["train_wall_seconds"] / 60
    return textwrap.fill(
        "Like for like with the HSTU paper: its raw ratings, no validation split, its loss (sampled "
        "softmax, 128 uniform negatives per position), its 101 epochs and the input window filtered, "
        "with the model's defaults (the reference's HSTU-large configuration). tfseqrec reaches "
        f"{_figures(test)}, {test['ndcg@10'] / paper.ndcg:.2f}x the paper's "
        f"{paper.figures} ({test['hr@10'] / paper.hr:.2f}x its HR@10). The likeliest cause of the gap "
        "is data the shared file lacks: the paper's HSTU-large also reads the ratings' timestamps (the "
        "reference code's relative attention bias buckets the time gap between items, and is on by "
        "default), while `ml-1m_full_sequences.txt.gz` keeps the ratings' order but not their times, so "
        "this run has the position bias only. RecTools' HSTU tutorial measures that omission on the same "
        f"ratings: {fig('rectools/hstu')} without the time bias against {fig('rectools/hstu-time')} with "
        f"it, {TIME_BIAS_RATIO:.2f}x. The raw `ratings.dat` is not in the shared data, so the cause is "
        "not tested here. Smaller differences remain: Adam at 2e-3 (the default then) with beta_2 0.999 (the reference's "
        "AdamW: 1e-3, beta_2 0.98, no weight decay). The same model on `sasrec-plus` (full softmax, early "
        f"stopping) reaches {ml1m.filtered(sasrec_plus)['ndcg@10']:.4f}, and on one GPU on `rectools` "
        f"{gpu['test']['ndcg@10']:.4f}. One seed, alone on the CPU ({minutes:.0f} minutes).",
        width=92,
    )


# What RecTools' HSTU tutorial loses on the raw ratings without the time bias: NDCG@10 without / with.
TIME_BIAS_RATIO = protocols.published("rectools/hstu").ndcg / protocols.published("rectools/hstu-time").ndcg

HSTU_ANCHOR = (
    f"no HSTU figure on this protocol. The HSTU paper's {lab('hstu-paper/hstu')} (HSTU-large) "
    "is on `hstu-paper` (the raw ratings, no validation split, 128 uniform negatives per position, "
    f"the input window filtered) and RecTools' HSTU's {fig('rectools/hstu')} (without timestamps) on "
    "`rectools`: neither compares with these rows"
)


def sections():
    """Every table of benchmarks/README.md under its part's heading, with the prose written for it."""
    return {
        "ML-1M: SASRec, BERT4Rec, HSTU": (
            f"""
`benchmarks/ml1m.py` trains a model with the library's defaults on the protocol `--protocol`
names (default `sasrec-plus`; `benchmarks/protocols.py`) for at most a budget of `fit`
minutes on this project's 2-core CPU, keeps the best epoch by validation NDCG@10 (the last
epoch on a protocol without a validation split) and evaluates it on the test split. Every
choice is made on validation NDCG@10; test is only reported. "seen filtered" says whether
the user's history was removed from the candidates ("input window": only the items the
model read, as on `hstu-paper`);
the sampled columns rank the true item against 100 sampled negatives, as the SASRec paper
({protocols.quoted("sasrec-paper/sampled")}, 100 uniform) and the BERT4Rec paper ({protocols.quoted("bert4rec-paper/sampled")}, 100 popularity-sampled) did, and are
not comparable with full ranking. FLOP/s counts the matmuls of training (3x the forward
pass) against the rate a large fp32 matmul reached on the run's own host, measured before
and after it: hosts behind this 2-core CPU differ by several times (`benchmarks/machine.py`),
and runs stored before hosts were measured are read against an assumed 130 GFLOP/s, marked
`*`. s/epoch is training
alone: a CPU shared with other work during a run raises it ([`results/README.md`](results/README.md)
says what ran beside each run), and the ablations compare variants after the same number of
epochs for that reason.
Run benchmarks from a checkout nobody edits meanwhile (a `git worktree`): autograph reads a
function's source file when it first traces it.
""",
            [
                Section(
                    "SASRec, defaults, three seeds, 30 minutes",
                    "sasrec-plus",
                    SASREC_DEFAULTS_STEMS,
                    ml1m_results,
                    prose="""
Defaults: 2 layers of width 64, length 200, Adam at 2e-3, the full softmax without the
sequence's other items, batches of 128; one run per seed, one after the other, each with 30
minutes of `fit`.
""",
                    after=SASREC_SEEDS_AFTER,
                ),
                Section(
                    "SASRec, defaults, three seeds, 30 minutes, before the block-wise softmax",
                    "sasrec-plus",
                    ["ml1m-sasrec-seeds-0-1-2"],
                    ml1m_results,
                    prose="""
The same command's seeds before the full softmax ran a block of positions at a time
([below](#the-full-softmax-a-block-of-positions-at-a-time-before-and-after)); the probes
below ran at that code and are set against these.
""",
                    after=SASREC_SEEDS_BEFORE_AFTER,
                ),
                Section(
                    "HSTU, defaults, 60 minutes",
                    "sasrec-plus",
                    HSTU_DEFAULTS_STEMS,
                    ml1m_results,
                    anchor=HSTU_ANCHOR,
                    prose="""
HSTU with its defaults, Adam 4e-3 among them: the run's `--config` sets the rate that is
now the default, so `python benchmarks/ml1m.py --model hstu --minutes 60 --seeds 0`
repeats it at today's code.
""",
                    after=hstu_defaults_after,
                ),
                Section(
                    "HSTU at Adam 2e-3, 60 minutes",
                    "sasrec-plus",
                    [HSTU_RATE_BEFORE],
                    ml1m_results,
                    anchor=HSTU_ANCHOR,
                    prose="""
The defaults before HSTU's rate became 4e-3: Adam at 2e-3, at the code of the run above.
This and the HSTU runs below that set no rate ran at 2e-3; add `"learning_rate": 0.002` to
their `--config` to repeat them at today's code.
""",
                    after=hstu_rate_before_after,
                ),
                Section(
                    "HSTU, defaults, 60 minutes, before the block-wise softmax and the mask bias",
                    "sasrec-plus",
                    [HSTU_DEFAULTS_BEFORE],
                    ml1m_results,
                    anchor=HSTU_ANCHOR,
                    after="""
The same command at the code before the full softmax ran a block of positions at a time and
before HSTU's attention mask became a bias computed once per forward
([below](#hstus-attention-mask-as-a-bias-before-and-after)). The best epoch was 77 of 78:
still improving when the hour ended; 98% of its best validation NDCG@10 came after 47
minutes.
""",
                ),
                Section(
                    "Probe: HSTU, a cosine decay over 50 epochs",
                    "sasrec-plus",
                    ["ml1m-hstu-seed-0", "ml1m-hstu-cosine-50-seed-0"],
                    ml1m_probes_table,
                    anchor=HSTU_ANCHOR,
                    prose="""
SASRec reaches its defaults' test figures in half the time with a rate decayed over a
fixed number of epochs ([probes](#probes-sasrec-a-cosine-decay-over-60-epochs)). The same
tried on HSTU: its Adam at 2e-3 decayed to 0 by a cosine over 50 epochs (about 25 minutes
of epochs at the block-wise softmax's speed), against the 60-minute run of the defaults
above (stored before the block-wise softmax: its epochs are slower, its curve comparable
epoch by epoch). A budget of 40 minutes let the decay end.
""",
                    after=hstu_cosine_after,
                ),
                Section(
                    "HSTU on `rectools`, defaults, 60 minutes a seed",
                    "rectools",
                    HSTU_RECTOOLS_SEEDS,
                    ml1m_results,
                    prose="""
HSTU with its defaults on the raw ratings, a validation item and the whole history
filtered, each seed with 60 minutes of `fit`: the protocol of RecTools' HSTU tutorial,
whose HSTU reads no timestamps here either (the shared file has none). They ran at Adam
2e-3, the default then ([HSTU at Adam 2e-3](#hstu-at-adam-2e-3-60-minutes)).
""",
                    after=HSTU_RECTOOLS_SEEDS_AFTER,
                ),
                Section(
                    "Probe: HSTU on `rectools` on every window, 60 minutes",
                    "rectools",
                    [
                        "ml1m-hstu-rectools-seed-0",
                        "ml1m-hstu-rectools-seed-1",
                        "ml1m-hstu-rectools-seed-2",
                        "ml1m-hstu-rectools-window-stride-200",
                    ],
                    ml1m_probes_table,
                    prose="""
HSTU, like SASRec, trains each user on their newest 200 items by default; on the raw
ratings, too, a third of the training targets lie before that window. One seed with
`window_stride: 200` (every training target in a window; an epoch has more batches) against
the three seeds of the defaults above, the same 60 minutes of `fit` and early stopping.
""",
                    after=ml1m_probes_after,
                ),
                Section(
                    "Probe: HSTU on `rectools` at Adam 4e-3, 40 epochs",
                    "rectools",
                    [*HSTU_RECTOOLS_SEEDS, HSTU_RECTOOLS_RATE],
                    hstu_rectools_rate_table,
                    prose="""
The three seeds above ran at Adam 2e-3, HSTU's rate then. Two seeds at 4e-3, today's rate
([HSTU, defaults](#hstu-defaults-60-minutes)), for a fixed 40 epochs each: their hosts were
half as fast as the 2e-3 seeds', so they are set beside them epoch by epoch, by the best
validation NDCG@10 so far.
""",
                    after=hstu_rectools_rate_after,
                ),
                Section(
                    "HSTU on `hstu-paper`, the paper's 101 epochs",
                    "hstu-paper",
                    ["ml1m-hstu-paper-seed-0"],
                    ml1m_results,
                    after=hstu_paper_after,
                ),
                Section(
                    "BERT4Rec, defaults, three seeds, 60 minutes",
                    "sasrec-plus",
                    BERT4REC_SEED_STEMS,
                    ml1m_results,
                    prose="""
Defaults: Adam at 4e-3 after a 5-epoch linear warm-up, softmax without the sequence's other
items, 80/10/10 masking, positions from the newest item. A BERT4Rec run starts on a
plateau at chance, and without the warm-up its length depends on the seed (the ablation's
"no warm-up" row below stays there for ten minutes). Seeds 1 and 2 shared the CPU with test
runs, so they fit fewer epochs into the hour (the s/epoch column), and seed 2 was still
improving at its last epoch.
""",
                ),
                Section(
                    "SASRec ablation, 10 minutes each",
                    "sasrec-plus",
                    ["ml1m-ablation-sasrec-1", "ml1m-ablation-sasrec-2"],
                    ml1m_ablation,
                    prose="""
Each row switches one of the reference code's differences back (or the loss to BCE, or
turns on a speed lever) against the defaults; the last column compares every variant after
the same number of epochs. The first file's runs shared the CPU with test runs at low
priority (s/epoch about 15% above a run alone).
""",
                    after="""
Every reference-code change helps on its own, and all five together ("previous") are the
gap between the code before and after them. BCE trains an epoch in 9 s but learns far less
per minute; drawing its negative outside the history (the paper's) or from every item makes
no difference at this catalogue size. bfloat16 learns as much per epoch as float32, but an
epoch takes longer: this CPU's bfloat16 matmuls do not pay for the casts around them at
width 64. XLA is as fast per epoch as the stock ops and ends a little lower on validation.
In ten minutes the cosine decay has barely begun (its row measures its warm-up epoch more
than the decay), and its s/epoch is not the schedule's cost (the speed check below). None
of the four replaces a default.
""",
                ),
                Section(
                    "SASRec: the cosine decay's speed, side by side",
                    "sasrec-plus",
                    ["ml1m-sasrec-cosine-speed-check"],
                    ml1m_ablation,
                    prose="""
The defaults and the cosine decay for 1.5 minutes each, one after the other on an idle CPU:
the ablation's s/epoch for the cosine row came from the CPU, not the schedule.
""",
                ),
                Section(
                    "Probes: SASRec's learning rate and its decay, 30 minutes",
                    "sasrec-plus",
                    [
                        "ml1m-sasrec-seeds-0-1-2",
                        "ml1m-sasrec-lr-4e-3",
                        "ml1m-sasrec-lr-4e-3-seeds-1-2",
                        "ml1m-sasrec-lr-4e-3-cosine",
                        "ml1m-sasrec-lr-4e-3-cosine-seeds-1-2",
                    ],
                    ml1m_probes_table,
                    prose="""
Two probes for the time to a good SASRec on ML-1M, against the three 30-minute seeds of the
defaults at the same code (the first command; the table before the block-wise softmax):
Adam at 4e-3 instead of 2e-3, constant; and 4e-3 decayed to 0 by a cosine over 100 epochs
after one warm-up epoch. The options override the `ml1m` preset the benchmark trains with,
and every run keeps its early stopping (patience 20 on validation NDCG@10). An option becomes the preset only when its mean over seeds gains
more than the defaults' spread over seeds; under the table, each option's figures.
""",
                    after=ml1m_probes_after,
                ),
                Section(
                    "The full softmax a block of positions at a time: before and after",
                    "sasrec-plus",
                    [f"ml1m-{model}-softmax-before-after" for model in ("sasrec", "hstu", "bert4rec")],
                    softmax_before_after_table,
                    prose="""
The full softmax (every id model's default loss) now runs a block of positions at a time,
its gradient in the same pass, so that each block's logits stay in the CPU's cache
(`tfseqrec.losses.softmax_cross_entropy_sum`). To measure what that changed, each model
trained 1.5 minutes at the code before the change and at the code after it, one after the
other on the same host (SASRec twice in turn): in each model's rows the runs alternate,
before first. Short runs: s/epoch is the measure; the validation NDCG@10 after two epochs
shows the two learn alike.
""",
                    after=SOFTMAX_BEFORE_AFTER,
                ),
                Section(
                    "HSTU's attention mask as a bias: before and after",
                    "sasrec-plus",
                    ["ml1m-hstu-mask-bias-before-after"],
                    before_after_table("mask bias"),
                    prose="""
HSTU's pointwise attention zeroes the weights of the keys a query may not attend. The mask
was a product with the weights, computed in every layer; it is now a large negative bias
added to the logits before the SiLU (whose output is then exactly 0), computed once per
forward for the 8 layers, and the `1 / N` scales `V` instead of the weights
(`tfseqrec.layers.HSTULayer`): the `[batch, heads, n, n]` tensors pass through memory fewer
times, which on this CPU costs more than the products. HSTU trained 1.5 minutes at the code
before the change and at the code after it, one after the other on the same host, twice in
turn: the runs alternate, before first.
""",
                    after=mask_bias_before_after,
                ),
                Section(
                    "Probes: SASRec, a cosine decay over 60 epochs",
                    "sasrec-plus",
                    [*SASREC_DEFAULTS_STEMS, *SASREC_COSINE_STEMS],
                    ml1m_probes_table,
                    prose="""
Time to a good model, when the number of epochs can be chosen in advance: Adam at 4e-3
decayed to 0 by a cosine over 60 epochs after one warm-up epoch, three seeds, against the
three seeds of the defaults at the same code (the first two commands: Adam at 2e-3,
constant, until validation NDCG@10 stops improving or 30 minutes run out). The cosine runs
keep the 30-minute budget and early stopping; each ended at its 60th epoch.
""",
                    after=sasrec_cosine_after,
                ),
                Section(
                    "Probes: SASRec on the earlier windows of long histories, 30 minutes",
                    "sasrec-plus",
                    ["ml1m-sasrec-seeds-0-1-2", *SASREC_STRIDE_STEMS],
                    ml1m_probes_table,
                    prose="""
The `ml1m` preset trains each user on their newest 200 items, as SASRec's reference code
does: a history longer than that is never trained on before its last 200 items. On ML-1M,
26% of the users have longer histories, and 334,061 of the 981,491 next-item training targets
(34%) lie before the window (the training log says so). `window_stride: 200` also trains on
each long history's earlier windows, 200 items apart, so every training target is in one:
an epoch has 69 batches instead of 49. Validation and test are unchanged (the newest 200
items of each history). Against the three seeds of the defaults (the first command), the same
30 minutes of `fit` and early stopping; under the table, each option's figures.
""",
                    after=sasrec_stride_after,
                ),
                Section(
                    "Probes: SASRec on every window with the cosine decay",
                    "sasrec-plus",
                    [*SASREC_STRIDE_STEMS, *SASREC_STRIDE_COSINE_STEMS, *SASREC_PRESET_COSINE_STEMS],
                    ml1m_probes_table,
                    prose="""
The two options that each helped SASRec on ML-1M, together: `window_stride: 200` (the
earlier windows of long histories trained on too;
[above](#probes-sasrec-on-the-earlier-windows-of-long-histories-30-minutes)) and Adam at
4e-3 decayed to 0 by a cosine over 60 epochs after one warm-up epoch
([above](#probes-sasrec-a-cosine-decay-over-60-epochs)), then the same decay over 80
epochs, which the 30 minutes hold; against the stride's seeds at a constant 2e-3 (the first
two commands, stored before the block-wise softmax: their epochs are slower). The 80-epoch
recipe is SASRec's preset `ml1m-cosine`. Neither option is a default; both lowered SASRec
on ML-100K.
""",
                    after=sasrec_preset_cosine_after,
                ),
                Section(
                    "Probe: BERT4Rec on the earlier windows of long histories, 30 minutes",
                    "sasrec-plus",
                    ["ml1m-bert4rec-window-stride-200"],
                    ml1m_results,
                    cites=("peers-sasrec-plus", *BERT4REC_SEED_STEMS),
                    prose="""
BERT4Rec's Cloze windows, too, hold each user's newest 200 items by default. One seed with
`window_stride: 200` for the 30 minutes that tfseqrec's BERT4Rec had in the side-by-side run
on this protocol, whose defaults it is set against (BERT4Rec's headline seeds had 60).
""",
                    after=bert4rec_stride_after,
                ),
                Section(
                    "BERT4Rec ablation, 10 minutes each",
                    "sasrec-plus",
                    ["ml1m-ablation-bert4rec-1", "ml1m-ablation-bert4rec-2"],
                    ml1m_ablation,
                    prose="""
Seed 0, one change against the defaults a row (Adam at 2e-3 and 1e-3 are not in this
batch). The CPU was shared with short profiling and test runs during the first two
variants, so the last column compares every variant after the same number of epochs.
""",
                    after="""
Without the warm-up, and with always-[MASK] masking, seed 0 stays at chance (~0.02) for the
whole ten minutes. The fixed loss normaliser and the softmax without the sequence's other
items learn faster per epoch; bfloat16 and XLA cost more per epoch than float32 with the
stock ops on this CPU. Keras's default initialisers start faster than the reference's
N(0, 0.02) for BERT4Rec (the opposite of SASRec); over the whole hour (next table) the
lead is gone.
""",
                ),
                Section(
                    "BERT4Rec: Keras default initialisers over the hour",
                    "sasrec-plus",
                    ["ml1m-bert4rec-seed-0", "ml1m-bert4rec-keras-init-seed-0"],
                    best_so_far_table,
                    prose="""
Seed 0 with the default N(0, 0.02) initialisers and with Keras's defaults, 60 minutes each:
the best validation NDCG@10 so far at each epoch.
""",
                    after="""
A faster start, gone by epoch 60; the default stays N(0, 0.02).
""",
                ),
                Section(
                    "HSTU: its parts, 12 minutes each",
                    "sasrec-plus",
                    ["ml1m-ablation-hstu-1", "ml1m-ablation-hstu-2"],
                    ml1m_ablation,
                    anchor=HSTU_ANCHOR,
                    prose="""
One change against the defaults (pointwise SiLU attention, relative position bias, full
softmax) a row, seed 0. Twelve minutes are the start of HSTU's hour: these rows say how
each part changes the first epochs, not where it ends.
""",
                    after="""
Pointwise attention spends its first epochs near popularity where softmax attention learns
at once; the relative position bias is worth about 0.017 of validation NDCG@10 at the
common epoch; the library's sampled softmax (128 log-uniform negatives per position with
logQ correction; the paper's reference draws uniform ones) costs less an epoch but learns
less per epoch, which its cheaper epochs do not make up within the budget. On ML-1M's 3,416
items the full softmax is the better loss; the sampled
one is for catalogues too large to score whole.
""",
                ),
            ],
        ),
        "ML-100K: HSTU's time bias": (
            """
ML-1M's `ml-1m.txt` has no event times, so HSTU's relative time bias is measured on
ML-100K, whose `u.data` has them: the HSTU defaults for a fixed number of epochs, with and
without the 128 log buckets of the time gap.
""",
            [
                Section(
                    "HSTU with and without its time bias",
                    "ml100k",
                    ["ml100k-hstu-time-bias"],
                    time_bias_table,
                    after="""
No difference beyond the seed-to-seed spread on this small dataset (runs still improving at
epoch 60). The bias stays on by default because it is the paper's model;
`--num-time-buckets 0` is the variant.
""",
                ),
            ],
        ),
        "Defaults on other data": (
            """
The defaults were tuned on ML-1M. `benchmarks/defaults.py` trains every id model exactly as a
new user's `tfseqrec train --model NAME --data FILE` would, with nothing but a time budget
and a seed, on each dataset, and ranks the best epoch by validation NDCG@10 on the test
split beside popularity. The defaults should bring BERT4Rec and HSTU to 0.8x of SASRec's
NDCG@10 on each dataset at the same budget. "train minutes" is the wall time of
`training.train` (reading the data, tracing and validation included, so a little over the
budget).

BERT4Rec's rows on Scientific stored before one layer became its default on short
histories (every Scientific BERT4Rec row but `defaults-layers-seed-*` and the one-layer
probes) trained two layers: to repeat one at today's code, add `"num_layers": 2` to its
`--config`.
""",
            [
                Section(
                    "Every id model with its defaults, the same budget each",
                    "defaults",
                    ["defaults"],
                    defaults_tables,
                    after="""
BERT4Rec and HSTU take their batch size from the data (32 on ML-100K's 943 users, 128 on
Scientific's 8,317), and the length of the histories settles the batch widths and
BERT4Rec's learning rate and mask share (`docs/training.md`): Scientific's are short (5
items a training window), ML-100K's long (89). This is seed 0 before BERT4Rec's learning
rate followed the settled batch (4e-3 at ML-100K's batches of 32, 0.88x SASRec); the next
table has today's defaults over three seeds. On ML-100K the defaults are those of the run
before (next table), so SASRec's and HSTU's rows are that run's; BERT4Rec, rerun at the
code of then, repeated its row exactly (82 epochs, best 62, 0.1017). To repeat that row at
today's code, add `--config '{"learning_rate": 4e-3}'`. ML-1M, where the defaults were
tuned, is in the tables above.
""",
                ),
                Section(
                    "The defaults over seeds",
                    "defaults",
                    DEFAULTS_SEEDS,
                    defaults_seeds_tables,
                    prose="""
The table above is seed 0; seeds 1 and 2 are the same command with `--seed N` (UniSRec at
seed 1 only). BERT4Rec on ML-100K was rerun at each seed after its learning rate came to
follow the settled batch (`--datasets ml-100k --models bert4rec`), HSTU at seed 2 on its
own (`--models hstu`), BERT4Rec on Scientific at each seed after it came to train one
layer on short histories (`--datasets scientific --models bert4rec`), and HSTU on
Scientific at each seed after its rate became 4e-3 (`--datasets scientific --models hstu`;
[probes](#probes-hstu-at-adam-4e-3-on-scientific)); a later run of a seed replaces the rows
it reran.
`python benchmarks/defaults.py --report` with the stored runs in this order prints this
table. A ratio is taken over the seeds both models ran; the last column is the lowest of
the seeds' own ratios (each model against SASRec of the same seed).
""",
                    after=defaults_seeds_after,
                ),
                Section(
                    "UniSRec with ids beside SASRec, with the defaults",
                    "defaults",
                    ["defaults-unisrec"],
                    defaults_tables,
                    cites=("ml1m-ablation-sasrec-1",),
                    after="""
UniSRec with ids as its docs' command runs it (`use_id_embeddings`, the rest the defaults),
reading each dataset's item text: Scientific's `Scientific.item.json` attributes, ML-1M's
titles and genres (`movies.dat` under `ml-1m.txt`'s ids). On Scientific it is level with
SASRec (1.01x); on ML-1M it reaches 0.90x in 10 minutes, still improving when the budget ran
out (its best epoch is its last; an epoch takes about twice SASRec's). Its train minutes
include encoding the item text once. SASRec's Scientific row repeats the table above to the
digit; its ML-1M row is the defaults' 10-minute figure at this code (the 10-minute ablation
above, 0.1760, shared its CPU with test runs).
""",
                ),
                Section(
                    "Before: the defaults until the history-length rule",
                    "defaults",
                    ["defaults-previous"],
                    defaults_tables,
                    after="""
Batch widths 50 and 100 and BERT4Rec at 4e-3 and 0.2 on every dataset: BERT4Rec reached
0.70x SASRec on Scientific. Its validation NDCG@10 levelled off at about 0.067 after 4.6
minutes (SASRec's best: 0.088). To repeat a Scientific row at today's code, add
`"bucket_boundaries": [50, 100]` (and for BERT4Rec `"learning_rate": 4e-3, "mask_prob": 0.2`)
to its `--config`.
""",
                ),
                Section(
                    "Probe: batch widths 10 and 20 on ML-100K",
                    "defaults",
                    ["defaults-widths-ml100k"],
                    defaults_tables,
                    after="""
The first run of the new defaults gave widths 10 and 20 to every dataset. On ML-100K
BERT4Rec then sat near popularity's level for most of its 118 epochs (test NDCG@10 0.0492,
0.46x SASRec), and SASRec and HSTU ended lower too (0.1078 against 0.1152, 0.1184 against
0.1271), so the small widths apply to short histories only. One seed: whether the widths or
the draw of the batches is to blame is not settled. To repeat it at today's code,
add `"bucket_boundaries": [10, 20, 50, 100]` to `--config` (and for BERT4Rec
`"learning_rate": 4e-3`, the rate before it followed the settled batch).
""",
                ),
                Section(
                    "Probes: one change against the defaults, 4 minutes",
                    "defaults",
                    ["defaults-probes-4min", "defaults-probes-4min-2"],
                    defaults_tables,
                    prose="""
The runs that chose BERT4Rec's and HSTU's batch-size rule. Here "defaults" are those before
the rule, batches of 128 on every dataset, which the rule keeps on Amazon Scientific; a row
with options is one change against them. To repeat an ML-100K row of BERT4Rec or HSTU with
today's code, add `"batch_size": 128` to its `--config` (its "defaults" row: `--config
'{"batch_size": 128}'`).
""",
                    after="""
On ML-100K (943 users: 8 batches of 128 an epoch) BERT4Rec with batches of 128 sat at
popularity's level, with patience or without (its validation NDCG@10 rose only after epoch
65 of 78); with batches of 32 it reached 0.88x SASRec. HSTU gained too (0.59x to 0.72x);
SASRec did not (0.1152 to 0.1033), so it keeps 128. HSTU at Adam 4e-3 instead of 2e-3 gained
on both datasets (0.59x to 0.67x, 0.62x to 0.85x) but stayed at 2e-3 then: on ML-1M it ends
no higher, trained to convergence on a GPU ("On a GPU", below), and with the batch-size rule
HSTU already reached 0.90x on Scientific. It became HSTU's rate later, for the time it saves
on ML-1M's CPU hour, scaled with a smaller settled batch
([probes](#probes-hstu-at-adam-4e-3-on-scientific)). On Scientific, BERT4Rec gained from neither a Cloze mask
share of 0.6 (the BERT4Rec paper's choice for short sequences: 0.0521 against 0.0536) nor half
of the sequences masked at the last item only (0.0397; the second table, at the batch-size
rule's code, which keeps 128 there).
""",
                ),
                Section(
                    "Probes: BERT4Rec on Scientific, 5 minutes",
                    "defaults",
                    ["defaults-probes-5min"],
                    defaults_tables,
                    cites=("defaults-probes-4min",),
                    after="""
More dropout slows BERT4Rec on Scientific (0.0492 at 0.3, 0.0298 at 0.5, against the
defaults' 0.0536 in 4 minutes). Adam at 1e-3 instead of 4e-3 gives 0.0549 and was still
improving at the budget's end (best epoch 30 of 30); a longer run, and ML-1M, would decide
whether it is a better default (the aim is 0.8x SASRec's 0.0765 in 4 minutes).
""",
                ),
                Section(
                    "Probe: BERT4Rec on Scientific at Adam 1e-3, 10 minutes",
                    "defaults",
                    ["defaults-probes-10min"],
                    defaults_tables,
                    cites=("defaults-previous",),
                    after="""
At the defaults' budget, Adam 1e-3 brings BERT4Rec on Scientific to 0.0574, 0.75x SASRec's
0.0765 (the defaults' 4e-3: 0.0532, 0.70x), best at epoch 53 of 60: closer to 0.8x, not
there. ML-1M's BERT4Rec was tuned at 4e-3, so 1e-3 is not the default until a run there
shows it does not hurt.
""",
                ),
                Section(
                    "Probes: BERT4Rec on Scientific, the Cloze mask share, 5 minutes",
                    "defaults",
                    ["defaults-probes-5min-2"],
                    defaults_tables,
                    cites=("defaults-probes-4min",),
                    after="""
At 4e-3, a larger mask share alone is no lead in 5 minutes (0.0523 at 0.6, 0.0552 at 0.4;
the defaults 0.0536 in 4 minutes). They ran at the defaults before the next table's runs
chose new ones: to repeat them at today's code, add `"bucket_boundaries": [50, 100],
"learning_rate": 4e-3` to their `--config`.
""",
                ),
                Section(
                    "Probes: BERT4Rec on Scientific, batch widths, learning rate and mask share, 10 minutes",
                    "defaults",
                    ["defaults-probes-10min-2"],
                    defaults_tables,
                    after="""
Scientific's windows hold 5 items on average; with the batch widths [50, 100] every one was
padded to 50. Widths of 10 and 20 (94% of the windows fit in 10) take an epoch with its
validation from 10 to 4 CPU seconds, and BERT4Rec then converges inside the budget. With
them, Adam 1e-3 and a mask share of 0.4 give 0.0609 (2e-3: 0.0559; a share of 0.6: 0.0587),
against 0.0580 at the old 4e-3 and 0.2 with the same widths and 0.0532 with neither. These
runs chose today's defaults: batch widths 10, 20, 50, 100 for every model, and for BERT4Rec
Adam 1e-3 and a mask share of 0.4 where the mean training window is under 20 items
(`training.history_training`), 4e-3 and 0.2 elsewhere, as on ML-1M (where 1e-3 learns too
slowly in 10 minutes: a probe whose figures are not stored yet, listed at the end). To repeat a row at
today's code, give its `--config` the options it left at the defaults of then:
`"bucket_boundaries": [50, 100]`, `"learning_rate": 4e-3`, `"mask_prob": 0.2`.
""",
                ),
                Section(
                    "Probe: BERT4Rec's stuck seed on ML-100K without early stopping",
                    "defaults",
                    ["defaults-probes-patience"],
                    defaults_tables,
                    after="""
Seed 1 of BERT4Rec on ML-100K (0.0346 in the seeds table, early-stopped at epoch 38) with
early stopping off (`patience` 1000): it trains the whole budget, 185 epochs, and its
validation NDCG@10 never passes 0.038; the best epoch is still the 18th. Early stopping
did not cut it short: that seed does not leave the plateau near popularity in 10 minutes,
where seeds 0 and 2 leave it within ten epochs. The fix is in how BERT4Rec trains on small
data (learning rate, warm-up, batch size), not in when it stops. It ran at 4e-3, before the
rate followed the settled batch (next section): to repeat it at today's code, add
`"learning_rate": 4e-3` to its `--config`.
""",
                ),
                Section(
                    "Probes: BERT4Rec's learning rate at the batch ML-100K settles, three seeds",
                    "defaults",
                    [
                        "defaults-probes-rate-seed-0",
                        "defaults-probes-rate-seed-1",
                        "defaults-probes-rate-seed-2",
                    ],
                    defaults_tables,
                    after="""
ML-100K's 943 users settle BERT4Rec's batch to 32, but its learning rate stayed 4e-3, tuned
at batches of 128 on ML-1M. Adam at 2e-3, the square-root scaling rule for Adam (4e-3 times
sqrt(32/128)), gives 0.1124, 0.1081 and 0.1127 over seeds 0, 1 and 2: 0.96x SASRec's mean
(0.1159), every seed at 0.93x or more, and seed 1 leaves the plateau it stayed on at 4e-3
(0.0346). 1e-3, the linear rule, also leaves it but learns less in the budget (0.0964,
0.0918, 0.1049). These runs chose the rule BERT4Rec now follows: a learning rate the data
settle is scaled by the square root of the batch ratio when the data settle a batch under
128 (`training.batch_learning_rate`); ML-1M and Scientific keep batches of 128, so their
rates are unchanged.
""",
                ),
                Section(
                    "Probes: BERT4Rec on Scientific, a wider model and smaller batches",
                    "defaults",
                    [
                        "defaults-probes-scientific-seed-0",
                        "defaults-probes-scientific-seed-1",
                        "defaults-probes-scientific-seed-2",
                    ],
                    defaults_tables,
                    cites=("defaults", "defaults-seed-1", "defaults-seed-2"),
                    after="""
Two levers for BERT4Rec's 0.79x on Scientific, against its defaults' 0.0609, 0.0576 and
0.0608 over seeds 0, 1 and 2. A hidden width of 128 instead of 64 gains at seed 1 (0.0596)
and loses at seeds 0 and 2 (0.0574, 0.0584): mean 0.0585, below the defaults' 0.0598.
Batches of 64 instead of 128 (seed 1): 0.0574, no gain. Neither becomes a default.
""",
                ),
                Section(
                    "Probes: BERT4Rec on Scientific, one layer and more dropout",
                    "defaults",
                    [
                        "defaults-probes-layers-seed-0",
                        "defaults-probes-layers-seed-1",
                        "defaults-probes-layers-seed-2",
                    ],
                    defaults_tables,
                    cites=("defaults", "defaults-seed-1", "defaults-seed-2"),
                    after="""
Two more levers against the two-layer defaults' 0.0609, 0.0576 and 0.0608 (best validation
NDCG@10 0.0759, 0.0750, 0.0744). One layer instead of two: 0.0613, 0.0603 and 0.0606, mean
0.0607 (0.80x SASRec's mean), best validation 0.0763, 0.0766 and 0.0764, higher at every
seed, in less time (2.4-3.4 training minutes against 3.2-4.6 for two layers with more
dropout at the same code). With five items a window, one layer of attention
already joins every item to every other. Dropout 0.2 instead of 0.1: 0.0619, 0.0565 and
0.0602, mean 0.0595, no gain. One layer became BERT4Rec's default on short histories
(`training.history_training`; long histories keep two), so it changes nothing on ML-1M or
ML-100K. These ran at two layers' defaults: to repeat the dropout rows at today's code, add
`"num_layers": 2` to their `--config`.
""",
                ),
                Section(
                    "Probes: every id model on the earlier windows of long histories, ML-100K",
                    "defaults",
                    DEFAULTS_STRIDE_STEMS,
                    defaults_tables,
                    cites=tuple(DEFAULTS_SEEDS),
                    prose="""
On ML-1M, `window_stride: 200` (each long history's earlier windows trained on too) raised
SASRec above 0.19 test NDCG@10 at every seed
([above](#probes-sasrec-on-the-earlier-windows-of-long-histories-30-minutes)). Before it
can be a default it must hold elsewhere. On ML-100K, 14% of the next-item training targets
lie before the newest 200 items of their history (13,881 of 97,171, as the training log
counts them; 1,105 windows an epoch instead of 943, still batches of 32). Amazon
Scientific's longest training history is 76 items, so every history already fits one window
and the stride changes nothing there. Each seed is
`python benchmarks/defaults.py --datasets ml-100k --models sasrec,bert4rec,hstu --minutes 10
--seed N --config '{"window_stride": 200}'`, against the defaults' seeds above.
""",
                    after=defaults_stride_after,
                ),
                Section(
                    "Probes: SASRec's cosine decay over 60 epochs on ML-100K and Scientific",
                    "defaults",
                    DEFAULTS_SASREC_COSINE_STEMS,
                    defaults_tables,
                    cites=tuple(DEFAULTS_SEEDS),
                    prose="""
On ML-1M, Adam at 4e-3 decayed to 0 by a cosine over 60 epochs after one warm-up epoch gave
SASRec its defaults' test NDCG@10 in half the time
([above](#probes-sasrec-a-cosine-decay-over-60-epochs)). The same options on the two other
datasets, three seeds, each
`python benchmarks/defaults.py --datasets ml-100k,scientific --models sasrec --minutes 10
--seed N --config '{"learning_rate": 0.004, "learning_rate_schedule": "cosine", "epochs":
60, "warmup_epochs": 1}'`, against the defaults' seeds above (stored before the block-wise
softmax, which changes only the order of the loss's sums). Early stopping stays on.
""",
                    after=defaults_cosine_after,
                ),
                Section(
                    "Probes: HSTU at Adam 4e-3 on Scientific",
                    "defaults",
                    HSTU_RATE_DEFAULTS_STEMS,
                    defaults_tables,
                    cites=tuple(DEFAULTS_SEEDS[: DEFAULTS_SEEDS.index(HSTU_RATE_DEFAULTS_STEMS[0])]),
                    prose="""
On ML-1M, HSTU at Adam 4e-3 left popularity's level sooner than at 2e-3 and kept the lead
([above](#hstu-defaults-60-minutes)). The rate is left to the data: 4e-3 at batches of 128,
scaled by the square root of the batch ratio when the data settle a smaller batch, as
BERT4Rec's is. ML-100K's 943 users settle batches of 32, so HSTU trains there at 2e-3, as
it did before, and its ML-100K rows stand. Amazon Scientific keeps batches of 128 and so
takes 4e-3: three seeds, each
`python benchmarks/defaults.py --datasets scientific --models hstu --minutes 10 --seed N`
at the code with the new rate, against the defaults' seeds above at 2e-3.
""",
                    after=defaults_hstu_rate_after,
                ),
            ],
        ),
        "A peer library side by side": (
            """
`benchmarks/peers/side_by_side.py` trains tfseqrec's model and RecTools' model of the same
name on the identical split, one after the other on the same CPU with the same budget, and
ranks both with tfseqrec's evaluation ([peers/README.md](peers/README.md)). Each library
trains its own architecture with its own settings; "min to 98% of best" is the fit time
until its validation NDCG@10 first came within 2% of its own best.

The paragraph under each table is written from its stored record: each library's test
NDCG@10 / HR@10 and how far it got in the budget ("still improving" when its best epoch was
its last: the table then compares what each library reaches in the budget, not converged
quality), and tfseqrec's ratio to the published figure of the same model on that protocol.
On `hstu-paper` there is no validation split, so no "minutes to 98%": both libraries train
with the protocol's loss (sampled softmax over 128 uniform negatives per position; for
BERT4Rec over its masked positions) for its 101 epochs or the budget, whichever ends first,
and the last epoch is tested. The paper's HSTU-large figure is after all 101 epochs on a
GPU, so that row measures what 30 CPU minutes buy, not the paper's model. The reference
code's SASRec on that protocol is 50 wide with a cosine score, where tfseqrec's default is 64
wide with a dot product. tfseqrec's HSTU given 60 minutes on `sasrec-plus` is under
[HSTU, defaults, 60 minutes](#hstu-defaults-60-minutes).
""",
            peers_sections(),
        ),
        "Amazon Scientific: the text models": (
            """
`benchmarks/text.py` trains each row on the same split. SASRec and UniSRec share one
configuration (`ID_CONFIG`: length 50, width 64, 2 layers, dropout 0.5, batch 128, best
epoch by validation NDCG@10) and a budget of minutes; a row's overrides are in its name.
Recall@10 is HR@10 (one target a user). "cold" are the test cases whose target never occurs
in training (73 of 8,317), "warm" the others: an id model cannot rank a cold target, as it
never trained its embedding. Ratios are against the best SASRec row of the same table.
"train wall (s)" counts UniSRec's text encoding and the pre-training of pre-trained rows.
""",
            [
                Section(
                    "Every text model in one table",
                    "scientific",
                    [
                        "text-recformer-zero-shot-mean",
                        "text-recformer-zero-shot-full",
                        "text-unisrec-screen",
                        "text-seeds",
                        "text-recformer-cached",
                        "text-recformer-pretrained",
                        "text-unisrec",
                        "text-unisrec-pretrained",
                        "text-unisrec-384",
                        "text-unisrec-384-more",
                        "text-unisrec-transfer",
                    ],
                    lambda stems: text_rows(stems, EVERY_TEXT_MODEL),
                    after="""
Rows: `recformer-zero-shot` is all-MiniLM-L6-v2 mean-pooled with no training, four layers
cached (the fine-tuned rows' encoder), then all six over the whole history, the common
category dropped in both; `recformer` and `recformer-pretrained` are six layers (four
cached), mean pooling, a random target per user each epoch, 256 tokens, 10 epochs, the
second after one ML-1M pre-training epoch; `unisrec` is text only, width 64, 8 minutes, and
`unisrec-pretrained` the same after 10 minutes of pre-training on ML-1M; `unisrec-transfer`
never reads Scientific's interactions (trained on ML-1M, moved by text); `unisrec-id` is
text and ids, width 384, three seeds.
""",
                ),
                Section(
                    "UniSRec and SASRec over three seeds",
                    "scientific",
                    ["text-unisrec-screen", "text-unisrec-384", "text-unisrec-384-more", "text-seeds"],
                    scientific_seeds_table,
                    after="""
Mean against mean, UniSRec with text and ids is above SASRec on both metrics, with the cold
cases kept (every UniSRec seed is above every SASRec seed); the margin over 1.10x on
NDCG@10 is smaller than one seed's spread.
""",
                ),
                Section(
                    "UniSRec at width 64: text only, text and ids, pre-trained on ML-1M",
                    "scientific",
                    ["text-unisrec-screen", "text-unisrec-id", "text-unisrec", "text-unisrec-pretrained"],
                    lambda stems: text_rows(
                        stems, ["sasrec", "unisrec-id (text-unisrec-id)", "unisrec", "unisrec-pretrained"]
                    ),
                    after="""
Text and ids together are level with SASRec at this width; text alone is below on NDCG@10,
level on Recall@10 and still rising after 8 minutes. Pre-training on ML-1M's titles and
genres (the paper's sequence-item and sequence-sequence contrast) does not help the
laboratory catalogue: movie text is no substitute for the paper's neighbouring Amazon
domains, which this data lacks.
""",
                ),
                Section(
                    "UniSRec with ids: width",
                    "scientific",
                    ["text-unisrec-screen"],
                    text_rows,
                    prose="""
Three widths and a lower learning rate, 6 minutes each (`--unisrec-config` takes a list, a
row per entry).
""",
                    after="""
Width is the lever (the paper's models are 300 wide).
""",
                ),
                Section(
                    "UniSRec and SASRec at equal width",
                    "scientific",
                    ["text-unisrec-wide"],
                    text_rows,
                    after="""
SASRec gains nothing from the width, so the fair ratio is against SASRec's best configuration
(64 wide), as the other tables take it.
""",
                ),
                Section(
                    "UniSRec with ids: cold items by their text",
                    "scientific",
                    ["text-unisrec-wide", "text-unisrec-cold"],
                    text_rows,
                    prose="""
An item that never occurs in the training sequences has an id embedding trained only as a
negative. The first file's row is from before such items were scored by their text alone
(its cold cases score 0); the second file's rows read them by their text, with and without
`id_dropout` 0.2 (the share of item occurrences a training step reads by text alone).
""",
                    after="""
Reading cold items by their text lifts the cold cases from 0 and leaves the whole level;
`id_dropout` gives about the same whole with a weaker cold start, so its default stays 0.
With 73 cold cases the cold figures move by a few hits.
""",
                ),
                Section(
                    "UniSRec with ids, 384 wide: a second seed and a cosine decay",
                    "scientific",
                    ["text-unisrec-screen", "text-unisrec-384", "text-unisrec-384-more"],
                    lambda stems: text_rows(
                        stems,
                        [
                            "sasrec",
                            "unisrec-id [hidden_dim=384, num_heads=2]",
                            "unisrec-id [hidden_dim=384, num_heads=2, seed=1, epochs=8]",
                            "unisrec-id [hidden_dim=384, num_heads=2, learning_rate_schedule=cosine, epochs=8]",
                        ],
                    ),
                    after="""
384 is the text vectors' width. The cosine decay over the 8 epochs does not help.
""",
                ),
                Section(
                    "Recformer fine-tuned",
                    "scientific",
                    [
                        "text-unisrec-screen",
                        "text-recformer-cached",
                        "text-recformer-linear",
                        "text-recformer-pretrained",
                    ],
                    lambda stems: text_rows(
                        stems,
                        ["sasrec", "recformer", "recformer (text-recformer-linear)", "recformer-pretrained"],
                    ),
                    prose="""
All six all-MiniLM-L6-v2 layers with the lower four cached per item (`cached_layers`), mean
pooling (no `[CLS]` alignment), a target drawn at random from each user's sequence every
epoch, 256 tokens per history packed to the batch's longest, the category every item
carries dropped (`common_value_share`), learning rate 1e-4. The second row adds warm-up and
a linear decay over 20 planned epochs; the third starts from one epoch of `tfseqrec
pretrain --model recformer` on ML-1M (MLM and item-item contrast). The third file's
pre-training budget was checked at epoch ends when it ran, so its one epoch ran whole; the
budget now stops at the first step past it, and `--pretrain-minutes 60` repeats that epoch.
""",
                    after="""
Validation NDCG@10 plateaus near 0.068 from the 8th epoch whatever the learning rate does
(each file's `history` has the per-epoch rows). With 2 of 6 layers trained, 256 tokens
(about 9 items of a history) and no pre-training on neighbouring domains, Recformer stops
near 0.77x SASRec on this CPU; the paper's figure is a full-size Longformer pre-trained on
millions of Amazon interactions on GPUs. Pre-training on ML-1M gives a head start in the
first epochs and the same plateau, with a weaker cold start.
""",
                ),
                Section(
                    "Recformer zero-shot",
                    "scientific",
                    [
                        "text-recformer-zero-shot-mean",
                        "text-recformer-zero-shot-cached-kept",
                        "text-recformer-zero-shot-full",
                    ],
                    text_rows,
                    prose="""
all-MiniLM-L6-v2 mean-pooled, 6 layers, 256 tokens, no training and no alignment: rows with
four layers cached (each item read alone there) or all six over the whole history, the
common category dropped or every category kept (the file names say which; the fourth
corner, six layers with every category kept, is the Scientific zero-shot row of the
transfer table below).
""",
                    after="""
Zero-shot passes popularity without reading an interaction. The caching accounts for the
gap between the rows; dropping "Industrial & Scientific" changes little. After fine-tuning
the cached model is the one measured (the only one that fits two CPU hours).
""",
                ),
            ],
        ),
        "Transfer: datasets never trained on": (
            """
`benchmarks/transfer.py`: UniSRec text only trained once on ML-1M and moved to each
target's catalogue by its items' text (`UniSRec.for_catalogue`); Recformer zero-shot with no
training at all; popularity reads the target's training interactions (the floor a transfer
has to clear), `ml1m-popularity` ranks the target's items by ML-1M's counts of the same
title.
""",
            [
                Section(
                    "From ML-1M to ML-100K and Amazon Scientific",
                    "transfer",
                    ["transfer"],
                    transfer_tables,
                    after="""
ML-100K is the same domain in other years with other users, and nearly every test target
has a title ML-1M has; the transferred UniSRec still ranks below ML-100K's own popularity.
On Scientific, another domain, it is further below; Recformer zero-shot passes popularity
there and not on ML-100K. The paper's transfer is from five Amazon domains to a sixth,
fine-tuned on the target.
""",
                ),
                Section(
                    "ML-100K again, with ML-1M's popularity moved by title",
                    "transfer",
                    ["transfer-ml100k"],
                    transfer_tables,
                    after="""
What was popular in ML-1M's years is a poor guide to ML-100K's, and the transferred UniSRec
is well above it: it carries over what follows what, and falls short of the target's own
popularity because the popularity of the target's years is what it cannot know without the
target's interactions.
""",
                ),
            ],
        ),
        "Scale": (
            """
`benchmarks/scale.py` measures each stage on seeded synthetic logs of 10^5, 10^6 and 10^7
events over 10^4, 10^5 and 10^6 items, each stage in a fresh process so that its peak memory
is its own: reading and preparing the splits; two SASRec epochs (hidden 32, length 50,
sampled softmax with 256 log-uniform negatives and logQ correction); full-catalogue
evaluation of 10,000 test users; export, and `serving_default` at batch 1 through the
session loader TF Serving uses.
""",
            [
                Section(
                    "Every stage at three sizes",
                    "synthetic",
                    ["scale"],
                    scale_tables,
                    after="""
From 100,000 items with a sampled loss the library trains with `RowSparseAdam` (only the
rows a batch read move), a different optimizer from dense Adam (`--no-sparse-item-updates`).
Evaluation ranks the catalogue in blocks of 4,096 items and counts, never keeps, each
block's scores, so its memory does not grow with the catalogue; the matmul bound is
`2 * hidden * items` FLOP a user at the rate a large fp32 matmul reaches on the run's host
(an assumed 130 GFLOP/s, marked `*`, for runs stored before hosts were measured).

Stale: the export (s) and SavedModel (MiB) columns were measured when an export traced each
signature twice (`tf.saved_model.save` traced the module's `tf.function`s again); exports now
trace each once (CHANGELOG), so a rerun of the command above gives shorter exports and
SavedModels no larger. The serving latencies run the same graphs and still hold.
""",
                ),
            ],
        ),
        "Serving": (
            """
`benchmarks/serving.py` exports a model (by default a SASRec trained for one epoch on ML-1M:
latency does not depend on how well the weights are trained) and times `serving_default`
through `tfseqrec.serving.SavedModelPredictor`, a TF1 session over the `serve` tag that runs
the signature by tensor name as the C++ server does, on real ML-1M histories of 200 items:
single requests one after another at batch 1 (p50 / p99 latency), and batches of 256 users
(users per second). FLOPs per request are an analytic count of the signature's matmuls (the
transformer over the window, the output head, scores over the catalogue at the last
position); GFLOP/s is that times the requests served per second, against the rate a large
fp32 matmul reaches on the run's host (an assumed 130 GFLOP/s, marked `*`, for runs stored
before hosts were measured). Client-side proto encoding and the network are not
included: a real server adds them.
""",
            [
                Section(
                    "SASRec's export: batch 1 and batch 256",
                    "serving",
                    ["serving"],
                    serving_tables,
                ),
            ],
        ),
        "Cloze masking": (
            """
`benchmarks/masking.py` times BERT4Rec's Cloze masking (`ClozeMasking`, drawn fresh for every
batch) in a compiled `tf.function`, with XLA, and as a `tf.data` map over the whole input
pipeline (`cloze_dataset`: slicing, shuffling, batching, masking), against the per-item Python
loop of the widely copied PyTorch `BertTrainDataset` followed by collating the batch, as a
`DataLoader` does. The second table is the share of a `tfseqrec.models.BERT4Rec` training
step at ML-1M's size that masking takes when it runs inside the step.
""",
            [
                Section(
                    "Sequences per second, and the share of a training step",
                    "masking",
                    ["masking"],
                    masking_tables,
                ),
            ],
        ),
        "HSTU's training step on the CPU": (
            """
`benchmarks/hstu_step.py` times one training step of `tfseqrec.models.HSTU` at ML-1M's size
(width 50, 8 layers, 2 heads, 3,416 items, the full softmax) on batches of 128 windows at
each width the training batches of long histories have (50, 100 and 200), in float32 as
`tfseqrec train` runs it, with `--xla` and with `--mixed-precision` (bfloat16 activations on
a CPU), and its backbone's forward and backward alone. Where the time of HSTU's epochs goes,
and whether either option shortens them.
""",
            [
                Section(
                    "A training step by width, and its FLOPs",
                    "hstu-step",
                    ["hstu-step"],
                    hstu_step_tables,
                    after=hstu_step_after,
                ),
            ],
        ),
        "On a GPU: Keras 3's JAX backend": (
            """
`benchmarks/gpu.py` trains SASRec and HSTU on one NVIDIA H200 with Keras 3's JAX backend and
no TensorFlow: the GPU machine this project borrows has no TensorFlow GPU build, and the
models, losses, metrics and NumPy batches (`tfseqrec.data.numpy_pipeline`) are written with
`keras.ops`, so they run there as they are. Each model has its `ml1m` preset, as the CPU
runs above, and trains until early stopping (patience 20 on validation NDCG@10, every user
validated after every epoch) or its budget of `fit` minutes (1.2 to 3.3; none was reached).
The minutes include the first epoch, which compiles (13 to 25 s), and every validation.
The CPU rows above took 23 s (SASRec) and 38 s (HSTU) an epoch on 2 cores, against 0.1-0.14
and 0.22 s here. The last line is BERT4Rec's in-step Cloze masking on the GPU: its cost is
below what the timing resolves (the step with masking inside and the step on a batch masked
beforehand take the same 10.4 ms).
""",
            [
                Section(
                    "SASRec's ML-1M, trained to convergence on an H200",
                    "sasrec-plus",
                    ["gpu-sasrec-plus"],
                    gpu_tables,
                    anchor=f"{protocols.SASREC_PLUS}: SASRec {lab('sasrec-plus/sasrec')} "
                    "with 3,000 negatives, its best reached in 540 s on a GPU; no HSTU figure "
                    "(HSTU's rows compare with this library's SASRec on the same split)",
                    after="""
HSTU at Adam 4e-3 (probed on ML-100K and Scientific under "Defaults on other data") ends where 2e-3 does on ML-1M: 0.2103
against 0.2125 and 0.2058 (seeds 0 and 1) best validation NDCG@10.
""",
                ),
                Section(
                    "The raw ML-1M ratings, trained to convergence on an H200",
                    "rectools",
                    ["gpu-rectools"],
                    gpu_tables,
                    after=f"""
Trained to convergence, HSTU with the `ml1m` preset reaches 0.1899 / 0.3247 on this protocol
(0.1939 / 0.3326 at Adam 4e-3): above RecTools' own HSTU on the same ratings without
timestamps ({fig("rectools/hstu")}, relative position attention only), and level with its HSTU
that also reads the ratings' timestamps ({fig("rectools/hstu-time")}), which this file does not carry.
These RecTools figures are from its HSTU tutorial's ablation on `ratings.dat`; an HSTU-large
figure of {protocols.quoted("rectools/hstu-large-quoted")} / {protocols.quoted("rectools/hstu-large-quoted-hr")} quoted for RecTools is not in the versions of its notebooks
available to us (their HSTU-large, {protocols.quoted("hstu-paper-file/rectools-hstu-large")} / {protocols.quoted("hstu-paper-file/rectools-hstu-large-hr")}, is on the HSTU paper's preprocessed file).
""",
                ),
            ],
        ),
    }


# The rows of "Every text model in one table", in order (names as ``text.py --report --rows`` takes them).
EVERY_TEXT_MODEL = [
    "popularity",
    "sasrec",
    "sasrec [seed=1]",
    "sasrec [seed=2]",
    "recformer-zero-shot",
    "recformer-zero-shot (text-recformer-zero-shot-full)",
    "recformer",
    "recformer-pretrained",
    "unisrec",
    "unisrec-pretrained",
    "unisrec-transfer",
    "unisrec-id [hidden_dim=384, num_heads=2]",
    "unisrec-id [hidden_dim=384, num_heads=2, seed=1, epochs=8]",
    "unisrec-id [hidden_dim=384, num_heads=2, seed=2, epochs=8]",
]

# Measured figures with no stored JSON: not shown until a run stores them (what, command).
NOT_STORED = [
    (
        "HSTU on ML-1M, seeds 1 and 2",
        "python benchmarks/ml1m.py --model hstu --minutes 60 --seeds 1 2 --json "
        "benchmarks/results/ml1m-hstu-seeds-1-2.json",
    ),
    (
        "BERT4Rec's learning rates in 10 minutes (Adam at 1e-3, 2e-3, 4e-3) and the warm-up on seeds 1 and 2",
        'python benchmarks/ml1m.py --model bert4rec --minutes 10 --seeds 0 1 2 --ablation "default,Adam at '
        '2e-3,Adam at 1e-3 (previous),no warm-up (previous)" --json benchmarks/results/ml1m-bert4rec-lr.json',
    ),
    (
        "Serving: p50 / p99 latency at batch 1 and users/s at batch 256 of SASRec's export",
        "python benchmarks/serving.py --json benchmarks/results/serving.json",
    ),
    (
        "Cloze masking: sequences/s of `ClozeMasking` against a per-item loop, and its share of a BERT4Rec step",
        "python benchmarks/masking.py --json benchmarks/results/masking.json",
    ),
    (
        "Ranking alone: users/s of the block ranking over 10^6 items against the matmul bound",
        "python benchmarks/ranking.py --json benchmarks/results/ranking.json",
    ),
    (
        "Every row of `make bench-text` in one run, Recformer with 2 of 6 layers and `[CLS]` alignment "
        "(the first Recformer configuration)",
        "python benchmarks/text.py --minutes 20 --recformer-minutes 80 --recformer-config "
        '\'{"epochs": 6, "stage2_epochs": 2, "learning_rate": 1e-4, "examples_per_user": 2}\' '
        "--json benchmarks/results/text-all.json",
    ),
    (
        "Every id model with its defaults on ML-100K, ML-1M and Amazon Scientific, the same budget "
        "each, NDCG@10 against SASRec's on each",
        "python benchmarks/defaults.py --minutes 10 --json benchmarks/results/defaults.json",
    ),
    (
        "HSTU's learning rate and parts on a GPU, in the PyTorch transcription (not the library)",
        'python benchmarks/probes/hstu_torch.py \'{"2e-3": {"lr": 0.002, "epochs": 80}}\'',
    ),
]

# Commands whose tables appear once a run stores their JSON (never measured yet): (what, command).
NOT_RUN = []

INTRO = """\
# Benchmarks

<!-- Written by benchmarks/tables.py from benchmarks/results/*.json: edit the script, then run it. -->

Every table here is printed from a stored run in [`results/`](results/) by
`python benchmarks/tables.py`, and `tests/test_benchmark_tables.py` checks that this file
equals its output, so a table cannot drift from its result. Each JSON keeps its run's
provenance (the commit of the library code, start and end, environment); what shared the CPU
during a run is in [`results/README.md`](results/README.md). Each table says its protocol,
the published figure it may be set beside (or "no anchor"), the command that wrote its JSON
(rerun it, then `python benchmarks/tables.py`), and links its JSON. Runs are on a 2-core CPU
unless a table says otherwise.

## Protocols

| protocol | data | split | ranking | seen items | comparable with |
|---|---|---|---|---|---|
"""


def protocols_table():
    return "\n".join(
        f"| `{name}` | {p.data} | {p.split} | {p.ranking} | {p.seen} | {p.anchor} |"
        for name, p in PROTOCOLS.items()
    )


def json_stem(cmd):
    """The stem of the JSON a command writes (``--json benchmarks/results/STEM.json``), or None."""
    words = shlex.split(cmd)
    if "--json" not in words:
        return None
    return os.path.splitext(os.path.basename(words[words.index("--json") + 1]))[0]


def not_stored():
    """The "Not stored yet" part: the commands of ``NOT_STORED`` whose JSON is absent, and ``NOT_RUN``'s."""
    lines = [
        "## Not stored yet",
        "",
        "Measured once, but no JSON holds the figures, so no table shows them; each command "
        "writes the JSON that will.",
        "",
    ]
    for what, cmd in NOT_STORED:
        stem = json_stem(cmd)
        if stem is not None and is_stored(stem):
            continue
        lines += [f"- {what}:", "", "  ```bash", f"  {cmd}", "  ```", ""]
    lines += ["Not run yet; each command writes the JSON of its table:", ""]
    for what, cmd in NOT_RUN:
        lines += [f"- {what}:", "", "  ```bash", f"  {cmd}", "  ```", ""]
    return "\n".join(lines).rstrip("\n")


def benchmarks_readme():
    """The text of benchmarks/README.md; an error if a stored JSON appears in no section."""
    parts = [INTRO + protocols_table()]
    used = set()
    pending = {json_stem(cmd) for _, cmd in NOT_STORED}
    for heading, (intro, items) in sections().items():
        if unbacked_figures(intro):
            raise ValueError(
                f"the intro of {heading!r} quotes {unbacked_figures(intro)}: quote a published figure"
            )
        shown = []
        for section in items:
            missing = [s for s in section.stems if not is_stored(s)]
            unlisted = [s for s in missing if s not in pending]
            if unlisted:
                raise ValueError(
                    f"benchmarks/results/{unlisted[0]}.json is missing (section {section.heading!r}): "
                    "restore it, or list the command that writes it in NOT_STORED"
                )
            if not missing:
                shown.append(section.render())
                used.update(section.stems)
        if shown:
            parts += [f"## {heading}\n\n{intro.strip()}", *shown]
    parts.append(not_stored())
    used.update(stem for *_, pairs in HEADLINES for stem in headline_stems(pairs))
    stored = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(RESULTS, "*.json"))}
    if stored - used:
        raise ValueError(f"stored runs no table shows: {sorted(stored - used)}; add them to a section")
    return "\n\n".join(parts) + "\n"


# === README.md's results table ===


def ml1m_headline(pairs):
    """Mean NDCG@10, HR@10 (seen filtered), training minutes and count of the runs ``(file, variant)``
    names (``None``: the file's runs without a variant)."""
    runs = [r for stem, variant in pairs for r in load(stem) if r.get("variant") == variant]
    full = [ml1m.filtered(r) for r in runs]
    return (
        np.mean([f["ndcg@10"] for f in full]),
        np.mean([f["hr@10"] for f in full]),
        np.mean([r["train_wall_seconds"] for r in runs]) / 60,
        len(runs),
    )


def text_headline(pairs):
    """Mean NDCG@10, Recall@10, wall minutes and count of the stored text rows ``(file, row)`` names."""
    rows = seed_rows(pairs)
    seconds = [load(stem)["seconds"].get(row, 0.0) for stem, row in pairs]
    return (
        np.mean([r["all"]["ndcg@10"] for r in rows]),
        np.mean([r["all"]["hr@10"] for r in rows]),
        np.mean(seconds) / 60,
        len(rows),
    )


SASREC_PLUS_SASREC = (
    f"SASRec+ (RecSys 2023): {fig('sasrec-plus/sasrec')} with 3,000 negatives, "
    f"{fig('sasrec-plus/sasrec-softmax')} full softmax"
)
SCIENTIFIC_ANCHOR = "no anchor (ratios to SASRec on the same split)"

# (model, dataset, the published figure the row is comparable with, figures, (file, run) pairs):
# a row of the front page's table, the mean of its runs.
HEADLINES = [
    (
        "SASRec",
        "ML-1M",
        SASREC_PLUS_SASREC,
        ml1m_headline,
        [(stem, None) for stem in SASREC_DEFAULTS_STEMS],
    ),
    (
        "SASRec, preset `ml1m-cosine` (every window, Adam 4e-3 decayed by a cosine over 80 epochs)",
        "ML-1M",
        SASREC_PLUS_SASREC,
        ml1m_headline,
        [(stem, None) for stem in SASREC_PRESET_COSINE_STEMS],
    ),
    (
        "SASRec, 10-minute budget",
        "ML-1M",
        SASREC_PLUS_SASREC,
        ml1m_headline,
        [("ml1m-ablation-sasrec-1", "default")],
    ),
    (
        "BERT4Rec",
        "ML-1M",
        f"SASRec+ (RecSys 2023), BERT4Rec: {fig('sasrec-plus/bert4rec')}",
        ml1m_headline,
        [("ml1m-bert4rec-seed-0", None), ("ml1m-bert4rec-seeds-1-2", None)],
    ),
    (
        "HSTU",
        "ML-1M",
        f"none on this protocol (the paper's {fig('hstu-paper/hstu')} is on `hstu-paper`, RecTools' "
        f"{fig('rectools/hstu')} on `rectools`)",
        ml1m_headline,
        [(stem, None) for stem in HSTU_DEFAULTS_STEMS],
    ),
    (
        "HSTU at Adam 2e-3, its rate before 4e-3",
        "ML-1M",
        f"RecTools' HSTU tutorial: {fig('rectools/hstu')} without timestamps, {fig('rectools/hstu-time')} with them",
        ml1m_headline,
        [
            ("ml1m-hstu-rectools-seed-0", None),
            ("ml1m-hstu-rectools-seed-1", None),
            ("ml1m-hstu-rectools-seed-2", None),
        ],
    ),
    (
        "HSTU, the paper's 101 epochs, at Adam 2e-3, its rate before 4e-3",
        "ML-1M",
        f"the HSTU paper, HSTU-large: {fig('hstu-paper/hstu')}",
        ml1m_headline,
        [("ml1m-hstu-paper-seed-0", None)],
    ),
    (
        "popularity",
        "Amazon Scientific",
        "no anchor",
        text_headline,
        [("text-recformer-zero-shot-mean", "popularity")],
    ),
    ("SASRec", "Amazon Scientific", SCIENTIFIC_ANCHOR, text_headline, SCIENTIFIC_SEEDS["SASRec (width 64)"]),
    (
        "UniSRec text + id, 384 wide",
        "Amazon Scientific",
        SCIENTIFIC_ANCHOR,
        text_headline,
        SCIENTIFIC_SEEDS["UniSRec text + id (384 wide)"],
    ),
    (
        "Recformer, fine-tuned",
        "Amazon Scientific",
        SCIENTIFIC_ANCHOR,
        text_headline,
        [("text-recformer-cached", "recformer")],
    ),
    (
        "Recformer, zero-shot (no training)",
        "Amazon Scientific",
        SCIENTIFIC_ANCHOR,
        text_headline,
        [("text-recformer-zero-shot-mean", "recformer-zero-shot")],
    ),
]


def headline_stems(pairs):
    return list(dict.fromkeys(stem for stem, _ in pairs))


def headline_row(model, dataset, protocol, anchor, ndcg, hr, minutes, runs, stems):
    """One row of the front page's table: means over ``runs`` seeds, minutes to the nearest one, and
    the published NDCG@10 / HR@10 it is comparable with (``anchor``)."""
    seeds = f" (mean of {runs} seeds)" if runs > 1 else ""
    links = ", ".join(f"[{s}](benchmarks/results/{s}.json)" for s in stems)
    return (
        f"| {model}{seeds} | {dataset} | [`{protocol}`](benchmarks/README.md#protocols) | {ndcg:.4f} | "
        f"{hr:.4f} | {anchor} | {minutes:.0f} | {links} |"
    )


def results_table():
    """The lines between README.md's markers (without them)."""
    lines = [
        "| model | dataset | protocol | NDCG@10 | HR@10 | comparable with (NDCG@10 / HR@10) | "
        "CPU minutes to train | stored result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model, dataset, anchor, figures, pairs in HEADLINES:
        stems = headline_stems(pairs)
        (protocol,) = {protocol_of(stem) for stem in stems}
        lines.append(headline_row(model, dataset, protocol, anchor, *figures(pairs), stems))
    return "\n".join(lines)


def _peer_cell(side, fixed_epochs):
    """A library's test NDCG@10 / HR@10, then its minutes to 98% of its best validation NDCG@10,
    or without a validation split the epochs it finished and its minutes."""
    test = _figures(side["test"])
    if side["best_val_ndcg@10"] is None:
        return f"{test} ({side['epochs']} of {fixed_epochs} epochs, {side['minutes_to_best']:.0f} min)"
    return f"{test} ({side['minutes_to_98pct_of_best']:.1f} min)"


def peers_summary():
    """Markdown: a row a model and protocol of the stored side-by-side records, with the anchor."""
    records = {protocol_of(stem): load(stem) for stem in peers_stems()}
    lines = [
        "| model | protocol | tfseqrec | RecTools 0.19 | published on the protocol |",
        "|---|---|---|---|---|",
    ]
    for protocol in [p for p in protocols.PROTOCOLS if p in records]:
        record = records[protocol]
        fixed = record["protocol"]["training"].get("epochs")
        for model in [m for m in kinds.KINDS if m in record["models"]]:
            sides = {side["library"] == "tfseqrec": side for side in record["models"][model]}
            key = f"{protocol}/{model}"
            anchor = "none"
            if key in protocols.PUBLISHED:
                anchor = f"{fig(key)}, {protocols.published(key).source}"
            cells = [_peer_cell(sides[mine], fixed) if mine in sides else "not run" for mine in (True, False)]
            lines.append(
                f"| {kinds.get(model).model_class} | `{protocol}` | {cells[0]} | {cells[1]} | {anchor} |"
            )
    return "\n".join(lines)


def peers_hosts(records):
    """A sentence on the side-by-side rows' hosts: the two libraries of a row share one, rows
    run on other days may not (hosts' fp32 matmul rates differ up to twofold). The measured hosts
    are named a model at a time: "for HSTU on `a` and `b` (216 and 219)"."""
    measured = [
        (kinds.get(model).model_class, record["protocol"]["name"], run["host_matmul_gflops"])
        for record in records
        for model, run in record["model_runs"].items()
        if "host_matmul_gflops" in run
    ]
    if not measured:
        return "Both libraries of a row ran on one host; rows ran on other days, on hosts not measured."
    by_model = {}
    for name, protocol, rate in measured:
        by_model.setdefault(name, []).append((protocol, rate))
    named = _listed(
        [
            f"for {name} on {_listed([f'`{protocol}`' for protocol, _ in rows])} "
            f"({_listed([f'{rate:.0f}' for _, rate in rows])})"
            for name, rows in by_model.items()
        ]
    )
    return (
        "Both libraries of a row ran on one host, so their minutes compare; rows ran on other days, on "
        f"hosts whose fp32 matmul rate (GFLOP/s) was measured {named}, not for the others, so minutes "
        "across rows do not."
    )


def results_notes():
    """The front page's notes under the results table, every figure read from a stored run."""
    sasrec_minutes = [r["minutes_to_98pct_of_best"] for r in ml1m_runs(SASREC_DEFAULTS_STEMS)]
    preset_runs = ml1m_runs(SASREC_PRESET_COSINE_STEMS)
    preset_minutes = [r["minutes_to_98pct_of_best"] for r in preset_runs]
    preset_wall = [r["train_wall_seconds"] / 60 for r in preset_runs]
    cosine_runs = ml1m_runs(SASREC_COSINE_STEMS)
    cosine_minutes = [r["minutes_to_98pct_of_best"] for r in cosine_runs]
    cosine_ndcg = np.mean([ml1m.filtered(r)["ndcg@10"] for r in cosine_runs])
    defaults_ndcg = np.mean([ml1m.filtered(r)["ndcg@10"] for r in ml1m_runs(SASREC_DEFAULTS_STEMS)])
    (hstu_paper,) = load("ml1m-hstu-paper-seed-0")
    (hstu,) = ml1m_runs(HSTU_DEFAULTS_STEMS)
    (hstu_before,) = ml1m_runs([HSTU_RATE_BEFORE])
    peers = [load(stem) for stem in peers_stems()]
    seeds = defaults.seed_ratios([load(stem) for stem in DEFAULTS_SEEDS])
    unisrec = load("defaults-unisrec")["rows"]

    def gpu_test(stem, model):
        return _figures(gpu_preset_run(stem, model)["test"])

    unisrec_ratio = {
        r["dataset"]: ratio for r, ratio in zip(unisrec, defaults.ratios(unisrec)) if r["model"] == "unisrec"
    }
    paper = protocols.published("hstu-paper/hstu")
    minutes = {record["minutes"] for record in peers}
    bullets = [
        "**ML-1M, protocol `sasrec-plus`** (SASRec's 5-core `ml-1m.txt`, leave-one-out with a "
        "validation item, full ranking, the whole history filtered), the protocol of SASRec+ (Klenitskiy "
        "& Vasilev, RecSys 2023), whose figures the column 'comparable with' gives. SASRec's three 30-minute seeds "
        f"came within 98% of their best validation NDCG@10 after {min(sasrec_minutes):.1f}-"
        f"{max(sasrec_minutes):.1f} minutes. With the preset `ml1m-cosine` (the row below them: each long "
        "history trained on every 200-item window, not only its newest, and Adam 4e-3 decayed to 0 by a cosine "
        f"over 80 epochs), after {min(preset_minutes):.1f}-{max(preset_minutes):.1f} minutes, the whole run in "
        f"{min(preset_wall):.0f}-{max(preset_wall):.0f} "
        "([probes](benchmarks/README.md#probes-sasrec-on-every-window-with-the-cosine-decay)); the same "
        f"decay over 60 epochs alone, after {min(cosine_minutes):.1f}-{max(cosine_minutes):.1f} minutes, to "
        f"the defaults' test NDCG@10 ({cosine_ndcg:.4f} against {defaults_ndcg:.4f}; "
        "[probes](benchmarks/README.md#probes-sasrec-a-cosine-decay-over-60-epochs)). Neither is the "
        "default: on ML-100K each change lowered SASRec's test NDCG@10 "
        "([windows](benchmarks/README.md#probes-every-id-model-on-the-earlier-windows-of-long-histories-ml-100k), "
        "[decay](benchmarks/README.md#probes-sasrecs-cosine-decay-over-60-epochs-on-ml-100k-and-scientific)). "
        "HSTU's hour of defaults came within 98% of its best validation NDCG@10 after "
        f"{hstu['minutes_to_98pct_of_best']:.1f} minutes; at Adam 4e-3, its rate now, it passed 98% of the "
        f"best an hour at 2e-3 reaches after {minutes_to(hstu, 0.98 * hstu_before['best_val_ndcg@10']):.1f} "
        f"minutes, against {hstu_before['minutes_to_98pct_of_best']:.1f} at 2e-3 "
        "([HSTU](benchmarks/README.md#hstu-defaults-60-minutes)). No HSTU figure is published on "
        "this protocol; `benchmarks/ml1m.py --protocol NAME` runs each protocol "
        "([protocols](benchmarks/README.md#protocols)).",
        "**ML-1M, protocol `hstu-paper`** (the HSTU paper's: the raw ratings, no validation item, 128 "
        "uniform negatives per position, 101 epochs, the input window filtered): HSTU with its defaults "
        "(the reference's HSTU-large) reaches "
        f"{ml1m.filtered(hstu_paper)['ndcg@10'] / paper.ndcg:.2f}x the paper's NDCG@10. The likeliest "
        "cause: the paper's HSTU also reads the ratings' timestamps (a relative time bias), which the "
        "shared file lacks; RecTools' HSTU tutorial loses about as much without them on the same ratings "
        f"({TIME_BIAS_RATIO:.2f}x).",
        "**On one GPU** (an H200, Keras 3's JAX backend) the models train to convergence in about a "
        f"minute of `fit`: SASRec {gpu_test('gpu-sasrec-plus', 'sasrec')} and HSTU "
        f"{gpu_test('gpu-sasrec-plus', 'hstu')} on `sasrec-plus`, HSTU {gpu_test('gpu-rectools', 'hstu')} "
        "on `rectools` ([on a GPU](benchmarks/README.md#on-a-gpu-keras-3s-jax-backend)).",
        "**Defaults on other data** (tuned on ML-1M, run as a new user runs them, 10 CPU minutes each): "
        "over three seeds, HSTU reaches "
        f"{seeds[('ml-100k', 'hstu')][1]:.2f}x SASRec's test NDCG@10 on ML-100K and "
        f"{seeds[('scientific', 'hstu')][1]:.2f}x on Amazon Scientific; BERT4Rec "
        f"{seeds[('ml-100k', 'bert4rec')][1]:.2f}x on ML-100K (every seed "
        f"{seeds[('ml-100k', 'bert4rec')][2]:.2f}x or more, its learning rate scaled with the batch the "
        f"data settle) and {seeds[('scientific', 'bert4rec')][1]:.2f}x on Scientific (one layer on its "
        "short histories), against the 0.8x the defaults aim for. UniSRec with ids, reading the item "
        f"text, reaches {unisrec_ratio['scientific']:.2f}x SASRec on Scientific and "
        f"{unisrec_ratio['ml-1m']:.2f}x on ML-1M with its titles and genres ([defaults on other "
        "data](benchmarks/README.md#defaults-on-other-data)).",
    ]
    return "\n".join(
        [
            "What the rows compare with, and what else is measured:",
            "",
            *(
                textwrap.fill(
                    b,
                    width=92,
                    initial_indent="- ",
                    subsequent_indent="  ",
                    break_on_hyphens=False,
                    break_long_words=False,
                )
                for b in bullets
            ),
            "",
            textwrap.fill(
                f"**Beside RecTools 0.19**: the same split, {_listed([f'{m:g}' for m in sorted(minutes)])} CPU "
                "minutes each, one after the other, both ranked by tfseqrec's evaluation, each library its own "
                "model and defaults ([side by side](benchmarks/README.md#a-peer-library-side-by-side)). Test "
                "NDCG@10 / HR@10, and in brackets the minutes to 98% of each one's best validation NDCG@10 (on "
                "`hstu-paper`, which has no validation split, the epochs each finished and its minutes). "
                "RecTools' HSTU figure on `rectools` is without the ratings' timestamps, which the file here "
                f"lacks ({fig('rectools/hstu-time')} with them). {peers_hosts(peers)}",
                width=92,
                break_on_hyphens=False,
            ),
            "",
            peers_summary(),
        ]
    )


def front_readme(current):
    """``current`` (README.md's text) with the lines between the markers replaced by the results
    table and the notes under it."""
    lines = current.split("\n")
    if lines.count(BEGIN) != 1 or lines.count(END) != 1 or lines.index(BEGIN) > lines.index(END):
        raise ValueError(f"needs one line {BEGIN} and, after it, one line {END}")
    begin, end = lines.index(BEGIN), lines.index(END)
    generated = results_table() + "\n\n" + results_notes()
    return "\n".join(lines[: begin + 1] + generated.split("\n") + lines[end:])


def outputs():
    """{path: the text this script writes there, or the ValueError that says why it cannot}."""
    wanted = {BENCHMARKS_README: benchmarks_readme()}
    with open(FRONT_README) as f:
        front = f.read()
    try:
        wanted[FRONT_README] = front_readme(front)
    except ValueError as error:
        wanted[FRONT_README] = error
    return wanted


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 naming each file that differs"
    )
    args = parser.parse_args()
    try:
        wanted = outputs()
    except ValueError as error:
        sys.exit(f"benchmarks/tables.py: {error}")
    problems = []
    for path, content in wanted.items():
        name = os.path.relpath(path, ROOT)
        if isinstance(content, ValueError):
            problems.append(f"{name}: {content}")
            continue
        current = ""
        if os.path.exists(path):
            with open(path) as f:
                current = f.read()
        if current == content:
            continue
        if args.check:
            problems.append(f"{name} differs from the stored runs' tables; run python benchmarks/tables.py")
        else:
            with open(path, "w") as f:
                f.write(content)
            print(f"wrote {name}")
    if problems:
        sys.exit("benchmarks/tables.py: " + "\n".join(problems))


if __name__ == "__main__":
    main()
