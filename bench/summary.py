#!/usr/bin/env python3
"""What a `mtsarray-bench --json FILE` run means, in a few plain sentences.

scripts/run.sh prints this after the table: the range of mtsarray's speedup
over each baseline, per operation and device ("move_data on cpu: 1.4-3.8x
SimpleDataArray"), how many targets were met, and which missed targets are
expected on this machine (and why) as opposed to the ones worth a look.

A missed target is expected here when
- the row runs more host threads than the machine has CPUs (the thread-split
  rows, the [N threads] rows);
- the row's figure is unreliable (above the physical limit: the machine was
  busy while it ran);
- the target is a time per call or per movement (<= 0.4 ms, 4 ns per
  movement), which depends on the CPU's speed;
- the machine was busy when the run started (load average above its CPU
  count): then every missed target may be the machine's; a row on all of a
  machine's CPUs misses as soon as other work runs (load average 1 or more).

Usage: python3 bench/summary.py build/bench.json [--load LOAD]
  --load LOAD   the 1-minute load average before measuring (run.sh gives it)
"""

import argparse
import collections
import json
import math
import re
import sys
import textwrap

# the benchmark's table width: the sentences fit it too
WIDTH = 120

# targets that are absolute times (per call, per movement): the CPU's speed
TIME_TARGET = re.compile(r"(<=|>=|<|>)\s*[0-9.]+\s*(ns|us|ms|s)\b")


def finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def row_threads(row):
    """The host threads a row runs (its 'threads' parameter, or '[N threads]' in its name)."""
    threads = row.get("parameters", {}).get("threads")
    if threads is not None:
        try:
            return int(threads)
        except ValueError:
            pass
    match = re.search(r"\[(\d+) threads?\]", row.get("case", ""))
    if match:
        return int(match.group(1))
    match = re.search(r"\bthreads=(\d+)\b", row.get("case", ""))
    return int(match.group(1)) if match else None


def miss_reason(row, target, cpus, load):
    """Why missing `target` on `row` is expected on this machine, or None."""
    if TIME_TARGET.search(target["name"]) or "ns per movement" in target["name"]:
        return "a time target: depends on the CPU's speed"
    threads = row_threads(row)
    if threads is not None and cpus and threads > cpus:
        return "more host threads than CPUs"
    if "user threads" in row.get("case", "") and cpus and cpus < 8:
        return f"8 user threads on {cpus} CPUs"
    if row.get("unreliable"):
        return "unreliable figure (the machine was busy)"
    if load is not None and cpus and load > cpus:
        return "the machine was busy when the run started"
    if threads is not None and cpus and threads == cpus and threads > 1 and load is not None and load >= 1:
        return f"{threads} threads on all {cpus} CPUs while other work ran (load {load:.2f})"
    return None


def ratio_text(low, high, suffix="x"):
    def one(value):
        if suffix == "%":
            return f"{value:.0f}"
        return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"

    if one(low) == one(high):
        return f"{one(low)}{suffix}"
    return f"{one(low)}-{one(high)}{suffix}"


def speedup_lines(rows):
    """'move_data on cpu: 1.40-3.80x SimpleDataArray (12 rows)', one per group, device and baseline."""
    ranges = collections.OrderedDict()
    for row in rows:
        if row.get("unreliable") or row.get("baseline_does_no_work"):
            continue
        speedup = row.get("speedup_over_baseline")
        if not finite(speedup) or not row.get("baseline"):
            continue
        key = (row["group"], row["device"], row["baseline"])
        ranges.setdefault(key, []).append(speedup)
    lines = []
    for (group, device, baseline), values in ranges.items():
        count = f"{len(values)} row" + ("s" if len(values) > 1 else "")
        lines.append(f"{group} on {device}: {ratio_text(min(values), max(values))} {baseline} ({count})")
    return lines


def limit_lines(rows):
    """'create on cpu: 45-98% of malloc+memset+free' for groups with a limit but no baseline speedup."""
    with_speedup = {(row["group"], row["device"]) for row in rows
                    if finite(row.get("speedup_over_baseline")) and not row.get("baseline_does_no_work")}
    ranges = collections.OrderedDict()
    for row in rows:
        key = (row["group"], row["device"])
        if key in with_speedup or row.get("unreliable") or not finite(row.get("fraction_of_limit")):
            continue
        ranges.setdefault(key + (row.get("limit", ""),), []).append(100 * row["fraction_of_limit"])
    return [f"{group} on {device}: {ratio_text(min(v), max(v), '%')} of {limit}"
            for (group, device, limit), v in ranges.items()]


def summarize(results, load=None):
    """The sentences, as a list of lines."""
    rows = results.get("rows", [])
    cpus = results.get("cpus") or 0
    busy = load is not None and cpus and load > cpus
    lines = []
    machine = results.get("cpu_model") or results.get("machine", "this machine")
    where = f"On this machine ({machine}, {cpus} CPUs, {results.get('host_threads', '?')} host threads"
    if load is not None:
        where += f", load average {load:.2f} at the start"
    lines.append(where + "), mtsarray against what a user would otherwise call:")
    lines += ["  " + line for line in speedup_lines(rows)]
    limits = limit_lines(rows)
    if limits:
        lines.append("and against the hardware's limit on the same bytes (no baseline there):")
        lines += ["  " + line for line in limits]

    met = total = 0
    expected = collections.OrderedDict()
    unexpected = []
    for row in rows:
        for target in row.get("targets", []):
            total += 1
            if target["pass"]:
                met += 1
                continue
            reason = miss_reason(row, target, cpus, load)
            text = f"{row['group']} {row['device']} {row['case']}: {target['name']}"
            if reason is None:
                unexpected.append(text)
            else:
                expected.setdefault(reason, []).append(text)
    lines.append(f"Targets: {met} of {total} met.")
    if expected:
        count = sum(len(v) for v in expected.values())
        lines.append(f"{count} missed target" + (" is" if count == 1 else "s are") +
                     " expected on a shared or small machine like this one:")
        for reason, which in expected.items():
            names = "; ".join(which[:3]) + (f"; and {len(which) - 3} more" if len(which) > 3 else "")
            lines.append(f"  {len(which)} x {reason}: {names}")
    if unexpected:
        lines.append(f"{len(unexpected)} missed target" + (" is" if len(unexpected) == 1 else "s are") +
                     " not explained by this machine; worth a rerun, then a look:")
        lines += ["  " + text for text in unexpected]
    elif total:
        lines.append("No missed target is left unexplained.")
    unreliable = [row for row in rows if row.get("unreliable")]
    if unreliable:
        lines.append(f"{len(unreliable)} row" + (" was" if len(unreliable) == 1 else "s were") +
                     " above the physical limit (marked UNRELIABLE in the table) and left out above.")
    if busy:
        lines.append(f"The machine was busy (load average {load:.2f} > {cpus} CPUs): rerun on a quiet machine "
                     "before reading the figures.")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the file mtsarray-bench --json wrote")
    parser.add_argument("--load", type=float, default=None, help="1-minute load average before the run")
    args = parser.parse_args(argv)
    with open(args.results) as file:
        results = json.load(file)
    for line in summarize(results, args.load):
        indent = len(line) - len(line.lstrip())
        print(textwrap.fill(line, WIDTH, subsequent_indent=" " * (indent + 4)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
