#!/usr/bin/env bash
# Installs the e2e suite's Python Iggy clients: the unmodified `apache-iggy` SDK from PyPI, one
# venv per server generation, under ${TIERD_CACHE_DIR:-$HOME/.cache/tierd}:
#   py-iggy-0.8.0  apache-iggy==0.8.0  (its TCP client speaks Iggy 0.8's binary protocol)
#   py-iggy-0.9.0  apache-iggy==0.9.0  (Iggy 0.9's VSR-framed protocol)
# test/clients/python/read.py runs in either. Idempotent: a venv whose interpreter already
# imports the pinned version is left alone (a check of well under a second). Prints each venv's
# python on a line of its own. Needs python3 (3.10+) with the venv module, and PyPI.
set -euo pipefail

CACHE="${TIERD_CACHE_DIR:-$HOME/.cache/tierd}"
VERSIONS=(0.8.0 0.9.0)
say() { printf 'install-python-clients: %s\n' "$*" >&2; }

mkdir -p "$CACHE"
# One install at a time: a second test process waits here, then finds the venvs made.
exec 9>"$CACHE/.py-iggy.lock"
flock 9

python="$(command -v python3 || true)"
if [ -z "$python" ]; then say "no python3 on PATH"; exit 1; fi

for version in "${VERSIONS[@]}"; do
  venv="$CACHE/py-iggy-$version"
  if [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c "import sys, importlib.metadata as m, apache_iggy
sys.exit(m.version('apache-iggy') != '$version')" 2>/dev/null; then
    say "up to date: $venv"
    echo "$venv/bin/python"
    continue
  fi
  started=$SECONDS
  say "installing apache-iggy==$version into $venv…"
  # A half-made venv from an interrupted run fails the check above and is made anew here.
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "apache-iggy==$version" >&2
  "$venv/bin/python" -c "import apache_iggy" >&2
  say "installed in $((SECONDS - started)) s: $venv"
  echo "$venv/bin/python"
done
