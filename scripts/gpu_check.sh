#!/usr/bin/env bash
# The GPU check, in one command, on a bare GPU machine (the CUDA toolkit, a
# C++ compiler and Python; no network): builds the library with its tests
# and benchmarks for the GPU present, runs the CUDA tests, compute-sanitizer
# (memcheck, racecheck, synccheck, initcheck) over the GPU test binaries, the
# Python package's GPU tests when PyTorch or CuPy can be imported, and the
# CUDA rows of mtsarray-bench; ends with one PASS/MISS line per benchmark
# target and a JSON summary. Exits non-zero when a stage fails (a target
# missed is reported, not a failure: the benchmark judges, the check runs).
#
# What the machine lacks comes from a bundle made beforehand on a machine
# with network access (`bash scripts/gpu_check.sh --bundle DIR`): the
# metatensor-core and CMake wheels for the GPU machine's Python, and a
# GoogleTest build (headers and static libraries).
#
# Usage:
#   bash scripts/gpu_check.sh --bundle DIR [PYTHON_VERSION]   (with network; default 3.12)
#   MTSARRAY_GPU_BUNDLE=DIR bash scripts/gpu_check.sh         (on the GPU machine)
# Environment:
#   MTSARRAY_GPU_BUNDLE            the bundle folder (optional where everything is installed)
#   MTSARRAY_GPU_CHECK_DIR         build and output folder (default <repo>/build-gpu-check)
#   MTSARRAY_CUDA_ARCHITECTURES    default "native" (the GPU present)
#   MTSARRAY_GPU_CHECK_SANITIZERS  0 skips compute-sanitizer (default 1)
#   MTSARRAY_JOBS                  build jobs (default: all cores)
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [[ "${1:-}" == "--bundle" ]]; then
    bundle="${2:?usage: gpu_check.sh --bundle DIR [PYTHON_VERSION]}"
    python_version="${3:-3.12}"
    mkdir -p "$bundle/wheels" "$bundle/gtest"
    log "wheels for Python $python_version (manylinux x86_64) into $bundle/wheels"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$python_version" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$bundle/wheels" "metatensor-core==$METATENSOR_VERSION" cmake
    log "GoogleTest (Debian's libgtest-dev) into $bundle/gtest"
    [[ -d /usr/include/gtest ]] || die "GoogleTest headers not found (apt-get install libgtest-dev)"
    mkdir -p "$bundle/gtest/include" "$bundle/gtest/lib"
    cp -r /usr/include/gtest /usr/include/gmock "$bundle/gtest/include/" 2>/dev/null || cp -r /usr/include/gtest "$bundle/gtest/include/"
    cp /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a "$bundle/gtest/lib/" 2>/dev/null ||
        cp /usr/lib/x86_64-linux-gnu/libgtest*.a "$bundle/gtest/lib/"
    log "bundle ready: $(du -sh "$bundle" | cut -f1) in $bundle"
    exit 0
fi

OUT="${MTSARRAY_GPU_CHECK_DIR:-$REPO_ROOT/build-gpu-check}"
BUILD="$OUT/build"
BUNDLE="${MTSARRAY_GPU_BUNDLE:-}"
JOBS="${MTSARRAY_JOBS:-$(nproc)}"
SITE="$OUT/site-packages"
mkdir -p "$OUT" "$SITE"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$SITE/bin:$PATH"

command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this is not a GPU machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

# ---- what the machine may lack: CMake, metatensor-core, GoogleTest --------------
pip_from_bundle() {
    [[ -n "$BUNDLE" ]] || die "$1 is missing and no MTSARRAY_GPU_BUNDLE was given (see --bundle)"
    python3 -m pip install --quiet --no-index --no-deps --find-links "$BUNDLE/wheels" --target "$SITE" "$1"
}
if ! command -v cmake >/dev/null; then
    pip_from_bundle cmake
fi
if ! python3 -c "import metatensor" 2>/dev/null; then
    pip_from_bundle "metatensor-core==$METATENSOR_VERSION"
fi
METATENSOR_PREFIX="$(python3 -c 'import metatensor; print(metatensor.utils.cmake_prefix_path)')"
METATENSOR_LIB="$(python3 -c 'import metatensor, os; print(os.path.join(os.path.dirname(metatensor.__file__), "lib"))')"
export LD_LIBRARY_PATH="$METATENSOR_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gtest_args=()
if [[ -n "$BUNDLE" && -d "$BUNDLE/gtest" ]]; then
    gtest_args=(-DGTEST_ROOT="$BUNDLE/gtest")
fi

declare -A STAGE_STATUS=()
stage() {
    local name="$1" start=$SECONDS
    shift
    if "$@"; then
        STAGE_STATUS["$name"]="ok ($((SECONDS - start))s)"
    else
        STAGE_STATUS["$name"]="FAILED ($((SECONDS - start))s)"
        FAILED_STAGES+=("$name")
    fi
}

build() {
    log "configure $BUILD (CUDA ${MTSARRAY_CUDA_ARCHITECTURES:-native})"
    cmake -S "$REPO_ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$METATENSOR_PREFIX" -DCMAKE_CUDA_FLAGS="-lineinfo" \
        -DMTSARRAY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${MTSARRAY_CUDA_ARCHITECTURES:-native}" \
        -DMTSARRAY_BUILD_TESTS=ON -DMTSARRAY_BUILD_BENCHMARKS=ON -DMTSARRAY_BUILD_EXAMPLES=ON \
        -DMTSARRAY_MPI=OFF "${gtest_args[@]}" >"$OUT/configure.log"
    cmake --build "$BUILD" -j"$JOBS" >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; return 1; }
}

gpu_tests() {
    log "ctest (every test; the GPU cases run on the GPU here)"
    ctest --test-dir "$BUILD" -j"$JOBS" --output-on-failure --timeout 300 >"$OUT/ctest.log" 2>&1
    local status=$?
    tail -n 5 "$OUT/ctest.log"
    # the GPU cases must have run: a device that was not seen skips them
    if grep -E "cuda.*\*\*\*Skipped" "$OUT/ctest.log" | grep -v -E "rocm|hip" | head -n 3 | grep -q .; then
        log "GPU test cases were skipped on a GPU machine:"
        grep -E "cuda.*\*\*\*Skipped" "$OUT/ctest.log" | head -n 5
        return 1
    fi
    return $status
}

sanitizers() {
    bash "$REPO_ROOT/scripts/gpu_sanitizers.sh" "$BUILD" >"$OUT/compute-sanitizer.log" 2>&1
    local status=$?
    tail -n 8 "$OUT/compute-sanitizer.log"
    return $status
}

python_gpu_tests() {
    if ! python3 -c "import torch" 2>/dev/null && ! python3 -c "import cupy" 2>/dev/null; then
        log "Python GPU tests skipped: neither PyTorch nor CuPy can be imported"
        return 0
    fi
    log "the mtsarray package (built here) and its GPU tests"
    python3 -m pip install --quiet --no-index --no-deps --no-build-isolation --target "$SITE" \
        -C "build-dir=$OUT/python-build" \
        -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=${MTSARRAY_CUDA_ARCHITECTURES:-native}" \
        "$REPO_ROOT/python" >"$OUT/python-build.log" 2>&1 || { tail -n 30 "$OUT/python-build.log"; return 1; }
    (cd "$REPO_ROOT/python" && python3 -m pytest tests -rs -q -p no:cacheprovider -k "gpu or cuda or torch or cupy") \
        >"$OUT/pytest.log" 2>&1
    local status=$?
    tail -n 5 "$OUT/pytest.log"
    return $status
}

benchmark() {
    log "mtsarray-bench --quick --filter cuda"
    "$BUILD/bench/mtsarray-bench" --quick --filter cuda --json "$OUT/bench-cuda.json" | tee "$OUT/bench.log"
}

stage "build" build
if [[ ${STAGE_STATUS[build]} == ok* ]]; then
    stage "GPU tests (ctest)" gpu_tests
    if [[ "${MTSARRAY_GPU_CHECK_SANITIZERS:-1}" != 0 ]]; then
        stage "compute-sanitizer" sanitizers
    fi
    stage "Python GPU tests" python_gpu_tests
    stage "benchmark (CUDA rows)" benchmark
fi

# ---- summary: every stage, every target, and the JSON ------------------------
log "summary ($(elapsed)) on $(head -n 1 "$OUT/gpu.txt")"
for name in "${!STAGE_STATUS[@]}"; do
    printf '  %-28s %s\n' "$name" "${STAGE_STATUS[$name]}"
done
python3 - "$OUT" "$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'EOF'
import json, os, sys
out, commit = sys.argv[1], sys.argv[2]
summary = {"commit": commit, "gpu": open(os.path.join(out, "gpu.txt")).read().strip(), "targets": []}
path = os.path.join(out, "bench-cuda.json")
if os.path.exists(path):
    for row in json.load(open(path))["rows"]:
        for target in row.get("targets", []):
            verdict = "PASS" if target["pass"] else "MISS"
            print(f"{verdict} {row['group']} {row['device']} {row['case']}: {target['name']}"
                  f" ({100 * (row.get('fraction_of_limit') or 0):.0f}% of {row.get('limit')})")
            summary["targets"].append({"row": f"{row['group']} {row['case']}", "target": target["name"],
                                       "pass": target["pass"], "fraction_of_limit": row.get("fraction_of_limit")})
else:
    print("no benchmark results: every target not measured")
with open(os.path.join(out, "gpu-check.json"), "w") as file:
    json.dump(summary, file, indent=1)
print(f"summary written to {os.path.join(out, 'gpu-check.json')}")
EOF
finish_stages "GPU check: every stage passed"
