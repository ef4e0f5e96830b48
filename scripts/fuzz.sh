#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz from a generated seed corpus and
# prints, per target, the number of executions and the final corpus size.
# Any crash, sanitizer report or broken invariant (the targets abort) fails
# the script; the reproducer is kept in the artifact folder.
#
# Usage: bash scripts/fuzz.sh BUILD_DIR
#   BUILD_DIR: a build configured with -DMTSARRAY_SANITIZE=address
#              -DMTSARRAY_BUILD_FUZZERS=ON (scripts/sanitizers.sh makes one)
# Environment:
#   MTSARRAY_FUZZ_RUNS      executions per target (default 20000)
#   MTSARRAY_FUZZ_SECONDS   run for this many seconds per target instead
#   MTSARRAY_FUZZ_SEED      libFuzzer -seed (default 1: reproducible runs)
#   MTSARRAY_FUZZ_WORK      corpus and artifact folder (default BUILD_DIR/fuzz-work)
#   MTSARRAY_FUZZ_TARGETS   targets to run (default "move-data from-dlpack
#                           move-data-mutating foreign-callbacks
#                           python-from-dlpack"); a target named
#                           <target>+invalid-threads runs <target> with
#                           MTSARRAY_NUM_THREADS=lots (the default list has
#                           move-data and foreign-callbacks so)
#   MTSARRAY_FUZZ_PYTHON_RUNS  capsules of python-from-dlpack (default 3000)
#
# python-from-dlpack is python/tests/fuzz_dlpack_capsules.py: hand-made
# DLPack capsules through the Python extension (mtsarray installed in the
# venv, as scripts/test.sh does before this runs), seeded, in a process of
# its own: a crash or a broken invariant fails it, and the log's last line
# is the reproducer.
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build_dir="${1:?usage: fuzz.sh BUILD_DIR}"
runs="${MTSARRAY_FUZZ_RUNS:-20000}"
seconds="${MTSARRAY_FUZZ_SECONDS:-}"
seed="${MTSARRAY_FUZZ_SEED:-1}"
work="${MTSARRAY_FUZZ_WORK:-$build_dir/fuzz-work}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# A few deterministic pseudo-random seeds per target: libFuzzer's mutations
# start from varied inputs, and nothing binary is committed.
generate_seeds() {
    local folder="$1" target="$2"
    mkdir -p "$folder"
    python3 - "$folder" "$target" <<'EOF'
import random, sys, os
folder, target = sys.argv[1], sys.argv[2]
rng = random.Random(target)
for i in range(16):
    size = rng.choice([8, 16, 32, 64, 128, 256])
    with open(os.path.join(folder, f"seed-{i:02d}"), "wb") as seed:
        seed.write(bytes(rng.randrange(256) for _ in range(size)))
EOF
}

status=0
summary=()
run_python_fuzzer() {
    local folder="$work/python-from-dlpack" python_runs="${MTSARRAY_FUZZ_PYTHON_RUNS:-3000}"
    rm -rf "$folder"
    mkdir -p "$folder"
    log "fuzz python-from-dlpack: $python_runs capsules (seed $seed)"
    set +e
    "$VENV_PYTHON" "$REPO_ROOT/python/tests/fuzz_dlpack_capsules.py" --runs "$python_runs" --seed "$seed" \
        --log "$folder/cases.log" >"$folder/fuzz.log" 2>&1
    local result=$?
    set -e
    tail -n 5 "$folder/fuzz.log"
    if [[ $result -ne 0 ]]; then
        status=1
        summary+=("python-from-dlpack: FAILED (exit $result); last case in $folder/cases.log, log $folder/fuzz.log")
    else
        summary+=("python-from-dlpack: $(tail -n 1 "$folder/fuzz.log")")
    fi
}

default_targets="move-data from-dlpack move-data-mutating foreign-callbacks python-from-dlpack
    move-data+invalid-threads foreign-callbacks+invalid-threads"
for target in ${MTSARRAY_FUZZ_TARGETS:-$default_targets}; do
    if [[ "$target" == python-from-dlpack ]]; then
        run_python_fuzzer
        continue
    fi
    # <binary>+invalid-threads: the same target in a process whose
    # environment has an invalid thread count
    environment=()
    if [[ "$target" == *+invalid-threads ]]; then
        environment=(MTSARRAY_NUM_THREADS=lots)
    fi
    binary="$build_dir/tests/fuzz/mtsarray-fuzz-${target%+invalid-threads}"
    [[ -x "$binary" ]] || die "$binary not found: configure with -DMTSARRAY_BUILD_FUZZERS=ON"
    corpus="$work/$target/corpus"
    artifacts="$work/$target/artifacts/"
    rm -rf "${work:?}/${target:?}"
    mkdir -p "$corpus" "$artifacts"
    generate_seeds "$corpus" "$target"

    local_args=(-seed="$seed" -artifact_prefix="$artifacts" -print_final_stats=1 -max_len=512)
    if [[ -n "$seconds" ]]; then
        local_args+=(-max_total_time="$seconds")
        log "fuzz $target for ${seconds}s (seed $seed)"
    else
        local_args+=(-runs="$runs")
        log "fuzz $target: $runs runs (seed $seed)"
    fi
    log_file="$work/$target/fuzz.log"
    set +e
    env "${environment[@]}" "$binary" "${local_args[@]}" "$corpus" >"$log_file" 2>&1
    result=$?
    set -e
    tail -n 15 "$log_file"
    executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log_file" | tail -n 1)"
    files="$(find "$corpus" -type f | wc -l)"
    bytes="$(du -sb "$corpus" | cut -f1)"
    if [[ $result -ne 0 ]]; then
        status=1
        summary+=("$target: FAILED (exit $result) after ${executions:-?} executions; reproducer in $artifacts, log $log_file")
    else
        summary+=("$target: ${executions:-?} executions, corpus $files files ($bytes bytes)")
    fi
done

log "fuzzing summary"
printf '  %s\n' "${summary[@]}"
exit $status
