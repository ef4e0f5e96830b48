#!/usr/bin/env python3
"""Alternated A/B of two builds of the benchmark, row by row.

On a shared machine the bandwidth of a run moves by up to 2x within minutes,
so two runs one after the other compare the machine's moods, not the builds.
This script runs `mtsarray-bench --quick --filter FILTER --json` of the two
binaries in turn, ABBA order (A B, then B A, ...), ROUNDS times each, and
prints for each row the median time of each build, its sorted `%lim` values
(each against the limit measured in the same run), the median speedup over
the row's baseline (measured in the same run too) and the ratio of the
median times.

Usage:
    python3 bench/ab_compare.py OLD_BENCH NEW_BENCH FILTER [ROUNDS]

e.g., the build at another commit against this one:
    git worktree add /tmp/old <commit> && (build it into /tmp/old/build)
    python3 bench/ab_compare.py /tmp/old/build/bench/mtsarray-bench \\
        build/bench/mtsarray-bench "swap_axes cpu f64" 8

Set MTSARRAY_BENCH_ENV_A / MTSARRAY_BENCH_ENV_B to "NAME=VALUE" to run the
same binary twice with one environment variable changed.
"""

import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, filter_text, environment):
    with tempfile.NamedTemporaryFile(suffix=".json") as output:
        subprocess.run(
            [binary, "--quick", "--filter", filter_text, "--json", output.name],
            check=True,
            capture_output=True,
            env=environment,
        )
        with open(output.name) as file:
            return json.load(file)["rows"]


def environment_with(variable):
    environment = dict(os.environ)
    setting = os.environ.get(variable)
    if setting:
        name, _, value = setting.partition("=")
        environment[name] = value
    return environment


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    builds = {"A": sys.argv[1], "B": sys.argv[2]}
    filter_text = sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) == 5 else 6
    environments = {
        "A": environment_with("MTSARRAY_BENCH_ENV_A"),
        "B": environment_with("MTSARRAY_BENCH_ENV_B"),
    }

    results = collections.defaultdict(lambda: {"A": [], "B": []})
    for round_index in range(rounds):
        order = ["A", "B"] if round_index % 2 == 0 else ["B", "A"]
        for build in order:
            for row in run(builds[build], filter_text, environments[build]):
                name = f"{row['group']} {row['device']} {row['case']}"
                results[name][build].append(
                    (row["seconds"], row.get("fraction_of_limit"), row.get("speedup_over_baseline"))
                )

    if not results:
        print(f"no row matches {filter_text!r}", file=sys.stderr)
        sys.exit(1)
    for name, by_build in results.items():
        print(name)
        medians = {}
        for build in ("A", "B"):
            times = [seconds for seconds, _, _ in by_build[build]]
            limits = sorted(round(100 * f) for _, f, _ in by_build[build] if f is not None)
            speedups = [s for _, _, s in by_build[build] if s is not None]
            medians[build] = statistics.median(times)
            speedup = f"   baseline/this {statistics.median(speedups):.2f}x" if speedups else ""
            print(f"  {build}: median {medians[build] * 1e6:10.2f} us   %lim {limits}{speedup}")
        print(f"  A/B time ratio: {medians['A'] / medians['B']:.2f} (above 1: B is faster)")


if __name__ == "__main__":
    main()
