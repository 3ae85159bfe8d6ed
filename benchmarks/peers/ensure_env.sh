#!/usr/bin/env bash
# Creates (or reuses) .venv-peers/, the peer-library benchmark's environment: Python 3.11,
# RecTools 0.19 and PyTorch (CPU), from requirements/peers.txt. It is never a dependency
# of tfseqrec: the harness (benchmarks/peers/side_by_side.py) runs in the package's own
# .venv and starts benchmarks/peers/rectools_runner.py with .venv-peers/bin/python.
#
#   benchmarks/peers/ensure_env.sh
#
# The environment is reused while the lock and this script are unchanged (their hash is
# stamped inside it); otherwise it is rebuilt from the full lock with --no-deps, so pip
# never resolves and every install is the same. PEERS_TORCH_INDEX (e.g.
# https://download.pytorch.org/whl/cpu) takes torch from that index instead: PyPI's
# Linux torch wheel is the CUDA build, whose nvidia-* packages the lock leaves out.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=.venv-peers
want=3.11
lock=requirements/peers.txt
stamp=$(cat "$lock" benchmarks/peers/ensure_env.sh | sha256sum | cut -d' ' -f1)
if [[ -f $venv/.peers-stamp && $(cat "$venv/.peers-stamp") == "$stamp" ]]; then
  exit 0
fi

python=
for candidate in "${PEERS_PYTHON:-}" "python$want"; do
  [[ -n $candidate ]] || continue
  if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))" 2>/dev/null; then
    python=$candidate
    break
  fi
done
[[ -n $python ]] || {
  echo "ensure_env.sh: Python $want not found; install it or set PEERS_PYTHON" >&2
  exit 1
}

# This machine's pip configuration names extra indexes that may be absent; their
# per-package warnings would bury real errors.
quiet_pip() { "$venv/bin/python" -m pip "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }

echo "Creating $venv ($("$python" --version)) from $lock ..." >&2
rm -rf "$venv"
"$python" -m venv "$venv"
quiet_pip install --quiet --disable-pip-version-check --upgrade "pip==24.2" "setuptools==77.0.3" "wheel==0.44.0"
if [[ -n ${PEERS_TORCH_INDEX:-} ]]; then
  torch=$(grep -E '^torch==' "$lock")
  quiet_pip install --quiet --disable-pip-version-check --no-deps --index-url "$PEERS_TORCH_INDEX" "$torch"
  quiet_pip install --quiet --disable-pip-version-check --no-deps -r <(grep -vE '^torch==' "$lock")
else
  quiet_pip install --quiet --disable-pip-version-check --no-deps -r "$lock"
fi
quiet_pip check >&2 || echo "ensure_env.sh: pip check reports the conflicts above" >&2
"$venv/bin/python" -c "import rectools, torch; print('rectools', rectools.__version__, 'torch', torch.__version__)" >&2
echo "$stamp" > "$venv/.peers-stamp"
echo "Ready: $venv" >&2
