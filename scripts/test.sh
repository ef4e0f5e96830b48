#!/usr/bin/env bash
# The test command: set up, build (Release; CUDA when nvcc is found), run the
# GoogleTest suite, build the Python package's sdist and wheel and run its
# tests, build and check the documentation, install, build and run the
# find_package consumer and the examples against the installation, then the
# HIP build when available.
#
# Usage: bash scripts/test.sh          (see scripts/common.sh for env knobs)
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

run_tests() {
    log "ctest ($BUILD_DIR)"
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS"
}

# The mtsarray Python package (python/): `python -m build --sdist` makes the
# sdist (the C++ sources inside) in a fresh isolated environment; then one
# wheel. With the CUDA backend in the build above (nvcc found), the wheel is
# scripts/python_wheel.sh's: the extension compiled on the libmtsarray built
# above (no second compilation of the library, its CUDA architectures
# included), repaired by auditwheel to a manylinux tag. Without it (no nvcc),
# the wheel is built from the sdist, sources and all, as a user's pip would.
# The wheel is then installed alone in a fresh venv, where the Python quick
# start must run on the CPU and the CUDA backend must say why it is
# unavailable (or be available, on a GPU machine); and into the project's
# venv for the tests below. scripts/gpu_check.sh --pack uses the same script
# (and this very wheel, for the same Python).
PYTHON_DIST_DIR="$BUILD_DIR/python-dist"

build_python_package() {
    rm -rf "$PYTHON_DIST_DIR"
    log "python -m build --sdist python"
    "$VENV_PYTHON" -m build --sdist --outdir "$PYTHON_DIST_DIR" "$REPO_ROOT/python"
    if grep -q "MTSARRAY_HAS_CUDA 1" "$BUILD_DIR/include/mtsarray/config.h"; then
        log "the CUDA wheel: scripts/python_wheel.sh $BUILD_DIR (the library built above)"
        bash "$REPO_ROOT/scripts/python_wheel.sh" "$BUILD_DIR" "$VENV_PYTHON" "$PYTHON_DIST_DIR"
    else
        local -a sdists=("$PYTHON_DIST_DIR"/mtsarray-*.tar.gz)
        log "no CUDA backend here: the wheel from the sdist $(basename "${sdists[0]}") (MTSARRAY_CUDA=${MTSARRAY_CUDA:-auto})"
        "$VENV_PYTHON" -m build --wheel --outdir "$PYTHON_DIST_DIR" "${sdists[0]}"
    fi
    local wheel
    wheel="$(python_wheel)"
    log "a fresh venv with the wheel alone: $(basename "$wheel")"
    local fresh="$BUILD_DIR/python-fresh-venv"
    rm -rf "$fresh"
    "$VENV_PYTHON" -m venv "$fresh"
    "$fresh/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
    # from / so that nothing of the repository is importable but the wheel's
    (cd / && "$fresh/bin/python" "$REPO_ROOT/examples/python/quick_start.py")
    (cd / && "$fresh/bin/python" - "$BUILD_DIR/include/mtsarray/config.h" <<'PY')
import sys
import mtsarray

built_with_cuda = "MTSARRAY_HAS_CUDA 1" in open(sys.argv[1]).read()
available = mtsarray.backend_available("cuda")
reason = mtsarray.backend_unavailable_reason("cuda")
print(f"backend_available('cuda'): {available}" + ("" if available else f" ({reason})"))
if not available and not reason:
    sys.exit("the CUDA backend is unavailable and says no reason")
if built_with_cuda and "without CUDA support" in reason:
    sys.exit("the wheel was to have the CUDA backend inside: " + reason)
PY
    rm -rf "$fresh"
}

python_wheel() {
    local -a wheels=("$PYTHON_DIST_DIR"/mtsarray-*.whl)
    [[ ${#wheels[@]} -eq 1 && -f "${wheels[0]}" ]] || die "expected one wheel in $PYTHON_DIST_DIR"
    echo "${wheels[0]}"
}

# The wheel built above, installed into the venv (no second build of the
# library), then its tests (python/tests: NumPy and metatensor interop, GPU
# cases that skip without a GPU, the Python examples and benchmarks), the
# committed type stub against the extension's, and the type check of the
# examples.
test_python_package() {
    log "pip install $(basename "$(python_wheel)") into $VENV_DIR"
    "$VENV_PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall \
        "$(python_wheel)"
    log "pytest python/tests"
    # the venv has PyTorch and metatensor-torch (setup.sh): their cases must
    # run, on the CPU, instead of skipping (the other Pythons' venvs have neither)
    MTSARRAY_PYTHON_TESTS_REQUIRE=torch,metatensor.torch run_python_tests "$VENV_PYTHON"
    bash "$REPO_ROOT/scripts/python_stubs.sh" --check
    log "mypy examples/python (the installed package's type hints)"
    (cd "$REPO_ROOT" && "$VENV_DIR/bin/mypy" --config-file python/pyproject.toml examples/python)
}

# run_python_tests PYTHON [pytest arguments...]: python/tests against the
# package installed for PYTHON. Under CI a missing requirement fails the
# tests instead of skipping them.
run_python_tests() {
    local python="$1"
    shift
    if [[ "${CI:-}" == true ]]; then
        export MTSARRAY_PYTHON_TESTS_REQUIRED=1
    fi
    (cd "$REPO_ROOT/python" && "$python" -m pytest tests -rs -p no:cacheprovider "$@")
}

# The package on the other Pythons of MTSARRAY_EXTRA_PYTHONS (default 3.13,
# which CI runs beside the venv's Python; metatensor-core 0.2 needs 3.10 or
# newer): for each, a venv of its own in the build folder with
# PYTHON_PACKAGES, the package built once, without the CUDA backend (the same
# C++ as the venv's package, which builds and tests CUDA), and its tests,
# but the mpi4py example's (mpi4py is built for the venv's Python only).
test_python_package_on_other_pythons() {
    local version python folder
    for version in ${MTSARRAY_EXTRA_PYTHONS-3.13}; do
        python="$(find_python "$version")"
        if [[ -z "$python" ]]; then
            [[ "${CI:-}" != true ]] || die "Python $version not found (pyenv install $version)"
            log "Python $version not found: its package tests are skipped"
            continue
        fi
        folder="$BUILD_DIR/python-$version"
        if [[ ! -x "$folder/venv/bin/python" ]]; then
            "$python" -m venv "$folder/venv"
        fi
        log "Python $version ($python): pip install ${PYTHON_PACKAGES[*]}"
        "$folder/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PYTHON_PACKAGES[@]}"
        log "Python $version: pip install ./python (MTSARRAY_CUDA=OFF, build folder $folder/build)"
        MTSARRAY_CUDA=OFF CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$folder/venv/bin/python" -m pip install --quiet \
            --disable-pip-version-check --no-build-isolation --no-deps --config-settings="build-dir=$folder/build" \
            "$REPO_ROOT/python"
        log "Python $version: pytest python/tests"
        run_python_tests "$folder/venv/bin/python" -k "not mpi_halo_example"
    done
}

# The C quick start page of the built site (the documentation stage): its
# blocks, concatenated, compiled against the installation in $1 through
# pkg-config, run, and their output compared with the one the page shows.
check_c_quick_start_page() {
    local page="$BUILD_DIR/docs/html/guides/quick-start-c.html" pc flags
    if [[ ! -f "$page" ]]; then
        log "the C quick start page: skipped, the site was not built (MTSARRAY_DOCS=${MTSARRAY_DOCS:-ON})"
        return
    fi
    pc="$(dirname "$(find "$1" -name mtsarray.pc -print -quit)")"
    read -ra flags <<<"$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs mtsarray) $(PKG_CONFIG_PATH="$pc" pkg-config --variable=rpath_flags mtsarray)"
    log "the C quick start page: its blocks, concatenated, compiled against the installation and run"
    "$VENV_PYTHON" "$REPO_ROOT/scripts/check_docs_snippets.py" c "$page" "${CC:-cc}" -std=c11 "${flags[@]}"
}

# Install into a temporary prefix; build and run tests/install (a
# find_package(mtsarray) consumer) and examples/ as standalone projects.
test_installation() {
    local prefix consumer_build examples_build metatensor_prefix
    prefix="$(mktemp -d "${TMPDIR:-/tmp}/mtsarray-install.XXXXXX")"
    # Runs in run_stage's subshell: the prefix goes when the stage ends, pass or fail.
    # shellcheck disable=SC2064
    trap "rm -rf '$prefix'" EXIT
    consumer_build="$BUILD_DIR/install-consumer"
    examples_build="$BUILD_DIR/install-examples"
    metatensor_prefix="$(metatensor_cmake_prefix)"

    log "install into $prefix"
    cmake --install "$BUILD_DIR" --prefix "$prefix"

    check_c_quick_start_page "$prefix"

    log "tests/install: find_package(mtsarray) consumer"
    rm -rf "$consumer_build"
    cmake -S "$REPO_ROOT/tests/install" -B "$consumer_build" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix;$metatensor_prefix"
    cmake --build "$consumer_build" -j"$JOBS"
    ctest --test-dir "$consumer_build" --output-on-failure

    log "examples/ as a standalone project against the installation"
    rm -rf "$examples_build"
    cmake -S "$REPO_ROOT/examples" -B "$examples_build" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix;$metatensor_prefix" \
        -DNCCL_PYTHON="$VENV_PYTHON"
    cmake --build "$examples_build" -j"$JOBS"
    ctest --test-dir "$examples_build" --output-on-failure
}

# ---------------------------------------------------------------------------
# HIP build (ROCm, Debian's hipcc package). Separate build folder, same tests.
# MTSARRAY_HIP=auto (default) builds it when hipcc is found, and requires it
# under CI (CI=true) so that the HIP backend can not silently stop being
# built; ON requires it; OFF skips it. The AMD
# targets default to the project's list (gfx90a;gfx940); set
# CMAKE_HIP_ARCHITECTURES in HIP_CMAKE_ARGS to change them.
# >>> HIP: the flags the HIP backend needs go into HIP_CMAKE_ARGS below. <<<
# ---------------------------------------------------------------------------
build_and_test_hip() {
    local mode="${MTSARRAY_HIP:-auto}" hipcc
    hipcc="$(command -v hipcc 2>/dev/null || true)"
    case "$mode" in
        OFF | off | 0 | false)
            log "HIP build skipped (MTSARRAY_HIP=$mode)"
            return
            ;;
        ON | on | 1 | true | auto) ;;
        *) die "MTSARRAY_HIP must be auto, ON or OFF (got '$mode')" ;;
    esac
    if [[ "$mode" == auto && "${CI:-}" == true ]]; then
        mode=ON
    fi
    local reason=""
    if [[ -z "$hipcc" ]]; then
        reason="hipcc not found (apt-get install hipcc)"
    fi
    if [[ -n "$reason" ]]; then
        [[ "$mode" == auto ]] || die "MTSARRAY_HIP=$mode but $reason"
        log "HIP build skipped: $reason"
        return
    fi

    local hip_build="${BUILD_DIR}-hip"
    local -a HIP_CMAKE_ARGS=(
        -DMTSARRAY_HIP=ON
        # Only the HIP backend in this folder: the CUDA one is built above.
        -DMTSARRAY_CUDA=OFF
        # The suites that only ever run on the simulated CUDA runtime (the
        # HIP flavour of its rules included) ran in the main tree: the same
        # code, nothing of the HIP backend in them.
        -DMTSARRAY_TEST_SIMULATION_SUITES=OFF
    )
    log "configure $hip_build (HIP, $hipcc)"
    cmake -S "$REPO_ROOT" -B "$hip_build" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$(metatensor_cmake_prefix)" \
        -DMTSARRAY_BUILD_TESTS=ON \
        -DMTSARRAY_BUILD_EXAMPLES=OFF \
        -DMTSARRAY_BUILD_BENCHMARKS=OFF \
        "${HIP_CMAKE_ARGS[@]}"
    log "build $hip_build (-j$JOBS)"
    cmake --build "$hip_build" -j"$JOBS"
    log "ctest ($hip_build), the one_device. registrations left to the main tree"
    ctest --test-dir "$hip_build" --output-on-failure -j"$JOBS" -E "$ONE_DEVICE_REGISTRATIONS"
}

bash "$REPO_ROOT/scripts/setup.sh"
configure_and_build "$BUILD_DIR"
run_stage "ctest" run_tests
# the plain-sentence summary of scripts/run.sh (bench/summary.py): its unit tests, about a second
run_stage "benchmark summary (bench/tests)" \
    "$VENV_PYTHON" -m pytest -q -p no:cacheprovider "$REPO_ROOT/bench/tests"
run_stage "Python package: sdist, CUDA wheel (auditwheel), fresh venv (python/)" build_python_package
run_stage "Python package: tests, type stubs, mypy (python/)" test_python_package
run_stage "Python package on other Pythons (${MTSARRAY_EXTRA_PYTHONS-3.13})" test_python_package_on_other_pythons
# the site is built alone (no library build); MTSARRAY_DOCS=OFF skips it
if [[ "${MTSARRAY_DOCS:-ON}" != OFF ]]; then
    run_stage "documentation (scripts/docs.sh)" env MTSARRAY_DOCS_SKIP_SETUP=1 bash "$REPO_ROOT/scripts/docs.sh"
fi
run_stage "installed package (tests/install, examples)" test_installation
run_stage "HIP build and tests" build_and_test_hip
# ASan+UBSan (leaks included) over the whole suite, TSan over the concurrency
# tests, short fixed-seed fuzz runs: any finding fails the run
run_stage "sanitizers and fuzzing" bash "$REPO_ROOT/scripts/sanitizers.sh"

finish_stages "all tests passed"
