#!/usr/bin/env bash
# Rebuilds Debian's own LevelDB and RocksDB packages with -DNDEBUG added, so the baselines
# run without the assertions Debian's builds leave on (see shared/BASELINES.md), and unpacks
# the shared libraries into a private prefix. The system libraries are left untouched.
#
# Usage: scripts/build-ndebug-baselines.sh [leveldb] [rocksdb]   (default: both)
#        PREFIX=/opt/shale-baselines/ndebug (default) WORK=/var/tmp/shale-baselines-src
# Then:  LD_LIBRARY_PATH=$PREFIX/lib target/release/shale-bench --engines=...
#        (the header's "Library:" line shows which build ran; say so in every table)
#
# RocksDB takes a long time to build on 2 cores (expect the better part of an hour): keep
# this out of CI. Idempotent: a library already built into PREFIX is not rebuilt.
# Runs as root without prompts; uses sudo for apt otherwise.
set -euo pipefail

PREFIX=${PREFIX:-/opt/shale-baselines/ndebug}
WORK=${WORK:-/var/tmp/shale-baselines-src}
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(leveldb rocksdb)

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive

for p in "${packages[@]}"; do
  case "$p" in
    leveldb|rocksdb) ;;
    *) echo "build-ndebug-baselines: unknown package '$p' (leveldb or rocksdb)" >&2; exit 2 ;;
  esac
done

# Source packages need a deb-src entry; add one beside Debian's own list if none exists.
if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "build-ndebug-baselines: adding a deb-src entry for bookworm"
  "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/shale-bench-src.sources >/dev/null <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  "${sudo_cmd[@]}" apt-get update -q
fi

"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends dpkg-dev devscripts equivs

mkdir -p "$WORK" "$PREFIX/lib"
for p in "${packages[@]}"; do
  if ls "$PREFIX/lib/lib$p.so."* >/dev/null 2>&1; then
    echo "build-ndebug-baselines: $p already built in $PREFIX/lib"
    continue
  fi
  echo "build-ndebug-baselines: building $p with -DNDEBUG"
  "${sudo_cmd[@]}" apt-get build-dep -y -q "$p"
  rm -rf "${WORK:?}/$p"
  mkdir -p "$WORK/$p"
  (
    cd "$WORK/$p"
    apt-get source -q "$p"
    src=$(find . -mindepth 1 -maxdepth 1 -type d | head -n 1)
    cd "$src"
    # Debian's flags plus -DNDEBUG; skip the test suites (they take longer than the build).
    DEB_CFLAGS_APPEND=-DNDEBUG DEB_CXXFLAGS_APPEND=-DNDEBUG \
      DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
      dpkg-buildpackage -b -uc -us
  )
  # The runtime package holds the shared library (libleveldb1d, librocksdb7.8).
  deb=$(find "$WORK/$p" -maxdepth 1 -name "lib${p}[0-9]*_*.deb" ! -name '*-dev_*' ! -name '*dbgsym*' | head -n 1)
  if [ -z "$deb" ]; then
    echo "build-ndebug-baselines: no runtime .deb for $p in $WORK/$p" >&2
    exit 1
  fi
  unpack=$(mktemp -d)
  dpkg-deb -x "$deb" "$unpack"
  cp -a "$unpack"/usr/lib/*/lib"$p".so.* "$PREFIX/lib/"
  rm -rf "$unpack"
  echo "build-ndebug-baselines: $p -> $PREFIX/lib"
done

echo "build-ndebug-baselines: done; run with LD_LIBRARY_PATH=$PREFIX/lib"
