"""The plain-sentence summary of a benchmark run (bench/summary.py)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import summary  # noqa: E402


def row(group, case, speedup=None, fraction=0.8, targets=(), device="cpu", baseline="SimpleDataArray", **extra):
    result = {
        "group": group, "device": device, "case": case, "parameters": extra.pop("parameters", {}),
        "limit": "memcpy", "fraction_of_limit": fraction, "baseline": baseline,
        "speedup_over_baseline": speedup, "targets": [{"name": n, "pass": p} for n, p in targets],
        "unreliable": False, "baseline_does_no_work": False,
    }
    result.update(extra)
    return result


def results(rows, cpus=2):
    return {"cpu_model": "Test CPU", "cpus": cpus, "host_threads": cpus, "rows": rows}


def test_speedup_range_per_group_and_baseline():
    lines = summary.summarize(results([
        row("move_data", "a", 1.4), row("move_data", "b", 3.8), row("move_data", "c", 2.0),
        row("swap_axes", "d", 12.0),
    ]))
    assert "  move_data on cpu: 1.40-3.80x SimpleDataArray (3 rows)" in lines
    assert "  swap_axes on cpu: 12.0x SimpleDataArray (1 row)" in lines


def test_no_speedup_where_the_baseline_does_no_work():
    lines = summary.summarize(results([row("copy", "e", 0.001, baseline_does_no_work=True)]))
    assert not any("copy on cpu" in line and "SimpleDataArray" in line for line in lines)
    assert "  copy on cpu: 80% of memcpy" in lines


def test_unreliable_rows_are_left_out_and_named():
    lines = summary.summarize(results([row("move_data", "a", 2.0), row("move_data", "b", 90.0, fraction=31.9,
                                                                       unreliable=True)]))
    assert "  move_data on cpu: 2.00x SimpleDataArray (1 row)" in lines
    assert any("1 row was above the physical limit" in line for line in lines)


def test_targets_counted_and_misses_explained():
    lines = summary.summarize(results([
        row("move_data", "a", 2.0, targets=[(">=1x SDA", True), (">=70% memcpy", True)]),
        row("thread split", "copy 8 threads", targets=[(">=1.5x 1 thread", False)], parameters={"threads": "8"}),
        row("move_data planning", "GPU table", targets=[("<=4 ns per movement", False)]),
        row("create", "f64 elements=1e7", targets=[(">=70% memset", False)]),
    ]))
    assert "Targets: 2 of 5 met." in lines
    assert "2 missed targets are expected on a shared or small machine like this one:" in lines
    assert "  1 x more host threads than CPUs: thread split cpu copy 8 threads: >=1.5x 1 thread" in lines
    assert any(line.startswith("  1 x a time target") for line in lines)
    assert "1 missed target is not explained by this machine; worth a rerun, then a look:" in lines
    assert "  create cpu f64 elements=1e7: >=70% memset" in lines


def test_rows_on_every_cpu_of_the_machine():
    rows = [
        row("thread split", "copy [2 threads]", targets=[(">=1x one thread", False)]),
        row("move_data", "moves=1e5 [1 thread]", targets=[(">=70% memcpy", False)]),
    ]
    lines = summary.summarize(results(rows), load=1.5)
    assert "  1 x 2 threads on all 2 CPUs while other work ran (load 1.50): thread split cpu copy [2 threads]: " \
        ">=1x one thread" in lines
    assert "  move_data cpu moves=1e5 [1 thread]: >=70% memcpy" in lines
    # on a quiet machine, nothing excuses them
    lines = summary.summarize(results(rows), load=0.2)
    assert "  thread split cpu copy [2 threads]: >=1x one thread" in lines
    assert "  move_data cpu moves=1e5 [1 thread]: >=70% memcpy" in lines


def test_long_lines_are_wrapped(tmp_path, capsys):
    many = [row("create", f"f64 elements=1e{i} with a long name to wrap", targets=[(">=70% memset", False)])
            for i in range(6)]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(results(many)))
    summary.main([str(path), "--load", "5"])
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= summary.WIDTH


def test_every_miss_is_the_machines_when_it_was_busy():
    lines = summary.summarize(results([row("create", "x", targets=[(">=70% memset", False)])]), load=3.5)
    assert any("load average 3.50 at the start" in line for line in lines)
    assert any("the machine was busy when the run started" in line for line in lines)
    assert any(line.startswith("The machine was busy (load average 3.50 > 2 CPUs)") for line in lines)
    assert not any("not explained" in line for line in lines)


def test_all_met(tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(results([row("move_data", "a", 2.0, targets=[(">=1x SDA", True)])])))
    assert summary.main([str(path), "--load", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "Targets: 1 of 1 met." in out
    assert "No missed target is left unexplained." in out
