#!/usr/bin/env bash
# Benchmark smoke test for CI: runs every shale-bench benchmark on shale with a small --num
# (debug build, a few seconds) and checks that each result line has db_bench's shape and that
# the JSON file was written. Figures from this run mean nothing; it checks the tool works.
#
# Set SMOKE_ENGINES=shale,leveldb,... to include baselines (needs scripts/install-baselines.sh
# and builds with --features baselines).
set -euo pipefail
cd "$(dirname "$0")/.."

engines=${SMOKE_ENGINES:-shale}
features=()
if [ "$engines" != "shale" ]; then
  features=(--features baselines)
fi
benchmarks="fillseq,readrandom,readmissing,readhot,seekrandom,readseq,readreverse,overwrite,\
readwhilewriting,updaterandom,mergerandom,compact,stats,fillsync,fillbatch,fillrandbatch,\
deleteseq,fillrandom,deleterandom,fill100K,crc32c,snappycomp,snappyuncomp,fdatasync,influx"
# Result lines (influx prints six steps) plus skipped/unsupported notes: 24 + 6 = 30 lines
# for each engine, stats printing a bare "stats :" line.
expected_per_engine=30

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cargo build -q -p shale-bench "${features[@]}"
bin=target/debug/shale-bench
"$bin" --engines="$engines" --num=2000 --benchmarks="$benchmarks" --merge_operator=uint64add \
  --histogram --json="$out/run.json" --report="$out/report.html" | tee "$out/stdout.txt"

pattern='^[^ ]+ +: +[0-9]+\.[0-9]{3} micros/op;( +[0-9]+\.[0-9] MB/s)?( .*)?$'
note='^[^ ]+ +: (not supported|not run|skipping)'
n_engines=$(tr ',' '\n' <<<"$engines" | grep -c .)
lines=$(grep -cE "$pattern|$note|^stats +:$" "$out/stdout.txt" || true)
expected=$((expected_per_engine * n_engines))
if [ "$lines" -ne "$expected" ]; then
  echo "bench-smoke: expected $expected result lines, found $lines" >&2
  exit 1
fi
if grep -qE '^error +:' "$out/stdout.txt"; then
  echo "bench-smoke: an engine failed" >&2
  exit 1
fi
for f in run.json report.html; do
  [ -s "$out/$f" ] || { echo "bench-smoke: $f was not written" >&2; exit 1; }
done
echo "bench-smoke: $lines result lines from $n_engines engine(s) look like db_bench output"
