#!/usr/bin/env bash
# The main command: set up what it needs, build the library, the C example
# and the benchmark (Release; not the test suite: scripts/test.sh builds and
# runs that), run the example, then the benchmarks in quick mode (CPU rows
# always; CUDA rows when a GPU is present), and say what the figures mean.
#
# Usage: bash scripts/run.sh [extra mtsarray-bench arguments, e.g. --full]
#   (see scripts/common.sh for env knobs)
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The CUDA backend is compiled whenever nvcc is there, GPU or not (the same
# binary serves both), but for one architecture: the GPU's own, or sm_90
# without one. test.sh builds the project's full list.
if [[ -z "${MTSARRAY_CUDA_ARCHITECTURES:-}" && -n "$(find_nvcc)" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        export MTSARRAY_CUDA_ARCHITECTURES=native
    else
        export MTSARRAY_CUDA_ARCHITECTURES=90-real
    fi
fi

cpus="$(nproc 2>/dev/null || echo 1)"
first_build="no"
[[ -f "$BUILD_DIR/bench/mtsarray-bench" ]] || first_build="yes"
cuda_text="without the CUDA backend (no nvcc)"
[[ -z "$(find_nvcc)" ]] || cuda_text="with the CUDA backend for ${MTSARRAY_CUDA_ARCHITECTURES}"
log "run.sh: what it does here ($cpus CPUs)"
cat <<EOF
  1. set up: system packages and the venv $VENV_DIR (checked; installed when missing)
  2. build the library, examples/md_positions.c and the benchmark, $cuda_text
     ($( [[ $first_build == yes ]] && echo "first build: about 10-15 minutes on 2 cores, 2-4 with a warm ccache" ||
        echo "built before: seconds, unless sources changed" ))
  3. run the example (a second), then mtsarray-bench ${*:---quick} (about 1-2 minutes on 2 cores)
  4. say what the figures mean, and draw the plots into $BUILD_DIR/bench-plots
  The test suite is not built: scripts/test.sh does that (about 45 minutes on 2 cores).
EOF

bash "$REPO_ROOT/scripts/setup.sh" --for-run
BUILD_TARGETS=(mtsarray md_positions mtsarray-bench)
configure_and_build "$BUILD_DIR"

log "example: examples/md_positions.c"
"$BUILD_DIR/examples/md_positions"

bench_args=("$@")
if [[ ${#bench_args[@]} -eq 0 ]]; then
    bench_args=(--quick)
fi
load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)"
if awk -v load="$load" -v cpus="$cpus" 'BEGIN { exit !(load > cpus) }'; then
    log "WARNING: the machine is busy (load average $load > $cpus CPUs): the figures will be noisy"
    echo "    and some rows may show impossible ones (flagged UNRELIABLE); rerun when it is quiet."
fi
log "benchmark: mtsarray-bench ${bench_args[*]} --json $BUILD_DIR/bench.json"
"$BUILD_DIR/bench/mtsarray-bench" "${bench_args[@]}" --json "$BUILD_DIR/bench.json"

log "what the figures mean"
"$VENV_PYTHON" "$REPO_ROOT/bench/summary.py" "$BUILD_DIR/bench.json" --load "$load"
if "$VENV_PYTHON" -c "import matplotlib" >/dev/null 2>&1; then
    "$VENV_PYTHON" "$REPO_ROOT/bench/plot_results.py" "$BUILD_DIR/bench.json" --out "$BUILD_DIR/bench-plots" >/dev/null &&
        echo "plots: $BUILD_DIR/bench-plots/*.png"
fi
log "done ($(elapsed)); results in $BUILD_DIR/bench.json; method and other machines' results: bench/README.md"
