#!/usr/bin/env bash
# Set up everything the pipeline needs on a fresh Debian machine with Python 3.11, idempotently:
#   bash workflow/scripts/setup_env.sh           # .venv with the pinned packages + this package
#   bash workflow/scripts/setup_env.sh --test    # the same, plus Debian's chromium for the browser test
#                                                # and, as root on Debian, the local SLURM cluster
# Packages come from envs/requirements.lock (exact pins; torch is the 2.13.0 CPU build where the
# machine's pip finds it locally). Nothing is installed twice: a stamp records the lock's hash.
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
WITH_TEST=0
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=1 ;;
    *) echo "unknown option: $arg (allowed: --test)" >&2; exit 2 ;;
  esac
done

apt_install() {  # apt_install PKG...: install Debian packages when missing (root only)
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "please install: ${missing[*]}" >&2; return 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV" 2>/dev/null || { apt_install python3-venv && "$PYTHON" -m venv "$VENV"; }
fi

stamp="$VENV/.icmlrepro-lock.sha256"
want=$(cat envs/requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -r envs/requirements.lock
  "$VENV/bin/python" -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi

# Release wheels that RPG-Encoder's evolution experiment replays (read as zip files, not installed).
releases="$VENV/rpg_encoder_releases"
want_rel=$(sha256sum envs/rpg_encoder_releases.txt | cut -d' ' -f1)
if [ "$(cat "$releases/.stamp" 2>/dev/null)" != "$want_rel" ]; then
  mkdir -p "$releases"
  grep -v '^\s*#' envs/rpg_encoder_releases.txt | grep . | while read -r line; do
    printf '%s\n' "$line" > "$releases/.one.txt"   # one pin at a time: pip refuses two versions in one call
    "$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --require-hashes \
      -d "$releases" -r "$releases/.one.txt"
  done
  rm -f "$releases/.one.txt"
  echo "$want_rel" > "$releases/.stamp"
fi

if [ "$WITH_TEST" = 1 ]; then
  command -v chromium >/dev/null || apt_install chromium
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    bash workflow/scripts/local_slurm.sh start   # for tests/test_slurm.py
  else
    echo "not root on Debian: the local SLURM cluster is not started and the SLURM tests will skip" >&2
  fi
fi
echo "environment ready: $VENV ($("$VENV/bin/python" --version), snakemake $("$VENV/bin/snakemake" --version))"
