#!/usr/bin/env bash
# Installs a CRIU that works on this machine's kernel (at least 4.1) for readie's workers.
#
# On Debian 12 it builds Debian's own `criu` source package (the newest sid or trixie offers) with
# bookworm's build dependencies: the source is fetched with `apt-get source` through a private apt
# configuration (its own source list, index and cache), so the system's apt sources are never
# changed and nothing but bookworm's build dependencies is installed. On a Debian whose own
# package is new enough (13 and later) it installs that package instead. The binary ends up at
# PREFIX/sbin/criu, where `readie worker` looks for it. A second run that finds a working binary
# of at least the minimum version there does nothing. See docs/deploy.md.
set -euo pipefail

PREFIX=${READIE_CRIU_PREFIX:-/usr/local/lib/readie/criu}
MIN_VERSION=4.1
FORCE=0
# CRIU built from source needs these (bookworm's versions work; none is needed to run it but the
# runtime libraries they pull in).
BUILD_DEPENDENCIES=(
  gcc libc6-dev make pkgconf
  protobuf-compiler protobuf-c-compiler libprotobuf-dev libprotobuf-c-dev
  libnl-3-dev libcap-dev libnet1-dev libbsd-dev libaio-dev libnftables-dev uuid-dev
  dpkg-dev xz-utils
)
# Where Debian's newer source packages come from, newest first.
SOURCE_SUITES=(sid trixie)

usage() {
  cat <<EOF
usage: $0 [--prefix DIR] [--force]

Installs CRIU >= $MIN_VERSION at DIR/sbin/criu (default $PREFIX; or READIE_CRIU_PREFIX).
  --prefix DIR  where to install
  --force       rebuild even if a working criu is installed there
Runs as root on Debian 12 or later. Prints how long it took.
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) PREFIX=${1#--prefix=}; shift ;;
    --force) FORCE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-criu: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done

started=$SECONDS
say() { echo "install-criu: $*"; }
fail() { echo "install-criu: $*" >&2; exit 1; }
took() { echo "$((SECONDS - started)) s"; }

# The version a criu binary reports ("Version: 4.2.1"), or nothing.
criu_version() { "$1" --version 2>/dev/null | sed -n 's/^Version: *\([0-9][0-9.]*\).*/\1/p' | head -n1; }
# Whether version $1 is at least $2 (dpkg's ordering, which also knows Debian revisions).
at_least() { dpkg --compare-versions "$1" ge "$2"; }
# Whether $1 is a criu of at least MIN_VERSION that passes `criu check`.
works() {
  local version
  [ -x "$1" ] || return 1
  version=$(criu_version "$1")
  [ -n "$version" ] && at_least "$version" "$MIN_VERSION" && "$1" check >/dev/null 2>&1
}

BINARY="$PREFIX/sbin/criu"
if [ "$FORCE" = 0 ] && works "$BINARY"; then
  say "criu $(criu_version "$BINARY") at $BINARY works: nothing to do ($(took))"
  exit 0
fi

[ "$(id -u)" = 0 ] || fail "run as root: it installs packages and $BINARY"
# shellcheck disable=SC1091
[ -r /etc/os-release ] && . /etc/os-release
if [ "${ID:-}" != debian ] || ! command -v apt-get >/dev/null; then
  fail "this script knows Debian (12 or later); on ${PRETTY_NAME:-this system} install CRIU >= $MIN_VERSION \
(the distribution's package, or built from https://criu.org) and point the worker at it with --criu PATH"
fi

export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_update() { [ "$apt_updated" = 1 ] || { apt-get update -qq; apt_updated=1; }; }
install_missing() {
  local missing=() package
  for package in "$@"; do dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  apt_update
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
link_into_prefix() {
  mkdir -p "$PREFIX/sbin"
  ln -sfn "$1" "$BINARY.new"
  mv -Tf "$BINARY.new" "$BINARY"
}

# A distribution whose own package is new enough: use it.
candidate() { apt-cache policy criu 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)' || true; }
own=$(candidate)
if [ -z "$own" ]; then apt_update; own=$(candidate); fi
if [ -n "$own" ] && at_least "$own" "$MIN_VERSION"; then
  say "${PRETTY_NAME:-this Debian}'s own criu $own is new enough: installing that package"
  if ! dpkg --compare-versions "$(dpkg-query -W -f='${Version}' criu 2>/dev/null || echo 0)" eq "$own"; then
    apt_update
    apt-get install -y -qq --no-install-recommends criu >/dev/null
  fi
  works /usr/sbin/criu || fail "criu $own from the distribution fails 'criu check': $(/usr/sbin/criu check 2>&1 | tail -n1)"
  link_into_prefix /usr/sbin/criu
  say "criu $(criu_version "$BINARY") at $BINARY (linked to /usr/sbin/criu) in $(took)"
  exit 0
fi

install_missing "${BUILD_DEPENDENCIES[@]}"

work=$(mktemp -d "${TMPDIR:-/tmp}/readie-criu.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sources.list.d" "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
for suite in "${SOURCE_SUITES[@]}"; do
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
done >"$work/sources.list"
# A private apt: its own source list, index and cache; the system's configuration (proxies,
# keyrings) still applies. Nothing here is seen by the system's apt.
private_apt=(
  -o "Dir::Etc::sourcelist=$work/sources.list"
  -o "Dir::Etc::sourceparts=$work/sources.list.d"
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache"
  -o "APT::Sandbox::User=root"
)
say "fetching the index of Debian's criu source packages (${SOURCE_SUITES[*]})"
apt-get "${private_apt[@]}" update -qq >/dev/null
# Newest first, in dpkg's version order, at least MIN_VERSION.
versions=()
while read -r candidate_version; do
  at_least "$candidate_version" "$MIN_VERSION" || continue
  for ((i = 0; i <= ${#versions[@]}; i++)); do
    if [ "$i" = "${#versions[@]}" ] || dpkg --compare-versions "$candidate_version" gt "${versions[$i]}"; then
      versions=("${versions[@]:0:$i}" "$candidate_version" "${versions[@]:$i}")
      break
    fi
  done
done < <(apt-cache "${private_apt[@]}" showsrc criu 2>/dev/null | sed -n 's/^Version: *//p' | sort -u)
[ ${#versions[@]} -gt 0 ] || fail "Debian offers no criu source package of at least $MIN_VERSION in ${SOURCE_SUITES[*]}"

# The newest version whose upstream tarball can be fetched (apt checks each file against the
# signed index). Debian's packaging tarball is applied when it can be fetched too.
source_dir=""
for version in "${versions[@]}"; do
  upstream=${version%-*}
  upstream=${upstream#*:}
  rm -rf "$work/src" && mkdir -p "$work/src"
  (cd "$work/src" && apt-get "${private_apt[@]}" source --download-only -qq "criu=$version" >/dev/null 2>&1) || true
  orig=$(find "$work/src" -maxdepth 1 -name "criu_${upstream}.orig.tar.*" | head -n1)
  [ -n "$orig" ] || { say "criu $version: its source could not be fetched; trying an older one"; continue; }
  dsc=$(find "$work/src" -maxdepth 1 -name "criu_*.dsc" | head -n1)
  packaging=$(find "$work/src" -maxdepth 1 -name "criu_*.debian.tar.*" | head -n1)
  if [ -n "$dsc" ] && [ -n "$packaging" ] &&
    (cd "$work/src" && dpkg-source --no-check -x "$(basename "$dsc")" build >/dev/null 2>&1); then
    say "building Debian's criu $version (with Debian's patches)"
  else
    rm -rf "$work/src/build" && mkdir -p "$work/src/build"
    tar -C "$work/src/build" --strip-components=1 -xf "$orig"
    say "building Debian's criu $version from its upstream tarball (Debian's packaging could not be fetched)"
  fi
  source_dir="$work/src/build"
  break
done
[ -n "$source_dir" ] || fail "none of criu ${versions[*]} could be fetched from Debian"

# CRIU caches what it learned about the kernel in RUNDIR/criu.kdat, only on a tmpfs (else every
# restore probes the kernel again, about 40 ms). /run is root's; without a tmpfs /run, /dev/shm.
rundir=/run
[ "$(stat -f -c %T /run 2>/dev/null)" = tmpfs ] || rundir=/dev/shm
build_log="$work/build.log"
if ! make -C "$source_dir" -j"$(nproc)" criu RUNDIR="$rundir" NO_GNUTLS=1 WERROR=0 >"$build_log" 2>&1; then
  tail -n 20 "$build_log" >&2
  fail "building criu $version failed (the last lines of the build are above)"
fi
built="$source_dir/criu/criu"
if ! check=$("$built" check 2>&1); then
  fail "the criu $version just built fails 'criu check' on this kernel: $(echo "$check" | tail -n 3 | tr '\n' ' ')"
fi
mkdir -p "$PREFIX/sbin"
install -m 0755 "$built" "$BINARY.new"
mv -f "$BINARY.new" "$BINARY"
cat >"$PREFIX/BUILD-INFO" <<EOF
criu $(criu_version "$BINARY") from Debian's source package criu $version, built $(date -u +%Y-%m-%dT%H:%M:%SZ)
kernel-feature cache: $rundir/criu.kdat
EOF
say "criu $(criu_version "$BINARY") installed at $BINARY in $(took)"
