"""bench/plot_results.py draws every family of a run, the GPU plan rows (no
floor) among the planning ones, in the venv scripts/setup.sh makes."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plot_results.py")


def row(group, case, measurements=None, **extra):
    result = {"group": group, "device": "cpu", "case": case, "parameters": {}, "bytes": 2.0**20,
              "seconds": 1e-4, "limit": "memcpy", "limit_seconds": 8e-5, "fraction_of_limit": 0.8,
              "baseline": "SimpleDataArray", "baseline_seconds": 2e-4, "speedup_over_baseline": 2.0,
              "measurements": measurements or {}, "targets": [{"name": ">=70% memcpy", "pass": True}], "note": ""}
    result.update(extra)
    return result


def test_every_family_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [
        row("move_data", "f64 moves=1e4 props=32 comps=- scattered"),
        row("move_data", "f64 moves=1e5 props=32 comps=- scattered", bytes=2.0**24),
        row("copy", "f64 elements=1e6", speedup_over_baseline=None, baseline_does_no_work=True),
        row("move_data planning", "GPU table, f64 moves=1e5 scattered",
            {"nanoseconds_per_movement": 3.0, "floor_nanoseconds_per_movement": 2.0}),
        row("move_data planning", "GPU plan, f64 moves=1e5 scattered", {"nanoseconds_per_movement": 20.0}),
    ]
    results = tmp_path / "bench.json"
    results.write_text(json.dumps({"machine": "Test CPU, 2 CPUs", "date": "2026-12-02T00:00:00Z",
                                   "mode": "quick", "commit": "abc123", "rows": rows}))
    out = tmp_path / "plots"
    subprocess.run([sys.executable, SCRIPT, str(results), "--out", str(out)], check=True)
    assert sorted(os.listdir(out)) == ["cpu_copy.png", "cpu_move_data.png", "cpu_move_data_planning.png"]
