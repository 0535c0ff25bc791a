#!/usr/bin/env bash
# Builds the e2e suite's Java Iggy client (test/clients/java: the unmodified
# org.apache.iggy:iggy 0.8.0 SDK's TCP client) into one runnable jar with its dependencies under
# ${TIERD_CACHE_DIR:-$HOME/.cache/tierd}/java/, only when no build of the same sources and JDK is
# there: the jar is named by a hash of pom.xml, src/ and `java -version`; Maven builds a copy of
# the project in the cache, so the work tree stays clean. A cold build downloads Maven's plugins
# and the SDK's dependencies from Maven Central into ~/.m2 (about 10 s here), a warm check takes
# well under a second. Prints the jar's path on its last line.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
project="$root/test/clients/java"
CACHE="${TIERD_CACHE_DIR:-$HOME/.cache/tierd}/java"
say() { printf 'build-java-client: %s\n' "$*" >&2; }

for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || { say "no $tool on PATH (a JDK 17+ and Maven)"; exit 1; }
done

mkdir -p "$CACHE"
# One build at a time: a second test process waits here, then finds the jar made.
exec 9>"$CACHE/.build.lock"
flock 9

tag="$(
  {
    java -version 2>&1
    cat "$project/pom.xml"
    find "$project/src" -type f | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -c1-16
)"
jar="$CACHE/iggy-read-$tag.jar"
if [ -f "$jar" ]; then
  say "up to date: $jar"
  echo "$jar"
  exit 0
fi

say "building test/clients/java with Maven…"
started=$SECONDS
work="$CACHE/build"
rm -rf "$work"
mkdir -p "$work"
cp -r "$project/pom.xml" "$project/src" "$work/"
mvn --batch-mode --quiet -Dstyle.color=never --file "$work/pom.xml" package -DskipTests >&2
cp "$work/target/iggy-read-jar-with-dependencies.jar" "$jar.tmp"
mv "$jar.tmp" "$jar"
# Builds of older sources are of no use any more.
find "$CACHE" -maxdepth 1 -name 'iggy-read-*.jar' ! -name "$(basename "$jar")" -delete
say "built in $((SECONDS - started)) s: $jar"
echo "$jar"
