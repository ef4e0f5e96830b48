#!/usr/bin/env python3
"""The rows of a saved `mtsarray-bench` table (its printed output, as the GPU
runs keep it) as the JSON file `--json` writes, so that plot_results.py and
summary.py read old runs too.

Reads both layouts of the table: targets at the end of the row (up to 0.2.0),
and targets on the line below it (since). The numbers are the printed ones
(3-4 significant digits); "kernel alone", "warp/segment kernel", "CUB batched
kernel" and "batch" times of a CUDA move_data row's note become its
measurements, as plot_results.py draws them.

Usage: python3 bench/table_to_json.py bench-cuda.txt OUT.json [--date YYYY-MM-DD] [--commit C]
"""

import argparse
import json
import re
import sys

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
BYTES = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
HEADER = re.compile(r"^== (?P<group>.+?) on (?P<device>\S+) \| limit: (?P<limit>.+?) \| baseline: (?P<baseline>.+)$")
# the eight columns after the case: bytes, time, GB/s, limit GB/s, %lim, baseline, speedup
ROW = re.compile(
    r"^(?P<case>.*?)\s+(?P<bytes>-|[0-9.]+ (?:B|KiB|MiB|GiB|TiB))\s+(?P<seconds>-|[0-9.]+ (?:ns|us|ms|s))"
    r"\s+(?P<gbs>-|[0-9.]+)\s+(?P<limit_gbs>-|[0-9.]+)\s+(?P<percent>-|[0-9]+%\??)"
    r"\s+(?P<baseline>-|[0-9.]+ (?:ns|us|ms|s))\s+(?P<speedup>-|no work|[0-9.e+]+x)(?:\s{2}(?P<targets>.*))?$")
TARGET = re.compile(r"(PASS|MISS) (.+?)(?=\s{2}(?:PASS|MISS) |$)")
MEASUREMENTS = {
    "kernel_seconds": r"kernel alone \([^)]*\) ([0-9.]+ (?:ns|us|ms|s))",
    "warp_per_segment_kernel_seconds": r"warp/segment kernel ([0-9.]+ (?:ns|us|ms|s))",
    "cub_batched_kernel_seconds": r"CUB batched kernel ([0-9.]+ (?:ns|us|ms|s))",
    "memcpy_batch_seconds": r"\bbatch ([0-9.]+ (?:ns|us|ms|s))",
}


def seconds(text):
    if text in (None, "-"):
        return None
    value, unit = text.split()
    return float(value) * UNITS[unit]


def nbytes(text):
    if text in (None, "-"):
        return 0
    value, unit = text.split()
    return float(value) * BYTES[unit]


def targets(text):
    return [{"name": name.strip(), "pass": verdict == "PASS"} for verdict, name in TARGET.findall(text or "")]


def parameters(case):
    result = {}
    segment = re.search(r"segments=([0-9.]+ (?:B|KiB|MiB)) x", case)
    if segment:
        result["segment_bytes"] = str(int(nbytes(segment.group(1))))
    return result


def parse(lines):
    rows, group, pending_name = [], None, ""
    for line in lines:
        line = line.rstrip("\n")
        header = HEADER.match(line)
        if header:
            group = header.groupdict()
            group["limit"] = re.sub(r" of the same bytes$", "", group["limit"])
            group["baseline"] = re.sub(r" on the same data$", "", group["baseline"])
            continue
        if group is None or not line.strip() or line.startswith("case "):
            if not line.strip() or line.startswith("=="):
                group = None if line.startswith("==") else group
            continue
        match = ROW.match(line)
        if match and (match.group("case").strip() or pending_name):
            fields = match.groupdict()
            case = fields["case"].strip() or pending_name
            pending_name = ""
            size, time = nbytes(fields["bytes"]), seconds(fields["seconds"])
            limit_gbs = None if fields["limit_gbs"] == "-" else float(fields["limit_gbs"])
            limit_seconds = size / (limit_gbs * 1e9) if size and limit_gbs else None
            baseline_seconds = seconds(fields["baseline"])
            speedup = None
            if fields["speedup"] not in ("-", "no work"):
                speedup = float(fields["speedup"].rstrip("x"))
            rows.append({
                "group": group["group"], "device": group["device"], "case": case,
                "parameters": parameters(case), "bytes": size, "run_bytes": None,
                "seconds": time, "device_seconds": None,
                "limit": "" if group["limit"] == "-" else group["limit"], "limit_seconds": limit_seconds,
                "fraction_of_limit": limit_seconds / time if limit_seconds and time else None,
                "baseline": "" if group["baseline"] == "-" else group["baseline"],
                "baseline_seconds": baseline_seconds, "speedup_over_baseline": speedup,
                "baseline_does_no_work": fields["speedup"] == "no work",
                "unreliable": fields["percent"].endswith("?"),
                "measurements": {}, "targets": targets(fields["targets"]), "note": "",
            })
            continue
        if line.startswith(" ") and rows:
            text = line.strip()
            if text.startswith(("PASS ", "MISS ")):
                rows[-1]["targets"] += targets(text)
            elif not text.startswith("UNRELIABLE"):
                rows[-1]["note"] = (rows[-1]["note"] + " " + text).strip()
                for key, pattern in MEASUREMENTS.items():
                    found = re.search(pattern, rows[-1]["note"])
                    if found:
                        rows[-1]["measurements"][key] = seconds(found.group(1))
            continue
        # a case name too long for its column, on a line of its own
        pending_name = line.strip()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="the saved output of mtsarray-bench")
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--date", default="", help="the run's date (YYYY-MM-DD)")
    parser.add_argument("--commit", default="", help="the commit it measured")
    args = parser.parse_args(argv)
    with open(args.table) as file:
        lines = file.readlines()
    machine = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("machine:")), "")
    mode = next((line.split(",")[-1].strip().replace(" mode", "") for line in lines
                 if line.startswith("mtsarray-bench:")), "")
    rows = parse(lines)
    if not rows:
        sys.exit(f"no rows found in {args.table}")
    with open(args.out, "w") as file:
        json.dump({"machine": machine, "date": args.date, "mode": mode, "commit": args.commit, "rows": rows},
                  file, indent=1)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
