#!/usr/bin/env bash
# Builds the e2e suite's Iggy SDK client (test/sdk: the Rust `iggy` crate's HTTP client, pinned
# in test/sdk/Cargo.lock) into $HOME/.cache/tierd/sdk/, only when no build of the same sources
# and toolchain is there: the build is named by a hash of Cargo.toml, Cargo.lock, src/ and
# `rustc -V`, and cargo's target dir stays in the cache too, so a change rebuilds incrementally.
# A cold build downloads the crates and compiles them (minutes on 2 cores). Prints the binary's
# path on its last line. Override the cache location with TIERD_CACHE_DIR.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
project="$root/test/sdk"
CACHE="${TIERD_CACHE_DIR:-$HOME/.cache/tierd}/sdk"
say() { printf 'build-sdk-client: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"
  else say "no cargo on PATH (install Rust with rustup)"; exit 1
  fi
fi

tag="$(
  {
    rustc -V
    cat "$project/Cargo.toml" "$project/Cargo.lock"
    find "$project/src" -type f -name '*.rs' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -c1-16
)"
bin="$CACHE/tierd-sdk-client-$tag"
if [ -x "$bin" ]; then
  say "up to date: $bin"
  echo "$bin"
  exit 0
fi

mkdir -p "$CACHE"
say "building test/sdk ($(rustc -V)); a cold build takes minutes…"
started=$SECONDS
CARGO_TARGET_DIR="$CACHE/target" cargo build --locked --quiet --manifest-path "$project/Cargo.toml"
cp "$CACHE/target/debug/tierd-sdk-client" "$bin.tmp"
mv "$bin.tmp" "$bin"
# Builds of older sources are of no use any more.
find "$CACHE" -maxdepth 1 -name 'tierd-sdk-client-*' ! -name "$(basename "$bin")" -delete
say "built in $((SECONDS - started)) s: $bin"
echo "$bin"
