"""What the benchmark scripts say about the machine and the code they ran on, written once.

``matmul_gflops()`` measures the fp32 rate a large dense matmul reaches on the host a
run is on; the scripts store it with each result, and a share of the CPU's peak is a
share of that run's own host's rate. Hosts behind the same 2-core CPU notes differ by
up to 3x (130-190 GFLOP/s in the machine notes, over 400 on later hosts), so a rate
assumed once is not comparable across days. ``PEAK_GFLOPS`` (130, the notes' low end)
is only the rate that results stored before hosts were measured are read against, and
the tables mark those shares as assumed.

The scripts run as ``python benchmarks/NAME.py``, which puts this folder first on
``sys.path``; they import this module as ``machine``.
"""

import os
import platform
import resource
import shlex
import subprocess
import sys
import time

PEAK_GFLOPS = 130.0


def matmul_gflops(size=4096, repeats=3):
    """The fp32 GFLOP/s of a ``size`` x ``size`` TensorFlow matmul on this host now.

    The best of ``repeats`` after one warm-up: the rate the CPU gives when nothing else
    runs, with TensorFlow's own threads, as training and evaluation use them.
    """
    import tensorflow as tf

    a = tf.random.stateless_normal((size, size), seed=(0, 1))
    b = tf.random.stateless_normal((size, size), seed=(0, 2))
    tf.matmul(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        tf.matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def host_rate(record):
    """``(GFLOP/s, measured)``: the host rate a stored result's shares are of.

    Its host's measured rate (``host_matmul_gflops``), or for a result stored before
    hosts were measured the assumed ``PEAK_GFLOPS`` it was computed with.
    """
    rate = record.get("host_matmul_gflops")
    return (rate, True) if rate is not None else (record.get("peak_gflops", PEAK_GFLOPS), False)


def assumed_mark(record):
    """The footnote mark (``ASSUMED_NOTE``) after a share of an assumed host rate, else nothing."""
    return "" if host_rate(record)[1] else "\\*"


def share(gflops, record):
    """``gflops`` as a share of ``record``'s host rate: "36% of 466", or "36% of 130\\*" where assumed."""
    rate, _ = host_rate(record)
    return f"{100 * gflops / rate:.0f}% of {rate:.0f}{assumed_mark(record)}"


# The footnote of a table with an assumed host rate (``share``'s ``\*``).
ASSUMED_NOTE = (
    f"\\* Stored before runs measured their host: the share is of an assumed {PEAK_GFLOPS:.0f} GFLOP/s "
    "(the machine notes' low end), not of that host's own rate, and hosts differ by several times "
    "(benchmarks/machine.py)."
)


def assumed_note(records):
    """``ASSUMED_NOTE`` when a share of any of ``records`` is of an assumed host rate, else ``""``."""
    return ASSUMED_NOTE if any(assumed_mark(r) for r in records) else ""


def peak_rss_gib():
    """Peak resident memory of this process so far, in GiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def code_version():
    """The commit the library code comes from, ``+dirty`` when ``tfseqrec/`` has uncommitted changes."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def git(*args):
        result = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--", "tfseqrec") else "")


def now():
    """The date and UTC time, as the stored runs record their start and end."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def environment():
    """CPU count and the versions that matter, for a table's header line."""
    import keras
    import tensorflow as tf

    return (
        f"{os.cpu_count()} CPU cores, TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"Python {platform.python_version()}"
    )


def run_header(script, matmul=False):
    """The fields every record of this run of ``benchmarks/<script>`` shares: its command (the
    script's own arguments), code version, start and environment; with ``matmul``, the host's
    measured rate (``matmul_gflops``)."""
    header = {
        "command": shlex.join(["python", f"benchmarks/{script}", *sys.argv[1:]]),
        "commit": code_version(),
        "started": now(),
        "environment": environment(),
    }
    if matmul:
        header["host_matmul_gflops"] = matmul_gflops()
    return header
