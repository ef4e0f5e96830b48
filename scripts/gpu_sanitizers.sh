#!/usr/bin/env bash
# NVIDIA compute-sanitizer over the CUDA test binaries: memcheck (with leak
# checking), racecheck, synccheck and initcheck. Needs a GPU, a driver and
# compute-sanitizer (CUDA toolkit); fails when compute-sanitizer is missing
# or finds anything. Not part of CI (no GPU there): run it by hand on a GPU
# machine.
#
# Usage: bash scripts/gpu_sanitizers.sh [BUILD_DIR]
#   BUILD_DIR: a CUDA build with tests (default: <repo>/build-gpu-sanitizers,
#              configured and built here with -DMTSARRAY_CUDA=ON and -lineinfo)
# Environment:
#   COMPUTE_SANITIZER        path of compute-sanitizer (default: PATH, then
#                            $CUDA_HOME/bin, /usr/local/cuda/bin)
#   MTSARRAY_GPU_SANITIZER_TOOLS  tools to run (default: "memcheck racecheck synccheck initcheck")
#   MTSARRAY_GPU_SANITIZER_FILTER gtest filter (default: the GPU cases, '*cuda*:*Cuda*:*Gpu*')
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

find_compute_sanitizer() {
    local candidate
    for candidate in "${COMPUTE_SANITIZER:-}" "$(command -v compute-sanitizer 2>/dev/null || true)" \
        "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" \
        /usr/local/cuda/bin/compute-sanitizer \
        "$(dirname "$(find_nvcc)" 2>/dev/null)/compute-sanitizer"; do
        if [[ -n "$candidate" && -x "$candidate" ]]; then
            echo "$candidate"
            return
        fi
    done
}

SANITIZER="$(find_compute_sanitizer)"
[[ -n "$SANITIZER" ]] || die "compute-sanitizer not found (install the CUDA toolkit or set COMPUTE_SANITIZER)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L
else
    log "warning: nvidia-smi not found"
fi

BUILD="${1:-$REPO_ROOT/build-gpu-sanitizers}"
TOOLS="${MTSARRAY_GPU_SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}"
FILTER="${MTSARRAY_GPU_SANITIZER_FILTER:-*cuda*:*Cuda*:*Gpu*:*gpu*}"

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    mapfile -t cuda_args < <(MTSARRAY_CUDA=ON cuda_cmake_args)
    log "configure $BUILD (CUDA, -lineinfo)"
    cmake -S "$REPO_ROOT" -B "$BUILD" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_PREFIX_PATH="$(metatensor_cmake_prefix)" \
        -DCMAKE_CUDA_FLAGS="-lineinfo" \
        -DMTSARRAY_BUILD_TESTS=ON \
        -DMTSARRAY_BUILD_EXAMPLES=OFF \
        -DMTSARRAY_BUILD_BENCHMARKS=OFF \
        "${cuda_args[@]}"
fi
log "build $BUILD"
cmake --build "$BUILD" -j"$JOBS"

grep -q "MTSARRAY_HAS_CUDA 1" "$BUILD/include/mtsarray/config.h" ||
    die "$BUILD is not a CUDA build (include/mtsarray/config.h)"

# every GoogleTest binary of the build; the CPU-only cases are filtered out
mapfile -t binaries < <(find "$BUILD/tests" -maxdepth 1 -type f -executable -name 'mtsarray-*-tests' | sort)
[[ ${#binaries[@]} -gt 0 ]] || die "no test binaries in $BUILD/tests"

failures=()
for tool in $TOOLS; do
    extra=()
    case "$tool" in
        memcheck) extra=(--leak-check full) ;;
        racecheck) extra=(--racecheck-report all) ;;
        synccheck | initcheck) ;;
        *) die "unknown compute-sanitizer tool '$tool'" ;;
    esac
    for binary in "${binaries[@]}"; do
        log "compute-sanitizer --tool $tool $(basename "$binary")"
        # --error-exitcode: a finding fails even when the test itself passes;
        # stream-ordered allocations are tracked (cudaMallocAsync pools)
        if ! "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 97 \
            --target-processes all --print-limit 50 \
            "$binary" --gtest_filter="$FILTER" --gtest_brief=1; then
            failures+=("$tool: $(basename "$binary")")
        fi
    done
done

if [[ ${#failures[@]} -ne 0 ]]; then
    log "compute-sanitizer findings / failures:"
    printf '  - %s\n' "${failures[@]}"
    exit 1
fi
log "compute-sanitizer: ${TOOLS// /, } clean over ${#binaries[@]} test binaries"
