#!/usr/bin/env bash
# Reliability checks, CPU-only, with clang:
#   1. ASan + UBSan build (with the test hooks and the fuzzers
#      compiled in): the ctest suite with leak detection, which includes
#      the fault injection sweep and the exported-symbols check (not the
#      one_device. registrations, which the plain ctest runs);
#   2. ThreadSanitizer build: the concurrency tests and the GPU tests on the
#      simulated runtime (ctest -R 'concurrency|SimulatedStreams|StreamOrdering|NoHostBlock|sim0');
#   3. a short fixed-seed libFuzzer run of every fuzz target (scripts/fuzz.sh).
# Any sanitizer report, leak, test failure or fuzzer finding makes the script
# exit non-zero; every stage runs and the failures are listed at the end.
#
# Usage: bash scripts/sanitizers.sh
# Environment (all optional):
#   MTSARRAY_SANITIZER_CXX  C++ compiler (default: clang++; libFuzzer needs clang)
#   MTSARRAY_SANITIZER_CC   C compiler (default: clang)
#   MTSARRAY_ASAN_BUILD_DIR (default: <repo>/build-asan)
#   MTSARRAY_TSAN_BUILD_DIR (default: <repo>/build-tsan)
#   MTSARRAY_FUZZ_RUNS      runs per fuzz target (default 20000), see scripts/fuzz.sh
#   MTSARRAY_JOBS           parallel build / test jobs (default 2)
# The CUDA backend stays off: ASan with the CUDA runtime needs
# ASAN_OPTIONS=protect_shadow_gap=0 and a GPU to say anything; the GPU side
# has scripts/gpu_sanitizers.sh (compute-sanitizer) instead. The GPU backend
# itself (GpuBackend) runs in both stages on the simulated CUDA runtime of
# tests/support/simulated_runtime.hpp.
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CXX_COMPILER="${MTSARRAY_SANITIZER_CXX:-clang++}"
C_COMPILER="${MTSARRAY_SANITIZER_CC:-clang}"
ASAN_BUILD="${MTSARRAY_ASAN_BUILD_DIR:-$REPO_ROOT/build-asan}"
TSAN_BUILD="${MTSARRAY_TSAN_BUILD_DIR:-$REPO_ROOT/build-tsan}"
SUPPRESSIONS="$REPO_ROOT/tests/sanitizers"

command -v "$CXX_COMPILER" >/dev/null || die "$CXX_COMPILER not found (apt-get install clang)"
command -v "$C_COMPILER" >/dev/null || die "$C_COMPILER not found (apt-get install clang)"

# configure_sanitized BUILD_DIR SANITIZER [extra cmake args...]
configure_sanitized() {
    local build_dir="$1" sanitizer="$2"
    shift 2
    log "configure $build_dir (MTSARRAY_SANITIZE=$sanitizer, $CXX_COMPILER)"
    cmake -S "$REPO_ROOT" -B "$build_dir" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_COMPILER="$CXX_COMPILER" \
        -DCMAKE_C_COMPILER="$C_COMPILER" \
        -DCMAKE_PREFIX_PATH="$(metatensor_cmake_prefix)" \
        -DMTSARRAY_CUDA=OFF \
        -DMTSARRAY_HIP=OFF \
        -DMTSARRAY_BUILD_TESTS=ON \
        -DMTSARRAY_BUILD_EXAMPLES=OFF \
        -DMTSARRAY_BUILD_BENCHMARKS=OFF \
        -DMTSARRAY_SANITIZE="$sanitizer" \
        "$@"
}

asan_suite() {
    configure_sanitized "$ASAN_BUILD" address \
        -DMTSARRAY_TEST_HOOKS=ON -DMTSARRAY_BUILD_FUZZERS=ON
    log "build $ASAN_BUILD (-j$JOBS)"
    cmake --build "$ASAN_BUILD" -j"$JOBS"
    # not the one_device. registrations (scripts/common.sh): under ASan they
    # were 292 of the 712 s of test time
    log "ctest under ASan + UBSan, leak detection on (not the one_device. registrations)"
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1" \
    LSAN_OPTIONS="suppressions=$SUPPRESSIONS/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        ctest --test-dir "$ASAN_BUILD" --output-on-failure -j"$JOBS" -E "$ONE_DEVICE_REGISTRATIONS"
    # the figures of the fault injection sweep, for the log
    ASAN_OPTIONS="detect_leaks=1" "$ASAN_BUILD/tests/mtsarray-fault-injection-tests" 2>&1 |
        grep -E '^\[fault injection\]|^\[  (PASSED|FAILED)'
}

tsan_suite() {
    configure_sanitized "$TSAN_BUILD" thread -DMTSARRAY_TEST_HOOKS=ON
    log "build $TSAN_BUILD (-j$JOBS)"
    cmake --build "$TSAN_BUILD" -j"$JOBS" --target mtsarray-concurrency-tests \
        mtsarray-simulated-stream-tests mtsarray-gpu-stream-tests mtsarray-contract-tests
    # the concurrency tests, the GPU stream tests on the simulation and the
    # contract matrix on the simulated device (GpuBackend's threads, the
    # deferred work, the stream workers), each case bounded in time; not the
    # one_device. registrations, the same cases with the second simulated
    # device hidden (the ASan stage runs them): under TSan they ran the same
    # threads again: 626 of the 1339 s of test time of the stage
    log "ctest -R 'concurrency|SimulatedStreams|StreamOrdering|NoHostBlock|sim0' under TSan"
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPPRESSIONS/tsan.supp" \
    MTSARRAY_SIM_MAX_DELAY_US=20 \
        ctest --test-dir "$TSAN_BUILD" --output-on-failure -j"$JOBS" --timeout 300 \
            -R 'concurrency|SimulatedStreams|StreamOrdering|NoHostBlock|sim0' -E "$ONE_DEVICE_REGISTRATIONS" --no-tests=error
}

fuzz_short() {
    MTSARRAY_FUZZ_RUNS="${MTSARRAY_FUZZ_RUNS:-20000}" MTSARRAY_FUZZ_SEED=1 \
        bash "$REPO_ROOT/scripts/fuzz.sh" "$ASAN_BUILD"
}

run_stage "ASan + UBSan: ctest (fault injection, exported symbols included)" asan_suite
run_stage "TSan: ctest -R 'concurrency|SimulatedStreams|StreamOrdering|NoHostBlock|sim0'" tsan_suite
if [[ -x "$ASAN_BUILD/tests/fuzz/mtsarray-fuzz-move-data" ]]; then
    run_stage "libFuzzer: fixed-seed runs" fuzz_short
else
    FAILED_STAGES+=("libFuzzer: the fuzz targets were not built")
fi

finish_stages "sanitizers: all clean"
