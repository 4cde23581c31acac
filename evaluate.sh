#!/usr/bin/env bash
# Evaluate the candidate at HEAD: bash evaluate.sh --description "what changed" [--offline]
# All logic lives in the harness (autoenv eval); this only finds the project's venv: this
# checkout's, or for a run in its own worktree (autoenv new --worktree) the main checkout's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
autoenv="$here/.venv/bin/autoenv"
if [ ! -x "$autoenv" ]; then
  common="$(git -C "$here" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
  [ -n "$common" ] && autoenv="$(dirname "$common")/.venv/bin/autoenv"
fi
[ -x "$autoenv" ] || { echo "evaluate.sh: $here/.venv/bin/autoenv not found; run: bash setup.sh" >&2; exit 2; }
# A .pth a candidate's install left in the venv would run in every interpreter started from it, so the venv is
# checked against its seal first, by one that runs none (-I -S: autoenv/core/venvseal.py).
venv="$(cd "$(dirname "$autoenv")/.." && pwd -P)"
seal_check="$(dirname "$venv")/autoenv/core/venvseal.py"
[ -f "$seal_check" ] || seal_check="$(ls "$venv"/lib/python3*/site-packages/autoenv/core/venvseal.py 2>/dev/null | head -1)"
if [ -n "$seal_check" ]; then
  "$venv/bin/python" -I -S "$seal_check" check "$venv" || {
    echo "evaluate.sh: the harness's venv changed since setup (above); nothing was evaluated" >&2
    echo "  fix: the person removes the files named, then runs bash setup.sh (it seals the venv again)" >&2; exit 2; }
fi
exec "$autoenv" eval "$@"
