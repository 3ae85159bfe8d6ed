"""Range, choice and path checks: the library's one way to refuse an option, naming it and its value.

NumPy only, so the data layer and the command line check options without importing TensorFlow.
"""

import os

import numpy as np


def check_number(
    name,
    value,
    minimum=None,
    maximum=None,
    integer=False,
    exclusive_minimum=False,
    exclusive_maximum=False,
    optional=False,
):
    """Raises ``ValueError`` unless ``value`` is a finite number in range; returns it.

    The message names the option and the value, e.g. ``batch_size must be an integer
    >= 1, got -3``. Booleans are not numbers here.
    """
    if value is None and optional:
        return value
    kind = "an integer" if integer else "a finite number"
    bounds = []
    if minimum is not None:
        bounds.append(f"{'>' if exclusive_minimum else '>='} {minimum}")
    if maximum is not None:
        bounds.append(f"{'<' if exclusive_maximum else '<='} {maximum}")
    wanted = f"{name} must be {kind}{' ' + ' and '.join(bounds) if bounds else ''}, got {value!r}"
    numeric = (
        isinstance(value, (int, np.integer))
        if integer
        else isinstance(value, (int, float, np.integer, np.floating))
    )
    if isinstance(value, bool) or not numeric or not np.isfinite(value):
        raise ValueError(wanted)
    if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
        raise ValueError(wanted)
    if maximum is not None and (value >= maximum if exclusive_maximum else value > maximum):
        raise ValueError(wanted)
    return value


def check_choice(name, value, choices, optional=False):
    """Raises ``ValueError`` unless ``value`` is one of ``choices``."""
    if (value is None and optional) or value in choices:
        return value
    raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


def check_output_apart(output_flag, output, inputs):
    """Raises ``ValueError`` when the output path ``output`` is, holds or lies inside an input.

    A command that writes ``output`` (replacing it with ``--overwrite``) must never
    touch what it reads: ``inputs`` maps each input's flag (``"--data"``) to its path (a
    file or a folder; ``None`` for one not given). Paths are compared resolved
    (symbolic links and ``..`` followed), before anything is read or written.

    >>> check_output_apart("--output", "runs/m", {"--data": "data/ml-100k"})
    >>> check_output_apart("--output", "data", {"--data": "data/ml-100k/u.data"})
    Traceback (most recent call last):
    ...
    ValueError: --output data holds the input --data data/ml-100k/u.data: writing it would replace the input; choose an output outside every input
    """
    if output is None:
        return
    out = os.path.realpath(output)
    for flag, path in inputs.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if out == real:
            relation = "is"
        elif _inside(real, out):
            relation = "holds"
        elif _inside(out, real):
            relation = "is inside"
        else:
            continue
        raise ValueError(
            f"{output_flag} {output} {relation} the input {flag} {path}: writing it would "
            f"{'write into' if relation == 'is inside' else 'replace'} the input; "
            "choose an output outside every input"
        )


def _inside(path, folder):
    """Whether the resolved ``path`` lies under the resolved ``folder``."""
    return os.path.commonpath([path, folder]) == folder and path != folder
