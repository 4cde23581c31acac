#!/usr/bin/env bash
# One-time setup (safe to re-run): .venv with AutoEnv and its dev tools, uv, the readable
# verifiers/ copy, the candidate installed editable, the first rollout warmed up, and
# bubblewrap (apt-get, when root and it is missing) to sandbox candidate code; --with-model adds the local
# model, --with-docker Docker and the docker runtime's local base image.
# The logic lives in Python (`autoenv setup`); this script only finds Python and makes the venv.
set -euo pipefail
cd "$(dirname "$0")"

fail() { printf 'setup.sh: %s\n' "$1" >&2; [ -n "${2:-}" ] && printf '  fix: %s\n' "$2" >&2; exit 1; }

python=""
for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$candidate"; break
  fi
done
[ -n "$python" ] || fail "Python >= 3.11 was not found (tried \$PYTHON, python3.13, python3.12, python3.11, python3)" \
  "install Python 3.11 or newer, or point PYTHON at one: PYTHON=/path/to/python3.12 bash setup.sh"
"$python" -c 'import venv, ensurepip' 2>/dev/null ||
  fail "$python has no venv/ensurepip module" "on Debian/Ubuntu: apt-get install python3-venv"

if [ -x .venv/bin/python ] && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup.sh: .venv is broken or older than Python 3.11; recreating it"
  rm -rf .venv
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

echo "setup.sh: installing AutoEnv and its dependencies into .venv (pip)"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[dev]' ||
  fail "pip could not install the project's dependencies (see the error above)" \
       "check that PyPI is reachable (proxy settings, PIP_INDEX_URL), then re-run bash setup.sh"

# bubblewrap sandboxes the candidate's code (autoenv/sandbox/confine.py); without it the candidate
# runs unconfined and every evaluation says so.
apt_get() {  # apt-get "$@", waiting up to 300 s while another apt-get or unattended-upgrades holds a package lock
  waited=0
  while ! err=$(DEBIAN_FRONTEND=noninteractive apt-get "$@" 2>&1 >/dev/null); do
    case "$err" in
      *"Could not get lock"* | *"dpkg frontend lock"*)
        if [ "$waited" -ge 300 ]; then echo "$err" >&2; echo "setup.sh: a package lock was still held after 300 s (another apt-get or unattended-upgrades): wait for it to end, then run setup again" >&2; return 1; fi
        [ "$waited" = 0 ] && echo "setup.sh: waiting for the package lock (another apt-get or unattended-upgrades is running; up to 300 s)"
        sleep 5; waited=$((waited + 5)) ;;
      *) echo "$err" >&2; return 1 ;;
    esac
  done
}
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup.sh: installing bubblewrap (apt-get) to sandbox candidate code"
    { apt_get update -qq && apt_get install -y -qq bubblewrap; } ||
      echo "setup.sh: apt-get could not install bubblewrap; candidates will run unconfined (see docs/sandbox.md, 'The sandbox')" >&2
  else
    echo "setup.sh: bubblewrap is missing; install it to sandbox candidate code: sudo apt-get install bubblewrap" >&2
  fi
fi

.venv/bin/autoenv setup "$@"
echo "setup.sh: done. Next: .venv/bin/autoenv demo   (or see README.md)"
