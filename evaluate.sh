#!/usr/bin/env bash
# Evaluate the candidate at HEAD: bash evaluate.sh --description "what changed" [--offline]
# All logic lives in the harness (autoenv eval); this only finds the project's venv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
autoenv="$here/.venv/bin/autoenv"
[ -x "$autoenv" ] || { echo "evaluate.sh: $autoenv not found; run: bash setup.sh" >&2; exit 2; }
exec "$autoenv" eval "$@"
