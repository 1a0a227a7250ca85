#!/usr/bin/env bash
# Installs the Debian development packages that `shale-bench --features baselines` links:
# LevelDB, RocksDB, LMDB and SQLite (plus snappy, which LevelDB and RocksDB compress with, and
# pkg-config, which the SQLite binding uses to find the system library).
#
# Idempotent: packages already installed are left alone, and apt is only consulted when
# something is missing. Runs as root without prompts; uses sudo when run as another user.
set -euo pipefail

packages=(
  libleveldb-dev
  librocksdb-dev
  liblmdb-dev
  libsqlite3-dev
  libsnappy-dev
  pkg-config
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-baselines: all packages present: ${packages[*]}"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-baselines: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-baselines: done"
