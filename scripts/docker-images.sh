#!/usr/bin/env bash
# Makes container images locally under their pinned upstream names, for an engine that cannot
# pull: the test servers (static builds of MinIO and fake-gcs-server, Azurite on this machine's
# Node) and the two base images of tierd's Dockerfile (a debootstrapped Debian, and the same with
# this machine's Node). Each is `docker import`ed from a root-filesystem tar cached in
# $HOME/.cache/tierd/docker; an image already present is left alone (a no-op).
#
#   scripts/docker-images.sh [--record FILE] [servers] [bases]   (no group: both)
#       --record FILE   append the name of every image this run imported to FILE
#   scripts/docker-images.sh --remove FILE                       remove the images FILE names
#
# Pins: scripts/test-servers.env and the BASE_IMAGE / BUILDER_IMAGE arguments of Dockerfile.
# Needs a running Docker engine and Go; the bases need root (debootstrap). TIERD_CACHE_DIR
# moves the cache; TIERD_DEBIAN_MIRROR picks the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'docker-images: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# The pins, unless the environment already names an image.
while IFS='=' read -r key value; do
  case "$key" in '' | '#'*) continue ;; esac
  [ -n "${!key:-}" ] || export "$key=$value"
done <scripts/test-servers.env

CACHE="${TIERD_CACHE_DIR:-$HOME/.cache/tierd}"
DOCKER_CACHE="$CACHE/docker"
MIRROR="${TIERD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
MADE_BY_LABEL="org.tierd.made-by=scripts/docker-images.sh"
RECORD=""

if [ "${1:-}" = "--remove" ]; then
  file="${2:?usage: docker-images.sh --remove FILE}"
  [ -f "$file" ] || exit 0
  sort -u "$file" | while read -r name; do
    [ -n "$name" ] || continue
    if docker image rm "$name" >/dev/null 2>&1; then say "removed $name"; fi
  done
  rm -f "$file"
  exit 0
fi
if [ "${1:-}" = "--record" ]; then
  RECORD="${2:?usage: docker-images.sh --record FILE}"
  shift 2
fi
groups="${*:-servers bases}"

docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)"
mkdir -p "$DOCKER_CACHE/bin" "$DOCKER_CACHE/rootfs"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

present() { docker image inspect "$1" >/dev/null 2>&1; }

# import NAME TAR [--change ...]: the tar as image NAME, labelled, recorded.
import_image() {
  local name="$1" tar="$2"
  shift 2
  docker import --change "LABEL $MADE_BY_LABEL" "$@" "$tar" "$name" >/dev/null
  [ -z "$RECORD" ] || echo "$name" >>"$RECORD"
  say "$name: imported ($(du -h "$tar" | cut -f1) root fs)"
}

find_go() {
  if command -v go >/dev/null 2>&1; then command -v go
  elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
  else return 1
  fi
}

# static_go NAME MODULE@VERSION: prints the path of a static (CGO_ENABLED=0) build of MODULE,
# reusing install-test-servers.sh's binary when it is one, else building it once into the cache.
static_go() {
  local name="$1" module="$2" go path="${2%@*}" version="${2#*@}"
  local cached="$DOCKER_CACHE/bin/$name-$version" installed="$CACHE/bin/$name"
  go="$(find_go)" || die "$name: no Go toolchain to build $module"
  if [ -x "$installed" ] && "$go" version -m "$installed" 2>/dev/null |
    grep -Eq "^[[:space:]]mod[[:space:]]+$path[[:space:]]+$version([[:space:]]|$)" &&
    "$go" version -m "$installed" | grep -q "CGO_ENABLED=0"; then
    echo "$installed"
    return
  fi
  if [ ! -x "$cached" ]; then
    say "$name: building $module with CGO_ENABLED=0 (minutes for MinIO)…"
    local start=$SECONDS
    CGO_ENABLED=0 GOBIN="$work/gobin" "$go" install -trimpath -ldflags="-s -w" "$module" >&2
    mv "$work/gobin/$name" "$cached"
    say "$name: built in $((SECONDS - start)) s"
  fi
  echo "$cached"
}

# copy_with_libs ROOT FILE...: FILE and the shared libraries it loads, at the same paths in ROOT
# (only those ROOT lacks).
copy_with_libs() {
  local root="$1" file lib
  shift
  for file in "$@"; do
    for lib in "$file" $(ldd "$file" 2>/dev/null | grep -Eo '/[^ ]+' || true); do
      [ -e "$root$lib" ] && [ "$lib" != "$file" ] && continue
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
  done
}

tar_root() { tar --numeric-owner -C "$1" -cf "$2.part" . && mv "$2.part" "$2"; }

minio_image() {
  local name="$TIERD_MINIO_IMAGE" tar
  if present "$name"; then say "$name: present"; return; fi
  tar="$DOCKER_CACHE/rootfs/minio-${TIERD_MINIO_MODULE#*@}.tar"
  if [ ! -f "$tar" ]; then
    local bin root="$work/minio"
    bin="$(static_go minio "$TIERD_MINIO_MODULE")"
    mkdir -p "$root/usr/bin" "$root/data" "$root/tmp"
    chmod 1777 "$root/tmp"
    cp "$bin" "$root/usr/bin/minio"
    tar_root "$root" "$tar"
  fi
  # Like minio/minio, whose entrypoint runs `minio "$@"`: the command is `server DIR …`.
  import_image "$name" "$tar" --change 'ENTRYPOINT ["/usr/bin/minio"]' \
    --change 'CMD ["server", "/data"]' --change 'VOLUME ["/data"]' --change 'EXPOSE 9000'
}

fake_gcs_image() {
  local name="$TIERD_FAKE_GCS_IMAGE" tar
  if present "$name"; then say "$name: present"; return; fi
  tar="$DOCKER_CACHE/rootfs/fake-gcs-server-${TIERD_FAKE_GCS_MODULE#*@}.tar"
  if [ ! -f "$tar" ]; then
    local bin root="$work/fake-gcs"
    bin="$(static_go fake-gcs-server "$TIERD_FAKE_GCS_MODULE")"
    mkdir -p "$root/bin" "$root/data" "$root/tmp" "$root/etc"
    chmod 1777 "$root/tmp"
    cp "$bin" "$root/bin/fake-gcs-server"
    # The upstream image adds Alpine's mailcap for content types; Debian's table is the same.
    [ ! -f /etc/mime.types ] || cp /etc/mime.types "$root/etc/"
    tar_root "$root" "$tar"
  fi
  # Like fsouza/fake-gcs-server: the entrypoint is the server; the command is its flags.
  import_image "$name" "$tar" --change 'ENTRYPOINT ["/bin/fake-gcs-server", "-data", "/data"]' \
    --change 'EXPOSE 4443'
}

# Azurite is a Node program: its root fs is this machine's node binary with the shared libraries
# it loads (Node 20, the runtime the native run uses too) and the pinned npm package, laid out
# as `npm install -g` lays it out in the upstream image (node:22-alpine).
azurite_image() {
  local name="$TIERD_AZURITE_IMAGE" tar node version="${TIERD_AZURITE_PACKAGE#*@}"
  if present "$name"; then say "$name: present"; return; fi
  node="$(command -v node)" || die "$name: no node on PATH to run Azurite"
  tar="$DOCKER_CACHE/rootfs/azurite-$version-node-$("$node" --version).tar"
  if [ ! -f "$tar" ]; then
    local modules="$CACHE/azurite/node_modules" root="$work/azurite"
    if ! grep -q "\"version\": \"$version\"" "$modules/azurite/package.json" 2>/dev/null; then
      say "$name: npm install $TIERD_AZURITE_PACKAGE…"
      npm install --no-audit --no-fund --prefix "$work/npm" "$TIERD_AZURITE_PACKAGE" >&2
      modules="$work/npm/node_modules"
    fi
    mkdir -p "$root/usr/local/bin" "$root/usr/local/lib" "$root/opt/azurite" "$root/data" \
      "$root/tmp"
    chmod 1777 "$root/tmp"
    copy_with_libs "$root" "$node" /usr/bin/env
    [ "$node" = /usr/local/bin/node ] || ln -s "$node" "$root/usr/local/bin/node"
    cp -a "$modules" "$root/usr/local/lib/node_modules"
    local bin
    for bin in azurite azurite-blob azurite-queue azurite-table; do
      local main
      main="$(cd "$root/usr/local/lib/node_modules/azurite" &&
        node -p "require('./package.json').bin['$bin']")"
      ln -s "../lib/node_modules/azurite/${main#./}" "$root/usr/local/bin/$bin"
    done
    tar_root "$root" "$tar"
  fi
  import_image "$name" "$tar" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_ENV=production' --change 'WORKDIR /opt/azurite' \
    --change 'VOLUME ["/data"]' --change 'EXPOSE 10000 10001 10002' \
    --change 'CMD ["azurite", "-l", "/data", "--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"]'
}

# The Dockerfile's default for ARG NAME.
dockerfile_arg() { sed -n "s/^ARG $1=//p" Dockerfile | head -n 1; }

# debian:SUITE-slim: debootstrap's minbase variant, apt lists, caches and docs dropped.
debian_rootfs_tar() {
  local suite="$1" tar="$DOCKER_CACHE/rootfs/debian-$1-minbase.tar"
  if [ ! -f "$tar" ]; then
    [ "$(id -u)" = 0 ] || die "debootstrap needs root to make debian:$suite-slim"
    command -v debootstrap >/dev/null 2>&1 || die "no debootstrap (apt-get install -y debootstrap)"
    say "debian:$suite-slim: debootstrap --variant=minbase $suite from $MIRROR…"
    local start=$SECONDS root="$work/debian-$suite"
    debootstrap --variant=minbase "$suite" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
      { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap $suite failed"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/*
    # Slim as the upstream -slim images are: no manuals, docs or translations, now or later.
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
      'path-exclude /usr/share/locale/*' >"$root/etc/dpkg/dpkg.cfg.d/docker-slim"
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
    tar_root "$root" "$tar"
    rm -rf "$root"
    say "debian:$suite-slim: root fs made in $((SECONDS - start)) s"
  fi
  echo "$tar"
}

base_images() {
  local base builder suite tar
  base="$(dockerfile_arg BASE_IMAGE)"
  builder="$(dockerfile_arg BUILDER_IMAGE)"
  [ -n "$base" ] && [ -n "$builder" ] || die "Dockerfile has no ARG BASE_IMAGE= / BUILDER_IMAGE="
  if present "$base"; then say "$base: present"; else
    [[ "$base" =~ ^debian:([a-z]+)-slim$ ]] || die "BASE_IMAGE $base is not debian:SUITE-slim"
    tar="$(debian_rootfs_tar "${BASH_REMATCH[1]}")"
    import_image "$base" "$tar" --change 'CMD ["bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  fi
  if present "$builder"; then say "$builder: present"; return; fi
  # node:MAJOR-SUITE-slim: that Debian with this machine's node and npm, as the upstream image
  # has them (/usr/local/bin, /usr/local/lib/node_modules/npm).
  [[ "$builder" =~ ^node:([0-9]+)-([a-z]+)-slim$ ]] ||
    die "BUILDER_IMAGE $builder is not node:MAJOR-SUITE-slim"
  local major="${BASH_REMATCH[1]}" node npm_dir
  suite="${BASH_REMATCH[2]}"
  node="$(command -v node)" || die "$builder: no node on PATH"
  [ "$("$node" -p 'process.versions.node.split(".")[0]')" = "$major" ] ||
    die "$builder: this machine's node is $("$node" --version), not $major.x"
  npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
  # This machine reaches the npm registry through TLS that only its own CA bundle verifies
  # (the host's node trusts it through NODE_EXTRA_CA_CERTS): the stand-in carries that bundle so
  # the Dockerfile's builder stage can fetch Deno, Bun and packages. The upstream image needs
  # no such thing on an ordinary network.
  local ca="${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" ca_tag=""
  local -a ca_env=()
  if [ -f "$ca" ]; then
    ca_tag="-ca$(sha256sum "$ca" | cut -c1-12)"
    ca_env=(--change "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt"
      --change "ENV DENO_CERT=/etc/ssl/certs/ca-certificates.crt"
      --change "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
  fi
  tar="$DOCKER_CACHE/rootfs/node-$("$node" --version)-$suite$ca_tag.tar"
  if [ ! -f "$tar" ]; then
    local root="$work/node-$suite"
    mkdir -p "$root"
    tar -C "$root" -xf "$(debian_rootfs_tar "$suite")"
    mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/node_modules"
    cp -L "$node" "$root/usr/local/bin/node"
    copy_with_libs "$root" "$node"
    cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
    if [ -n "$ca_tag" ]; then
      mkdir -p "$root/etc/ssl/certs"
      cp -L "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
    fi
    tar_root "$root" "$tar"
    rm -rf "$root"
  fi
  import_image "$builder" "$tar" --change 'CMD ["node"]' "${ca_env[@]}" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_VERSION=$("$node" -p process.versions.node)"
}

for group in $groups; do
  start=$SECONDS
  case "$group" in
  servers)
    minio_image
    fake_gcs_image
    azurite_image
    ;;
  bases) base_images ;;
  *) die "unknown group $group (servers, bases)" ;;
  esac
  say "$group: done in $((SECONDS - start)) s"
done
