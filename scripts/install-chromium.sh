#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium so the report rendering test can take a
# screenshot of `shale-bench --report` output. Optional: that test prints a skip message and
# passes when /usr/bin/chromium is absent, so CI does not depend on this script.
#
# Idempotent; runs as root without prompts, uses sudo otherwise.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "install-chromium: /usr/bin/chromium is present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
# fonts-dejavu-core gives the page readable glyphs in a bare container.
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
echo "install-chromium: done"
