#!/usr/bin/env bash
# Builds the e2e suite's Iggy SDK client (test/sdk: the Rust `iggy` crate's TCP and HTTP clients)
# into $HOME/.cache/tierd/sdk/, only when no build of the same sources and toolchain is there.
# Two pinned builds of the same source (test/sdk/src):
#   build-sdk-client.sh            test/sdk, iggy =0.10.0 (Iggy 0.8 servers; HTTP to both)
#   build-sdk-client.sh iggy-0.11  test/sdk/iggy-0.11, iggy =0.11.0-edge.4 (Iggy 0.9.0-edge.5's
#                                  VSR-framed TCP protocol, which 0.10.0 does not speak)
# Each build is named by its iggy version and a hash of its Cargo.toml, Cargo.lock, src/ and
# `rustc -V`, and cargo's target dir stays in the cache too, so a change rebuilds incrementally.
# A cold build downloads the crates and compiles them (minutes on 2 cores). Prints the binary's
# path on its last line. Override the cache location with TIERD_CACHE_DIR.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in
  "") project="$root/test/sdk"; target=target ;;
  iggy-0.11) project="$root/test/sdk/iggy-0.11"; target=target-iggy-0.11 ;;
  *) printf 'usage: %s [iggy-0.11]\n' "$0" >&2; exit 2 ;;
esac
src="$root/test/sdk/src"
CACHE="${TIERD_CACHE_DIR:-$HOME/.cache/tierd}/sdk"
say() { printf 'build-sdk-client: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"
  else say "no cargo on PATH (install Rust with rustup)"; exit 1
  fi
fi

mkdir -p "$CACHE"
# One build of each at a time: a second test process (the suite runs files in parallel) waits
# here, then finds the binary made.
exec 9>"$CACHE/.build-$target.lock"
flock 9

iggy="$(sed -n '/^name = "iggy"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$project/Cargo.lock")"
tag="$(
  {
    rustc -V
    cat "$project/Cargo.toml" "$project/Cargo.lock"
    find "$src" -type f -name '*.rs' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -c1-16
)"
# The 0.10.0 build keeps its historic name, so caches made before the second build stay valid.
if [ -z "${1:-}" ]; then name="tierd-sdk-client"; else name="tierd-sdk-client-iggy-$iggy"; fi
bin="$CACHE/$name-$tag"
if [ -x "$bin" ]; then
  say "up to date: $bin"
  echo "$bin"
  exit 0
fi

say "building ${project#"$root/"} (iggy $iggy, $(rustc -V)); a cold build takes minutes…"
started=$SECONDS
CARGO_TARGET_DIR="$CACHE/$target" cargo build --locked --quiet --manifest-path "$project/Cargo.toml"
cp "$CACHE/$target/debug/tierd-sdk-client" "$bin.tmp"
mv "$bin.tmp" "$bin"
# Builds of older sources are of no use any more (the other pinned build's names differ: the
# 0.10.0 ones have a bare 16-hex tag after `tierd-sdk-client-`).
if [ -z "${1:-}" ]; then
  find "$CACHE" -maxdepth 1 -regextype posix-extended \
    -regex '.*/tierd-sdk-client-[0-9a-f]{16}' ! -name "$(basename "$bin")" -delete
else
  find "$CACHE" -maxdepth 1 -name "$name-*" ! -name "$(basename "$bin")" -delete
fi
say "built in $((SECONDS - started)) s: $bin"
echo "$bin"
