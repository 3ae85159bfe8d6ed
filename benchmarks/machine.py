"""What the benchmark scripts say about the machine and the code they ran on, written once.

``PEAK_GFLOPS`` is the fp32 rate a large dense matmul reaches on this project's
2-core CPU: 130-190 GFLOP/s by the machine's notes, and the low end is the one used,
so a share of it is a share of what the CPU surely gives. It is the bound that
training FLOP/s, evaluation users/s and serving GFLOP/s are compared with. On another
machine, measure its own and edit it here.

The scripts run as ``python benchmarks/NAME.py``, which puts this folder first on
``sys.path``; they import this module as ``machine``.
"""

import os
import platform
import resource
import subprocess
import time

PEAK_GFLOPS = 130.0


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
