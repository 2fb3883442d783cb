#!/bin/sh
# tools/build-libtcc.sh — build a position-independent libtcc.so for kiln's
# tcc backend and print the prefix it is installed in.
#
# usage: tools/build-libtcc.sh [PREFIX]
#
# Why: Debian's libtcc-dev ships only a static, non-PIC libtcc.a, which
# cannot be linked into a dlopen'ed plugin ("relocation R_X86_64_PC32 ...
# recompile with -fPIC").  This script builds tcc's own shared library
# (configure --disable-static) from the Debian source package (the same
# version Debian ships, 0.9.27+git20200814, with Debian's patches) into
# PREFIX, then prints PREFIX on standard output (progress goes to stderr).
# Give it to configure: ./configure --with-tcc="$(tools/build-libtcc.sh)".
#
# PREFIX defaults to $KILN_LIBTCC_PREFIX, else /opt/kiln-libtcc when run as
# root, else $HOME/.cache/kiln-libtcc.  Idempotent: when PREFIX already
# holds lib/libtcc.so and include/libtcc.h, nothing is rebuilt.
#
# Source: $KILN_TCC_SRC (an unpacked tcc source tree) when set; otherwise
# `apt-get source tcc` in a temporary directory.  When run as root on a
# Debian system without deb-src entries, the script adds
# /etc/apt/sources.list.d/debsrc.sources (bookworm, main) and runs
# `apt-get update` first; it installs dpkg-dev if dpkg-source is missing.
set -eu

if [ "$(id -u)" = 0 ]; then def=/opt/kiln-libtcc; else def="${HOME:-/tmp}/.cache/kiln-libtcc"; fi
prefix=${1:-${KILN_LIBTCC_PREFIX:-$def}}
case $prefix in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac

log() { echo "build-libtcc: $*" >&2; }

if [ -f "$prefix/lib/libtcc.so" ] && [ -f "$prefix/include/libtcc.h" ]; then
  log "libtcc already built in $prefix"
  echo "$prefix"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-libtcc.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

if [ -n "${KILN_TCC_SRC:-}" ]; then
  log "using tcc source $KILN_TCC_SRC"
  cp -R "$KILN_TCC_SRC" "$work/src"
  src="$work/src"
else
  if [ "$(id -u)" = 0 ]; then
    if ! command -v dpkg-source >/dev/null 2>&1; then
      log "installing dpkg-dev (for apt-get source)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev >&2
    fi
    if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      log "adding a deb-src entry (/etc/apt/sources.list.d/debsrc.sources)"
      cat >/etc/apt/sources.list.d/debsrc.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
      apt-get update -qq >&2
    fi
  fi
  log "fetching the Debian source package of tcc"
  (cd "$work" && apt-get source -qq tcc >&2) || {
    log "apt-get source tcc failed: add a deb-src entry (see this script) or set KILN_TCC_SRC"
    exit 1
  }
  src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'tcc-*' | head -1)
  [ -n "$src" ] || { log "no tcc-* directory after apt-get source"; exit 1; }
fi

log "building libtcc.so into $prefix"
cd "$src"
# --disable-static: libtcc.so (PIC) instead of libtcc.a.  The rpath lets
# the tcc binary built alongside find its library; kiln uses only the
# library and libtcc.h.
./configure --prefix="$prefix" --disable-static >&2
make -j"$(nproc 2>/dev/null || echo 2)" libtcc.so >&2
mkdir -p "$prefix/lib" "$prefix/include"
cp libtcc.so "$prefix/lib/libtcc.so.tmp" && mv "$prefix/lib/libtcc.so.tmp" "$prefix/lib/libtcc.so"
cp libtcc.h "$prefix/include/libtcc.h"
cp VERSION "$prefix/VERSION" 2>/dev/null || true
log "done"
echo "$prefix"
