#!/usr/bin/env bash
# Profiles shale-bench on shale with perf and draws a flamegraph of every thread.
#
#   scripts/profile.sh [OUT_DIR] [-- SHALE_BENCH_FLAGS...]
#
# For example, the scans right after a random batch load, with the load itself left out of the
# samples (perf starts recording PERF_DELAY_MS after the benchmark starts):
#
#   PERF_DELAY_MS=3000 scripts/profile.sh target/profile -- \
#       --benchmarks=fillrandbatch,readrandom,readseq,readreverse,readseq,readreverse
#
# Writes into OUT_DIR (default target/profile):
#   perf.data        the samples, with DWARF call graphs (open with `perf report -i`)
#   flamegraph.svg   all threads, one tower per thread name (open in a browser)
#   top.txt          the hottest functions per thread, self time, no call graph (report.txt:
#                    all of them)
#   bench.txt        the benchmark's own output
#
# Flags after `--` go to shale-bench as they are; `--engine=shale` and a 4 MB cache are
# prepended unless the flags give `--engine`/`--engines` or `--cache_size`. PERF_FREQ sets the
# sampling rate (default 999 Hz).
#
# Installs what is missing: Debian's linux-perf (as root, or with sudo) and inferno (the
# flamegraph tools, from crates.io, built into target/tools). Samples come from the
# `cpu-clock` software event, which virtual machines without hardware counters also have.
# Profiles explain figures; they never stand in for them: speed claims come from the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/profile
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  out=$1
  shift
fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then
  shift
fi
mkdir -p "$out"

if ! command -v perf >/dev/null 2>&1; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
  fi
  echo "profile: installing linux-perf"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends linux-perf
fi

tools=target/tools
inferno_version=0.12.8
if [ ! -x "$tools/bin/inferno-flamegraph" ]; then
  echo "profile: building inferno $inferno_version into $tools"
  cargo install -q inferno --version "$inferno_version" --locked --root "$tools"
fi

cargo build -q --release -p shale-bench
bin=target/release/shale-bench

record=(perf record -q -e cpu-clock -F "${PERF_FREQ:-999}" --call-graph dwarf,16384
  -o "$out/perf.data")
if [ -n "${PERF_DELAY_MS:-}" ]; then
  record+=(-D "$PERF_DELAY_MS")
fi
echo "profile: recording into $out/perf.data"
defaults=()
case " $* " in
  *" --engine"*) ;;
  *) defaults+=(--engine=shale) ;;
esac
case " $* " in
  *" --cache_size"*) ;;
  *) defaults+=(--cache_size=4194304) ;;
esac
"${record[@]}" -- "$bin" "${defaults[@]}" "$@" | tee "$out/bench.txt"

echo "profile: drawing $out/flamegraph.svg"
perf script -i "$out/perf.data" 2>/dev/null |
  "$tools/bin/inferno-collapse-perf" --all >"$out/folded.txt"
if [ ! -s "$out/folded.txt" ]; then
  echo "profile: no samples recorded (did the run end before PERF_DELAY_MS?)" >&2
  exit 1
fi
"$tools/bin/inferno-flamegraph" --title "shale-bench $*" <"$out/folded.txt" >"$out/flamegraph.svg"

# Whole, then cut from the file: `head` on the pipe would close it early, and `pipefail` would
# count perf's broken pipe as a failure.
perf report -i "$out/perf.data" --no-children --sort comm,sym -g none --stdio 2>/dev/null |
  grep -v -e '^#' -e '^$' >"$out/report.txt"
head -80 "$out/report.txt" >"$out/top.txt"
echo "profile: hottest functions (self time, by thread):"
head -25 "$out/top.txt"
echo "profile: wrote $out/flamegraph.svg, $out/top.txt and $out/perf.data"
