#!/usr/bin/env bash
# The GPU check, sized for a short lease on a GPU machine: everything is
# built beforehand on a machine without a GPU, and the GPU machine only runs.
#
#   bash scripts/gpu_check.sh --pack [BUILD_DIR]     (here, no GPU needed)
#       BUILD_DIR: a CUDA build with tests and benchmarks (default
#       <repo>/build; e.g. scripts/test.sh's, or one configured with
#       -DCMAKE_CUDA_ARCHITECTURES=90 for an H100). Writes
#       <repo>/.gpu-check/bundle.tar.gz: the test binaries, the benchmark,
#       libmtsarray, libmetatensor where the build looks for it, and the
#       wheels of the Python package (CUDA), of metatensor-core and of
#       metatensor-torch (pure Python over libraries for each PyTorch release:
#       it loads the one of the machine's PyTorch) and of metatensor-operations
#       for Python
#       $MTSARRAY_GPU_PYTHON_VERSION (default 3.12; scripts/python_wheel.sh's
#       manylinux wheel on the build's own libmtsarray, the very file of
#       scripts/test.sh when it is for that Python) -- paths relative
#       to the repository, which must sit at the same absolute path on the
#       GPU machine (a symbolic link will do).
#
#   bash scripts/gpu_check.sh [BUNDLE]                (on the GPU machine)
#       Unpacks the bundle (default <repo>/.gpu-check/bundle.tar.gz) and
#       runs, in one go:
#         1. every test binary, whole, 4 at a time: every case of each, with
#            names resolved on the GPU (the simulated-runtime suite with
#            MTSARRAY_TEST_GPU=simulated, as ctest runs it);
#         2. the CUDA rows of mtsarray-bench (--quick), alone on the GPU;
#            Nsight Compute on one launch of the move_data kernel in the
#            64 B and the mixed-lengths rows, where ncu is there; then the
#            CPU rows on the machine's cores (the GPU
#            backend's planning and libmetatensor's operations on CPU arrays
#            included) and mtsarray-pool-vs-openmp (the thread pool's fork,
#            join and wake-up);
#         3. compute-sanitizer: memcheck on the stream tests, racecheck and
#            synccheck on the move_data cases, beside
#         4. the Python package's tests with PyTorch, CuPy and JAX (those
#            importable there), the TensorMap bridges to PyTorch and
#            metatensor-torch on the GPU again on their own (no case may
#            skip), and bench/tensormap_operations.py (against
#            metatensor-torch on the same GPU when PyTorch is there);
#         5. the training-loop scenario (scripts/training_loop.py), alone on
#            the GPU: PyTorch holding most of its memory, a torch.cuda.graph
#            capture of copy_into from host memory, move_data and a plan
#            execute on PyTorch's stream, replayed 1000 times, 4 threads
#            coming and going, every step checked against NumPy, then the
#            memory checks; and its short version under compute-sanitizer
#            memcheck. It needs PyTorch with CUDA on the GPU machine (not
#            carried): without it the stage fails, saying so.
#       Ends with one verdict per binary and stage, naming every failing
#       test, and writes the logs and a JSON summary to
#       $MTSARRAY_GPU_CHECK_OUT (default <repo>/.gpu-check/out). Exits non-zero
#       when a stage fails (a benchmark target missed is reported, not a
#       failure). About 6 to 7 minutes on an H100.
#         6. the NCCL programs on every GPU of the machine, one MPI rank
#            each (1 rank on a 1-GPU machine): examples/nccl_tensormap
#            (graph replays, then with its buffer in an NCCL window),
#            bench/nccl_allreduce_bench, and examples/python/torch_distributed.py
#            on NCCL. They need Open MPI's mpiexec there (and PyTorch with
#            CUDA for the last): without them the stage fails, saying so.
#       MTSARRAY_GPU_CHECK_STAGES: the stages to run, of "tests cuda ncu cpu
#       sanitizers python training nccl" (default: all of them), for a lease too
#       short for the whole check (e.g. "cuda ncu cpu": the figures alone);
#       MTSARRAY_GPU_CHECK_CPU_ROWS: the CPU rows, filters with '|' between
#       two (default: all of them).
set -uo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CHECK_DIR="$REPO_ROOT/.gpu-check"
PYTHON_VERSION="${MTSARRAY_GPU_PYTHON_VERSION:-3.12}"

# ---- here: the bundle ---------------------------------------------------------------------
# The wheels of the Python stage: mtsarray's for CUDA architectures $1, and
# those of metatensor-core and metatensor-torch.
pack_wheels() {
    local architectures="$1" build="$2" python venv="$CHECK_DIR/venv$PYTHON_VERSION" wheels="$CHECK_DIR/wheels"
    python="$(find_python "$PYTHON_VERSION")"
    [[ -n "$python" ]] || die "no Python $PYTHON_VERSION here for the wheel (pyenv install $PYTHON_VERSION)"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "venv for the wheels: $venv ($python)"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet "metatensor-core==$METATENSOR_VERSION" numpy scikit-build-core nanobind
    fi
    # metatensor-core and its own requirement (numpy is there already),
    # metatensor-torch (PyTorch is on the GPU machine: its wheel is not
    # carried) and metatensor-operations (pure Python), for the bridges' tests
    "$venv/bin/python" -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" \
        "metatensor-core==$METATENSOR_VERSION" ctypes-dlpack "metatensor-torch==$METATENSOR_TORCH_VERSION" \
        "metatensor-operations==$METATENSOR_OPERATIONS_VERSION" ||
        die "could not download the wheels of metatensor-core, metatensor-torch and metatensor-operations"
    # the wheel of scripts/test.sh (build/python-dist) when it is for this
    # Python and this build; otherwise the same script makes one, on the
    # libmtsarray this build compiled (no second compilation of the library)
    local tag test_wheel
    tag="$("$venv/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
    test_wheel="$(ls "$build/python-dist"/mtsarray-*-"$tag"-*manylinux*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -n "$test_wheel" && "$test_wheel" -nt "$build/src/libmtsarray.so" ]]; then
        log "mtsarray wheel: scripts/test.sh's $(basename "$test_wheel") (CUDA $architectures)"
        cp "$test_wheel" "$wheels/"
    else
        log "mtsarray wheel for Python $PYTHON_VERSION: scripts/python_wheel.sh $build (CUDA $architectures)"
        "$venv/bin/python" -m pip install --quiet "${AUDITWHEEL_PACKAGES[@]}"
        bash "$REPO_ROOT/scripts/python_wheel.sh" "$build" "$venv/bin/python" "$wheels" ||
            die "the wheel did not build"
    fi
}

# The NCCL stage's programs and the libnccl.so.2 they were linked with (their
# RUNPATH: the venv's nvidia-nccl-cu13 wheel), relative to the repository.
nccl_files() {
    local build="$1" program nccl_lib
    for program in examples/nccl_tensormap bench/nccl_allreduce_bench; do
        [[ -x "$build/$program" ]] || die "$build has no $program (MTSARRAY_NCCL=ON, with NCCL from setup.sh)"
        echo "${build#"$REPO_ROOT"/}/$program"
    done
    nccl_lib="$(ldd "$build/examples/nccl_tensormap" | sed -n 's/.*libnccl.so.2 => \(.*\) (.*/\1/p')"
    case "$nccl_lib" in
        "$REPO_ROOT"/*) echo "${nccl_lib#"$REPO_ROOT"/}" ;;
        *) die "libnccl.so.2 ($nccl_lib) must be inside the repository (the venv's nvidia-nccl-cu13)" ;;
    esac
}

pack() {
    local build="${1:-$REPO_ROOT/build}"
    build="$(cd "$build" && pwd)" || die "no build folder $1"
    grep -q "MTSARRAY_HAS_CUDA 1" "$build/include/mtsarray/config.h" 2>/dev/null ||
        die "$build is not a CUDA build (include/mtsarray/config.h)"
    [[ -x "$build/bench/mtsarray-bench" ]] || die "$build has no benchmark (MTSARRAY_BUILD_BENCHMARKS=ON)"
    case "$build" in
        "$REPO_ROOT"/*) ;;
        *) die "$build must be inside the repository, whose path the GPU machine recreates" ;;
    esac
    local architectures metatensor_lib
    architectures="${MTSARRAY_CUDA_ARCHITECTURES:-$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")}"
    # where the binaries look for libmetatensor (their RUNPATH)
    metatensor_lib="$(readelf -d "$build/src/libmtsarray.so" | sed -n 's/.*RUNPATH.*\[\(.*\)\]/\1/p' | tr ':' '\n' |
        grep metatensor | head -n 1)"
    [[ -f "$metatensor_lib/libmetatensor.so" ]] || die "libmetatensor not found in the RUNPATH of libmtsarray"
    case "$metatensor_lib" in
        "$REPO_ROOT"/*) ;;
        *) die "libmetatensor ($metatensor_lib) must be inside the repository" ;;
    esac

    local wheels="$CHECK_DIR/wheels"
    mkdir -p "$wheels"
    rm -f "$wheels"/*.whl
    if [[ -n "${MTSARRAY_GPU_CHECK_STAGES:-}" && " $MTSARRAY_GPU_CHECK_STAGES " != *" python "* &&
        " $MTSARRAY_GPU_CHECK_STAGES " != *" training "* && " $MTSARRAY_GPU_CHECK_STAGES " != *" nccl "* ]]; then
        log "no wheels: the stages packed for ($MTSARRAY_GPU_CHECK_STAGES) leave out the Python ones (python training nccl)"
    else
        pack_wheels "$architectures" "$build"
    fi

    local -a files nccl=()
    if [[ -z "${MTSARRAY_GPU_CHECK_STAGES:-}" || " $MTSARRAY_GPU_CHECK_STAGES " == *" nccl "* ]]; then
        mapfile -t nccl < <(nccl_files "$build")
        [[ ${#nccl[@]} -eq 3 ]] || die "the nccl stage's programs are not all in $build (see above)"
    fi
    mapfile -t files < <(cd "$REPO_ROOT" && {
        find "${build#"$REPO_ROOT"/}/tests" -maxdepth 1 -type f -executable -name 'mtsarray-*-tests'
        echo "${build#"$REPO_ROOT"/}/bench/mtsarray-bench"
        find "${build#"$REPO_ROOT"/}/bench" -maxdepth 1 -type f -executable -name 'mtsarray-pool-vs-openmp'
        find "${build#"$REPO_ROOT"/}/src" -maxdepth 1 -name 'libmtsarray.so*'
        echo "${metatensor_lib#"$REPO_ROOT"/}"
        printf '%s\n' "${nccl[@]}"
        echo ".gpu-check/wheels"
    })
    printf '%s\n' "${build#"$REPO_ROOT"/}" >"$CHECK_DIR/build-dir"
    # the commit the bundle was made at (plus "+changes" for a dirty tree):
    # the GPU machine's copy of the repository may not say
    local commit
    commit="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
    printf '%s\n' "$commit" >"$CHECK_DIR/commit"
    tar -C "$REPO_ROOT" -czf "$CHECK_DIR/bundle.tar.gz" "${files[@]}" .gpu-check/build-dir .gpu-check/commit
    log "bundle: $(du -h "$CHECK_DIR/bundle.tar.gz" | cut -f1) in $CHECK_DIR/bundle.tar.gz (${#files[@]} entries)"
    log "on the GPU machine, with the repository at $REPO_ROOT (a symbolic link will do):"
    echo "    bash scripts/gpu_check.sh .gpu-check/bundle.tar.gz"
}

if [[ "${1:-}" == "--pack" ]]; then
    pack "${2:-}"
    exit 0
fi

# ---- there: the runs ----------------------------------------------------------------------
BUNDLE="${1:-$CHECK_DIR/bundle.tar.gz}"
OUT="${MTSARRAY_GPU_CHECK_OUT:-$CHECK_DIR/out}"
[[ -f "$BUNDLE" ]] || die "no bundle at $BUNDLE (make one with --pack where the build is)"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this is not a GPU machine"
mkdir -p "$OUT"
rm -f "$OUT/verdicts.tsv"
tar -C "$REPO_ROOT" -xzf "$BUNDLE" || die "could not unpack $BUNDLE into $REPO_ROOT"
BUILD="$REPO_ROOT/$(cat "$CHECK_DIR/build-dir")"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
START=$SECONDS

STAGES=" ${MTSARRAY_GPU_CHECK_STAGES:-tests cuda ncu cpu sanitizers python training nccl} "
for stage in $STAGES; do
    case "$stage" in
        tests | cuda | ncu | cpu | sanitizers | python | training | nccl) ;;
        *) die "unknown stage '$stage' in MTSARRAY_GPU_CHECK_STAGES (tests cuda ncu cpu sanitizers python training nccl)" ;;
    esac
done
wanted() {  # STAGE: whether it runs
    [[ "$STAGES" == *" $1 "* ]]
}

declare -A VERDICT=()
ORDER=()
verdict() {  # NAME TEXT
    VERDICT["$1"]="$2"
    ORDER+=("$1")
}

# 1. every test binary, whole; the verdict of each from its own summary
run_binary() {
    local binary="$1" name log
    name="$(basename "$binary")"
    log="$OUT/$name.log"
    local -a environment=()
    if [[ "$name" == mtsarray-simulated-stream-tests ]]; then
        environment=(MTSARRAY_TEST_GPU=simulated)
    fi
    env "${environment[@]}" timeout 300 "$binary" --gtest_brief=1 >"$log" 2>&1
    echo "$?" >"$log.rc"
}
export -f run_binary
export OUT
if wanted tests; then
    mapfile -t BINARIES < <(find "$BUILD/tests" -maxdepth 1 -type f -executable -name 'mtsarray-*-tests' | sort)
    log "1. ${#BINARIES[@]} test binaries, 4 at a time"
    printf '%s\n' "${BINARIES[@]}" | xargs -P 4 -I{} bash -c 'run_binary "$@"' _ {}
    for binary in "${BINARIES[@]}"; do
        name="$(basename "$binary")"
        rc="$(cat "$OUT/$name.log.rc")"
        passed="$(sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$OUT/$name.log" | tail -n 1)"
        skipped="$(sed -n 's/.*\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$OUT/$name.log" | tail -n 1)"
        text="passed ${passed:-0}, skipped ${skipped:-0}"
        if [[ "$rc" != 0 ]]; then
            text="FAILED (exit $rc): $text; failing: $(grep '^\[  FAILED  \]' "$OUT/$name.log" | grep -v 'listed below' |
                sed 's/^\[  FAILED  \] //; s/, where GetParam.*//; s/ ([0-9]* ms)$//' | sort -u | tr '\n' ' ')"
        fi
        verdict "$name" "$text"
    done
fi

# 2. the benchmark: its CUDA rows alone on the GPU (their timings), then the
# host rows on the GPU machine's cores (the CPU operations at its thread
# count, the GPU backend's planning, libmetatensor's operations on CPU arrays)
bench_rows() {  # FILTER LABEL SECONDS
    local filter="$1" label="$2" file="$OUT/bench-${1//[^A-Za-z0-9]/_}"
    log "2. mtsarray-bench --quick --filter $filter"
    timeout "$3" "$BUILD/bench/mtsarray-bench" --quick --filter "$filter" --json "$file.json" >"$file.log" 2>&1
    local rc=$?
    if [[ $rc == 0 ]]; then
        verdict "benchmark ($label rows)" "ran; $(grep -E '^== targets:' "$file.log" | tail -n 1 | sed 's/^== //')"
    else
        verdict "benchmark ($label rows)" "FAILED (exit $rc): see $(basename "$file").log"
    fi
}
if wanted cuda; then
    bench_rows cuda CUDA 300
fi

# Nsight Compute on the kernel where it is furthest from the copy's
# bandwidth: one launch of move_data_device_table_kernel in the 64 B and the
# mixed-lengths rows (the benchmark with --calls 1 runs each of its
# operations once), with
# the clocks left as they run (--clock-control none). Still alone on the GPU.
# A profiler that can not read the counters here is reported, not a failure.
NCU="$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)"
NCU_ROWS=("segments=64 B" "mixed 8B..512B")
profile_kernel() {  # ROW
    local row="$1" log="$OUT/ncu-${1//[^A-Za-z0-9]/_}.txt"
    timeout 90 "$NCU" --clock-control none --kernel-name regex:move_data_device_table_kernel --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        --section SchedulerStats --section WarpStateStats \
        "$BUILD/bench/mtsarray-bench" --quick --calls 1 --filter "move_data cuda f64 $row" >"$log" 2>&1
    local rc=$? dram occupancy
    dram="$(grep -m 1 -E '^ +DRAM Throughput +%' "$log" | awk '{print $NF}')"
    occupancy="$(grep -m 1 -E '^ +Achieved Occupancy +%' "$log" | awk '{print $NF}')"
    if [[ $rc == 0 && -n "$dram" ]]; then
        verdict "ncu move_data kernel, $row" "DRAM throughput ${dram} %, achieved occupancy ${occupancy:-?} %"
    else
        verdict "ncu move_data kernel, $row" "not profiled (exit $rc): see $(basename "$log")"
    fi
}
if wanted ncu; then
    if [[ -n "$NCU" ]]; then
        log "2. ncu: the move_data kernel in ${#NCU_ROWS[@]} rows"
        for row in "${NCU_ROWS[@]}"; do
            profile_kernel "$row"
        done
    else
        verdict "ncu move_data kernel" "not profiled: ncu not found"
    fi
fi

if wanted cpu; then
    # MTSARRAY_GPU_CHECK_CPU_ROWS: filters of the CPU rows, '|' between two
    # (default: all of them; e.g. "thread split|move_data planning" in a short lease)
    IFS='|' read -r -a cpu_filters <<<"${MTSARRAY_GPU_CHECK_CPU_ROWS:-cpu}"
    for filter in "${cpu_filters[@]}"; do
        bench_rows "$filter" "CPU: $filter" 260
    done
    # the host thread pool's fork, join and wake-up on the machine's cores
    if [[ -x "$BUILD/bench/mtsarray-pool-vs-openmp" ]]; then
        if timeout 90 "$BUILD/bench/mtsarray-pool-vs-openmp" >"$OUT/pool-vs-openmp.log" 2>&1; then
            verdict "thread pool (mtsarray-pool-vs-openmp)" "ran; see pool-vs-openmp.log"
        else
            verdict "thread pool (mtsarray-pool-vs-openmp)" "FAILED: see pool-vs-openmp.log"
        fi
    fi
fi

# 3. compute-sanitizer on the cases that run on the GPU, beside the Python tests
SANITIZER="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
sanitize() {  # TOOL BINARY FILTER
    local tool="$1" binary="$BUILD/tests/$2" filter="$3" log="$OUT/sanitizer-$1-$2.log"
    # no --leak-check: the page-locked staging buffers (and the test
    # driver's) live as long as the process by design, since the runtime
    # may be gone when static objects are destroyed, and would all be
    # reported; device-memory leaks are checked per test on the simulated
    # runtime (allocated_bytes)
    timeout 240 "$SANITIZER" --tool "$tool" --error-exitcode 97 --print-limit 50 \
        "$binary" --gtest_filter="$filter" --gtest_brief=1 >"$log" 2>&1
    local rc=$?
    local summary
    summary="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$log" | tail -n 1)"
    if [[ $rc == 0 ]]; then
        echo "clean (${summary:-no summary})" >"$log.verdict"
    else
        echo "FAILED (exit $rc): ${summary:-see $(basename "$log")}" >"$log.verdict"
    fi
}
SANITIZED=("memcheck mtsarray-gpu-stream-tests *" "racecheck mtsarray-move-data-tests *cuda*"
    "synccheck mtsarray-move-data-tests *cuda*")
if wanted sanitizers && [[ -n "$SANITIZER" ]]; then
    log "3. compute-sanitizer (${#SANITIZED[@]} runs) and the Python tests"
    for run in "${SANITIZED[@]}"; do
        read -r tool binary filter <<<"$run"
        sanitize "$tool" "$binary" "$filter" &
    done
fi

# 4. the Python package with the GPU frameworks there
SITE="$CHECK_DIR/site-packages"
SITE_READY=0
if wanted python || wanted training || wanted nccl; then
    rm -rf "$SITE"
    if python3 -m pip install --quiet --no-index --no-deps --target "$SITE" "$CHECK_DIR"/wheels/*.whl \
        >"$OUT/python-install.log" 2>&1; then
        SITE_READY=1
    else
        verdict "python wheels" "FAILED: the wheels did not install (python-install.log)"
    fi
fi
if wanted python && [[ $SITE_READY == 1 ]]; then
    frameworks="$(PYTHONPATH="$SITE" python3 -c '
import importlib.util as u
print(" ".join(m for m in ("torch", "cupy", "jax") if u.find_spec(m)))')"
    (cd "$REPO_ROOT/python" && PYTHONPATH="$SITE" timeout 300 python3 -m pytest tests -rs -q -p no:cacheprovider) \
        >"$OUT/pytest.log" 2>&1
    rc=$?
    summary="$(tail -n 1 "$OUT/pytest.log")"
    if [[ $rc == 0 ]]; then
        verdict "python tests" "$summary (with: $frameworks)"
    else
        verdict "python tests" "FAILED (exit $rc): $summary; failing: $(grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" |
            cut -d' ' -f2 | tr '\n' ' ')"
    fi
    # the bridges to PyTorch and metatensor-torch on the GPU, again on their
    # own: every case must run here (a skip means torch, metatensor-torch or
    # the CUDA backend could not be used, which the whole run would hide)
    (cd "$REPO_ROOT/python" && PYTHONPATH="$SITE" timeout 120 python3 -m pytest tests/test_bridges.py -rs -q \
        -p no:cacheprovider -k "cuda or metatensor_torch_bridge") >"$OUT/pytest-bridges.log" 2>&1
    rc=$?
    summary="$(tail -n 1 "$OUT/pytest-bridges.log")"
    if [[ $rc == 0 && "$summary" != *skipped* ]]; then
        verdict "python bridges (torch, metatensor-torch)" "$summary"
    else
        verdict "python bridges (torch, metatensor-torch)" "FAILED (exit $rc): $summary; see pytest-bridges.log"
    fi
    # libmetatensor's operations from Python: mtsarray on the GPU, NumPy
    # (and metatensor-torch, where it is installed)
    (cd "$REPO_ROOT" && PYTHONPATH="$SITE" timeout 200 python3 bench/tensormap_operations.py --rounds 3) \
        >"$OUT/bench-tensormap-operations.log" 2>&1
    rc=$?
    if [[ $rc == 0 ]]; then
        verdict "benchmark (tensormap_operations.py)" \
            "ran; $(grep -E '^== targets:' "$OUT/bench-tensormap-operations.log" | tail -n 1 | sed 's/^== //')"
    else
        verdict "benchmark (tensormap_operations.py)" "FAILED (exit $rc): see bench-tensormap-operations.log"
    fi
fi

wait  # the sanitizers
if ! wanted sanitizers; then
    :
elif [[ -n "$SANITIZER" ]]; then
    for run in "${SANITIZED[@]}"; do
        read -r tool binary filter <<<"$run"
        verdict "compute-sanitizer $tool $binary" "$(cat "$OUT/sanitizer-$tool-$binary.log.verdict")"
    done
else
    verdict "compute-sanitizer" "FAILED: compute-sanitizer not found"
fi

# 5. the training-loop scenario, alone on the GPU (it holds most of its memory)
training_loop() {  # LABEL LOG [SANITIZER ARGUMENTS...] -- SCRIPT ARGUMENTS...
    local label="$1" log="$OUT/$2" rc summary
    shift 2
    local -a wrapper=()
    while [[ "$1" != "--" ]]; do
        wrapper+=("$1")
        shift
    done
    shift
    (cd "$REPO_ROOT" && PYTHONPATH="$SITE" timeout 300 "${wrapper[@]}" python3 scripts/training_loop.py "$@") \
        >"$log" 2>&1
    rc=$?
    summary="$(grep -E '^(training loop:|FAILED:|skipped:)|ERROR SUMMARY' "$log" | tail -n 2 | tr '\n' ' ')"
    if [[ $rc == 0 ]] && grep -q '^training loop: all checks passed' "$log"; then
        verdict "$label" "passed: $(grep -E '^[0-9]+ replays' "$log" | head -n 1 | cut -c1-120) ${summary}"
    else
        verdict "$label" "FAILED (exit $rc): ${summary:-see $(basename "$log")}"
    fi
}
if wanted training && [[ $SITE_READY == 1 ]]; then
    log "5. the training-loop scenario (PyTorch, mtsarray, one GPU)"
    training_loop "training loop (PyTorch, 1000 replays)" training-loop.log -- --steps 1000
    if [[ -n "$SANITIZER" ]]; then
        training_loop "training loop under compute-sanitizer memcheck" training-loop-memcheck.log \
            "$SANITIZER" --tool memcheck --error-exitcode 97 --print-limit 50 -- --short
    fi
fi

# 6. the NCCL programs: one MPI rank per GPU of the machine
nccl_run() {  # LABEL LOG EXPECTED-LINE COMMAND...
    local label="$1" log="$OUT/$2" expected="$3" rc
    shift 3
    (cd "$REPO_ROOT" && timeout 180 "$@") >"$log" 2>&1
    rc=$?
    if [[ $rc == 0 ]] && grep -q "$expected" "$log"; then
        verdict "$label" "passed: $(grep -E "$expected|^== " "$log" | tail -n 2 | tr '\n' ' ' | cut -c1-200)"
    else
        # the program's own complaint, before what mpiexec adds when a rank stops
        local why
        why="$(grep -m 1 -E 'failed|WRONG|Error|error' "$log" || tail -n 3 "$log")"
        verdict "$label" "FAILED (exit $rc): $(echo "$why" | tr '\n' ' ' | cut -c1-200)"
    fi
}
if wanted nccl; then
    GPUS="$(nvidia-smi -L | grep -c '^GPU ')"
    MPIEXEC="$(command -v mpiexec || true)"
    log "6. the NCCL programs on $GPUS GPU(s), one MPI rank each"
    if [[ -z "$MPIEXEC" ]]; then
        verdict "nccl programs" "FAILED: mpiexec not found (apt-get install openmpi-bin: the ranks bootstrap NCCL over MPI)"
    else
        # as ctest runs MPI programs (cmake/mpi-programs.cmake), one rank per GPU
        MPI_RUN=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "OMPI_MCA_btl=self,vader"
            OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_sm_single_copy_mechanism=none
            OMPI_MCA_plm_rsh_agent=false "$MPIEXEC" -n "$GPUS" --bind-to none)
        nccl_run "nccl_tensormap ($GPUS ranks, graph)" nccl-tensormap.log "every value checked, ok" \
            "${MPI_RUN[@]}" "$BUILD/examples/nccl_tensormap" --device cuda --steps 20
        nccl_run "nccl_tensormap ($GPUS ranks, NCCL window)" nccl-tensormap-window.log "every value checked, ok" \
            "${MPI_RUN[@]}" "$BUILD/examples/nccl_tensormap" --device cuda --steps 20 --window
        nccl_run "nccl_allreduce_bench ($GPUS ranks)" nccl-bench.log "every sum checked" \
            "${MPI_RUN[@]}" "$BUILD/bench/nccl_allreduce_bench" --device cuda --steps 50
        nccl_run "nccl_allreduce_bench, small arrays ($GPUS ranks)" nccl-bench-small.log "every sum checked" \
            "${MPI_RUN[@]}" "$BUILD/bench/nccl_allreduce_bench" --device cuda --steps 50 --blocks 32 --atoms 32 \
            --properties 8
    fi
    if [[ $SITE_READY == 1 ]]; then
        nccl_run "torch_distributed.py (nccl, $GPUS processes)" torch-distributed.log "every block's values" \
            env PYTHONPATH="$SITE" python3 examples/python/torch_distributed.py --backend nccl --processes "$GPUS"
    fi
fi

# ---- the verdicts ---------------------------------------------------------------------------
log "verdicts ($((SECONDS - START)) s on $(head -n 1 "$OUT/gpu.txt"), bundle of $(cat "$CHECK_DIR/commit" 2>/dev/null))"
for name in "${ORDER[@]}"; do
    printf '  %-44s %s\n' "$name" "${VERDICT[$name]}"
    printf '%s\t%s\n' "$name" "${VERDICT[$name]}" >>"$OUT/verdicts.tsv"
done | tee "$OUT/verdicts.txt"
touch "$OUT/verdicts.tsv"
status=0
grep -q "FAILED" "$OUT/verdicts.txt" && status=1
cat "$OUT"/bench-*.log | grep -E '^   MISS ' | sed 's/^/  target missed: /' | cut -c1-200 || true
python3 - "$OUT" "$(cat "$CHECK_DIR/commit" 2>/dev/null || echo unknown)" "$((SECONDS - START))" <<'EOF'
import json, os, sys
out, commit, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
verdicts = {}
for line in open(os.path.join(out, "verdicts.tsv")):
    name, _, text = line.rstrip("\n").partition("\t")
    verdicts[name] = text
json.dump({"commit": commit, "gpu": open(os.path.join(out, "gpu.txt")).read().strip(), "seconds": seconds,
           "verdicts": verdicts}, open(os.path.join(out, "gpu-check.json"), "w"), indent=1)
EOF
exit $status
