#!/usr/bin/env bash
# Installs the object-store servers the contract tests run against, each only if
# missing, into $HOME/.cache/tierd: MinIO and fake-gcs-server (go install, pinned, static so
# scripts/docker-images.sh can put the same binaries in images) into bin/, Azurite (npm, pinned)
# into azurite/; s3proxy (Maven, pinned; Java) into s3proxy/; and Prometheus' promtool (go
# install, pinned) into bin/ for the metrics and alert rule checks. Idempotent; prints what it
# did. Building MinIO or promtool takes minutes.
# Pins: scripts/test-servers.env. Override the location with TIERD_CACHE_DIR.
set -euo pipefail

pins="$(dirname "$0")/test-servers.env"
pin() { sed -n "s/^$1=//p" "$pins"; }
MINIO_MODULE="$(pin TIERD_MINIO_MODULE)"
FAKE_GCS_MODULE="$(pin TIERD_FAKE_GCS_MODULE)"
AZURITE_PACKAGE="$(pin TIERD_AZURITE_PACKAGE)"
PROMTOOL_MODULE="$(pin TIERD_PROMTOOL_MODULE)"
PROMTOOL_VERSION="$(pin TIERD_PROMTOOL_VERSION)"
S3PROXY_ARTIFACT="$(pin TIERD_S3PROXY_ARTIFACT)"

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

go_install() { # name module [extra -ldflags]
  local name="$1" module="$2" extra="${3:-}" go
  if [ -x "$BIN/$name" ]; then
    say "$name: already installed at $BIN/$name"
    return 0
  fi
  if ! go="$(find_go)"; then
    say "$name: SKIPPED — no Go toolchain to build $module"
    return 1
  fi
  say "$name: building $module with $("$go" version | cut -d' ' -f3) (may take minutes)…"
  CGO_ENABLED=0 GOBIN="$BIN" "$go" install -trimpath -ldflags="-s -w $extra" "$module"
  say "$name: installed at $BIN/$name"
}

status=0
go_install minio "$MINIO_MODULE" || status=1
go_install fake-gcs-server "$FAKE_GCS_MODULE" || status=1
go_install promtool "$PROMTOOL_MODULE" \
  "-X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION" || status=1

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

S3PROXY_DIR="$CACHE/s3proxy"
S3PROXY_JAR="$S3PROXY_DIR/s3proxy.jar"
if [ -f "$S3PROXY_JAR" ]; then
  say "s3proxy: already installed at $S3PROXY_JAR"
elif command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
  say "s3proxy: fetching $S3PROXY_ARTIFACT (jar-with-dependencies) with Maven…"
  mkdir -p "$S3PROXY_DIR"
  mvn --batch-mode --quiet -Dstyle.color=never dependency:copy \
    -Dartifact="$S3PROXY_ARTIFACT:jar:jar-with-dependencies" \
    -DoutputDirectory="$S3PROXY_DIR" -Dmdep.stripVersion=true
  mv "$S3PROXY_DIR"/s3proxy-jar-with-dependencies.jar "$S3PROXY_JAR"
  say "s3proxy: installed at $S3PROXY_JAR"
else
  say "s3proxy: SKIPPED — java and mvn are needed"
  status=1
fi

exit "$status"
