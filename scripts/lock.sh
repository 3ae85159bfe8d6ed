#!/usr/bin/env bash
# Regenerates the full lock files from requirements/*.in with uv (pip install uv).
# The primary stack is bounded to packages released by early 2025: TFX 1.16 caps
# protobuf below 5, and newer google-cloud releases otherwise send resolvers
# backtracking for hours.
set -euo pipefail
cd "$(dirname "$0")/.."
lock() {  # name python-version extra-args...
  local name=$1 py=$2; shift 2
  {
    echo "# $(head -1 requirements/$name.in | sed 's/^# //')"
    uv pip compile "requirements/$name.in" --python-version "$py" \
      --python-platform x86_64-manylinux_2_28 --no-header "$@"
  } > "requirements/$name.txt"
}
lock primary 3.10 --exclude-newer 2025-01-15 --exclude-newer-package tensorflow-recommenders=2026-02-01 \
  --exclude-newer-package keras=2026-08-01
lock latest 3.11
