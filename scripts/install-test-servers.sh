#!/usr/bin/env bash
# Installs the object-store servers the contract tests run against, each only if
# missing, into $HOME/.cache/tierd: MinIO and fake-gcs-server (go install, pinned) into bin/,
# Azurite (npm, pinned) into azurite/. Idempotent; prints what it did. Building MinIO takes
# minutes. Override the location with TIERD_CACHE_DIR.
set -euo pipefail

MINIO_MODULE="github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"
FAKE_GCS_MODULE="github.com/fsouza/fake-gcs-server@v1.56.1"
AZURITE_PACKAGE="azurite@3.35.0"

CACHE="${TIERD_CACHE_DIR:-$HOME/.cache/tierd}"
BIN="$CACHE/bin"
mkdir -p "$BIN"

say() { printf 'install-test-servers: %s\n' "$*"; }

find_go() {
  if command -v go >/dev/null 2>&1; then command -v go
  elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
  else return 1
  fi
}

go_install() { # name module
  local name="$1" module="$2" go
  if [ -x "$BIN/$name" ]; then
    say "$name: already installed at $BIN/$name"
    return 0
  fi
  if ! go="$(find_go)"; then
    say "$name: SKIPPED — no Go toolchain to build $module"
    return 1
  fi
  say "$name: building $module with $("$go" version | cut -d' ' -f3) (may take minutes)…"
  GOBIN="$BIN" "$go" install "$module"
  say "$name: installed at $BIN/$name"
}

status=0
go_install minio "$MINIO_MODULE" || status=1
go_install fake-gcs-server "$FAKE_GCS_MODULE" || status=1

AZURITE_DIR="$CACHE/azurite"
if [ -x "$AZURITE_DIR/node_modules/.bin/azurite-blob" ]; then
  say "azurite: already installed at $AZURITE_DIR"
elif command -v npm >/dev/null 2>&1; then
  say "azurite: installing $AZURITE_PACKAGE into $AZURITE_DIR…"
  npm install --no-audit --no-fund --prefix "$AZURITE_DIR" "$AZURITE_PACKAGE"
  say "azurite: installed ($AZURITE_DIR/node_modules/.bin/azurite-blob)"
else
  say "azurite: SKIPPED — npm is not available"
  status=1
fi

exit "$status"
