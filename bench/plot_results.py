#!/usr/bin/env python3
"""Plots of a `mtsarray-bench --json FILE` run: one PNG per operation family.

For every family whose rows have a hardware limit (move_data, create, copy,
swap_axes; the limit is memcpy, malloc+memset+free, malloc+memcpy+free on the
CPU, a device-to-device cudaMemcpyAsync or cudaMemsetAsync on CUDA), a figure
with two panels:

- left: % of the limit's bandwidth on the same bytes, by size, for mtsarray
  (filled markers) and for the row's baseline (hollow markers: SimpleDataArray
  on the CPU, the cudaMemcpy* baselines and the CUB and warp-per-segment
  kernels on CUDA), with the row's %-of-limit target as a dotted line and
  rows that miss a target ringed in red;
- right: mtsarray's speedup over the baseline, row by row.

The GPU planning rows (`move_data planning`) get a bar chart of nanoseconds
per movement against their floor and the 4 ns target.

Needs matplotlib (scripts/setup.sh installs it in the venv). Saved tables of
older runs (the GPU runs' bench-cuda.txt) go through table_to_json.py first.

Usage: python3 bench/plot_results.py RESULTS.json [--out bench/plots] [--label TEXT]
  --label TEXT  added to every title, e.g. the commit the run measured
"""

import argparse
import collections
import json
import math
import os
import re
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # readable on the documentation site at its width
    matplotlib.rcParams.update({"font.size": 11, "axes.labelsize": 11, "axes.titlesize": 12})
except ImportError:
    sys.exit("plot_results.py needs matplotlib: bash scripts/setup.sh installs it in the venv")

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]

# Other implementations a CUDA move_data row measures beside its baseline
# (names of the row's `measurements`), drawn as more hollow series.
GPU_ALTERNATIVES = {
    "kernel_seconds": "mtsarray kernel only",
    "cub_batched_kernel_seconds": "CUB batched (kernel)",
    "warp_per_segment_kernel_seconds": "warp per segment (kernel)",
    "per_segment_seconds": "cudaMemcpyAsync per segment",
    "memcpy_batch_seconds": "cudaMemcpyBatchAsync",
    "memcpy_2d_seconds": "cudaMemcpy2DAsync",
}


def finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def size_text(nbytes):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024


def series_name(row):
    """The row's case name without the sizes that vary along the x axis."""
    name = row["case"]
    if row["group"] == "move_data" and row["parameters"].get("components", "-") != "-":
        return name.split()[0] + " scattered, with component axes"
    name = re.sub(r"\bsegments=\S+ \S*B x\S+", "", name)
    name = re.sub(r"\b(moves|props|elements)=\S+", "", name)
    name = name.replace("comps=-", "")
    name = re.sub(r"\b\d+(x\d+)+\b", "", name)
    return " ".join(name.split())


def x_of(row):
    """Segment rows (CUDA) are a sweep of segment sizes at a fixed total."""
    segment = row["parameters"].get("segment_bytes")
    return float(segment) if segment else row["bytes"]


def limit_target(row):
    for target in row["targets"]:
        match = re.match(r">=(\d+)% ", target["name"])
        if match:
            return float(match.group(1))
    return None


def misses(row):
    return any(not target["pass"] for target in row["targets"])


def baseline_copies_nothing(row):
    # metatensor-core's SimpleDataArray::copy shares its buffer
    return "copies no data" in row.get("note", "")


def plot_family(rows, device, group, title_tail, path):
    segments = any("segment_bytes" in row["parameters"] for row in rows)
    by_series = collections.OrderedDict()
    for row in rows:
        by_series.setdefault(series_name(row), []).append(row)

    with_speedup = any(finite(row["speedup_over_baseline"]) and not baseline_copies_nothing(row) for row in rows)
    height = max(6.0, 0.3 * len(rows) + 2.4)
    if with_speedup:
        figure, (left, right) = plt.subplots(1, 2, figsize=(16, height), gridspec_kw={"width_ratios": [1.3, 1]})
    else:
        figure, left = plt.subplots(figsize=(9, height))
    limit = rows[0]["limit"]
    baseline = rows[0]["baseline"]
    targets = set()
    for index, (name, members) in enumerate(by_series.items()):
        color = COLORS[index % len(COLORS)]
        members = sorted(members, key=x_of)
        xs = [x_of(row) for row in members]
        ys = [100 * row["fraction_of_limit"] for row in members]
        left.plot(xs, ys, "-o", color=color, label=name, markersize=6)
        for row, x, y in zip(members, xs, ys):
            if misses(row):
                left.plot([x], [y], "o", markersize=13, markerfacecolor="none", markeredgecolor="red")
            if limit_target(row) is not None:
                targets.add(limit_target(row))
        base = [(x_of(r), 100 * r["limit_seconds"] / r["baseline_seconds"]) for r in members
                if finite(r["baseline_seconds"]) and finite(r["limit_seconds"]) and not baseline_copies_nothing(r)]
        if base:
            left.plot(*zip(*base), "--o", color=color, markerfacecolor="white", markersize=5)
    if device == "cuda" and group == "move_data":
        for index, (key, label) in enumerate(GPU_ALTERNATIVES.items()):
            if label == baseline:
                continue  # drawn already, as the row's baseline
            points = sorted((x_of(r), 100 * r["limit_seconds"] / r["measurements"][key]) for r in rows
                            if finite(r["measurements"].get(key)) and finite(r["limit_seconds"]))
            if points:
                left.plot(*zip(*points), ":", marker="sD^v<>"[index], color=COLORS[-1 - index],
                          markerfacecolor="white", markersize=5, label=label)
    for index, target in enumerate(sorted(targets)):
        left.axhline(target, color="gray", linestyle=":", linewidth=1)
        left.annotate(f"target {target:.0f}%", (0.01 + 0.22 * index, target), xycoords=("axes fraction", "data"),
                      fontsize=10, color="gray", va="bottom")
    left.axhline(100, color="black", linewidth=0.8)
    lowest = min(min(line.get_ydata()) for line in left.get_lines() if len(line.get_ydata()) > 0)
    left.set_ylim(bottom=min(10.0, 0.7 * lowest))
    left.set_xscale("log", base=2 if segments else 10)
    if segments:
        left.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: size_text(v)))
    left.set_yscale("log")
    left.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}%"))
    left.set_xlabel("segment size (bytes)" if segments else "bytes written per call")
    left.set_ylabel(f"% of {limit}\n(bandwidth, same bytes)")
    left.grid(True, which="major", alpha=0.3)
    handles, _ = left.get_legend_handles_labels()
    handles.append(matplotlib.lines.Line2D([], [], color="black", marker="o", label="mtsarray (filled, solid)"))
    if with_speedup:
        handles.append(matplotlib.lines.Line2D([], [], color="black", marker="o", markerfacecolor="white",
                                               linestyle="--", label=f"{baseline} (hollow, dashed)"))
    left.legend(handles=handles, fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    if any("gave wrong values" in row.get("note", "") for row in rows):
        left.text(0.99, 0.01, f"{baseline} gives wrong values here (metatensor-core 0.2.6); timed anyway",
                  transform=left.transAxes, fontsize=9, ha="right", va="bottom")
    if any(baseline_copies_nothing(row) for row in rows):
        left.text(0.99, 0.01, f"{baseline} shares its buffer (copies no data): not drawn",
                  transform=left.transAxes, fontsize=9, ha="right", va="bottom")

    labels, speedups, colors = [], [], []
    for index, (name, members) in enumerate(by_series.items()):
        for row in sorted(members, key=x_of):
            if finite(row["speedup_over_baseline"]) and not baseline_copies_nothing(row):
                labels.append(row["case"] + ("  MISS" if misses(row) else ""))
                speedups.append(row["speedup_over_baseline"])
                colors.append(COLORS[index % len(COLORS)])
    if with_speedup:
        positions = range(len(speedups))
        right.barh(positions, speedups, color=colors)
        right.set_yticks(list(positions))
        right.set_yticklabels(labels, fontsize=9)
        right.invert_yaxis()
        right.set_xscale("log")
        right.axvline(1, color="black", linewidth=0.8)
        speedup_text = matplotlib.ticker.FuncFormatter(
            lambda v, _: f"{v:g}x" if f"{v:g}"[0] in "1235" else "")
        right.xaxis.set_major_formatter(speedup_text)
        # 2x, 3x, 5x between the decades only where few decades are drawn
        if max(speedups + [1.0]) / min(speedups + [1.0]) < 30:
            right.xaxis.set_minor_formatter(speedup_text)
        else:
            right.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        right.set_xlabel(f"speedup over {baseline} (its time / mtsarray's)", fontsize=9)
        right.grid(True, axis="x", which="major", alpha=0.3)

    versus = f"the limit and {baseline}" if with_speedup else "the limit"
    figure.suptitle(f"{group} on {device}: mtsarray vs {versus}\n{title_tail}", fontsize=12)
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def plot_planning(rows, title_tail, path):
    # the table rows (with the floor of any implementation); the GPU plan rows
    # compare with the table instead and are in the JSON file only
    rows = [row for row in rows if "floor_nanoseconds_per_movement" in row["measurements"]]
    if not rows:
        return False
    figure, axes = plt.subplots(figsize=(10, 2.4 + 0.5 * len(rows)))
    labels = [row["case"] for row in rows]
    ours = [row["measurements"]["nanoseconds_per_movement"] for row in rows]
    floor = [row["measurements"]["floor_nanoseconds_per_movement"] for row in rows]
    positions = range(len(rows))
    axes.barh([p - 0.2 for p in positions], ours, height=0.4, color=COLORS[0], label="mtsarray (MovePlan + table)")
    axes.barh([p + 0.2 for p in positions], floor, height=0.4, color=COLORS[-1],
              label="floor: check + 16-byte write per movement")
    axes.axvline(4.0, color="red", linestyle=":", label="target: 4 ns per movement")
    axes.set_yticks(list(positions))
    axes.set_yticklabels([label.replace("GPU table, ", "") for label in labels], fontsize=9)
    axes.invert_yaxis()
    axes.set_xlabel("host time per movement (ns)")
    axes.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
    figure.suptitle(f"GPU move_data planning (host work, run on the CPU)\n{title_tail}", fontsize=12)
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the file mtsarray-bench --json wrote")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots"))
    parser.add_argument("--label", default="", help="added to every title (the commit measured, ...)")
    args = parser.parse_args()

    with open(args.results) as file:
        results = json.load(file)
    os.makedirs(args.out, exist_ok=True)
    title_tail = f"{results['machine']}, {results['date'][:10]}, {results['mode']} mode"
    if results.get("commit") and not args.label:
        title_tail += f", {results['commit']}"
    if args.label:
        title_tail += f", {args.label}"

    families = collections.OrderedDict()
    for row in results["rows"]:
        sweep = "segments" if "segment_bytes" in row["parameters"] else ""
        families.setdefault((row["device"], row["group"], sweep), []).append(row)
    for (device, group, sweep), rows in families.items():
        name = "_".join(part.replace(" ", "_") for part in (device, group, sweep) if part)
        path = os.path.join(args.out, name + ".png")
        if group == "move_data planning":
            if not plot_planning(rows, title_tail, path):
                print(f"skipped {group} on {device}: no rows with a floor")
                continue
        elif all(finite(row["limit_seconds"]) and finite(row["bytes"]) for row in rows):
            plot_family(rows, device, group, title_tail, path)
        else:
            print(f"skipped {group} on {device}: its rows have no hardware limit")
            continue
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
