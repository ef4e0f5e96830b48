#!/usr/bin/env bash
# The main command: set up, build (Release), run the C example, then the
# benchmarks in quick mode (CPU rows always; CUDA rows when a GPU is present).
#
# Usage: bash scripts/run.sh [extra mtsarray-bench arguments, e.g. --full]
#   (see scripts/common.sh for env knobs)
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$REPO_ROOT/scripts/setup.sh"
configure_and_build "$BUILD_DIR"

log "example: examples/md_positions.c"
"$BUILD_DIR/examples/md_positions"

bench_args=("$@")
if [[ ${#bench_args[@]} -eq 0 ]]; then
    bench_args=(--quick)
fi
log "benchmark: mtsarray-bench ${bench_args[*]} --json $BUILD_DIR/bench.json"
"$BUILD_DIR/bench/mtsarray-bench" "${bench_args[@]}" --json "$BUILD_DIR/bench.json"
log "done ($(elapsed)); results in $BUILD_DIR/bench.json"
