#!/usr/bin/env bash
# Run the four benchmarks with their default settings, one after the other, and collect the tables.
#
#   recipes/benchmarks/run_all.sh                      # writes runs/benchmarks/<UTC date>.md
#   recipes/benchmarks/run_all.sh --threads 1          # extra flags go to every script
#   OUT=results.md recipes/benchmarks/run_all.sh
#
# Run it on an otherwise idle machine: the ratios are paired and interleaved, but a neighbour that takes
# cores away for seconds at a time still widens their spread (see the load average in each header).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-runs/benchmarks/$(date -u +%Y%m%d-%H%M).md}"
mkdir -p "$(dirname "$out")"
for script in train_throughput generation_throughput length_scaling link_implementations; do
    echo "== $script $*" >&2
    python "$here/$script.py" "$@" | tee -a "$out"
    echo | tee -a "$out"
done
echo "tables written to $out" >&2
