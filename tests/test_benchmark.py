"""The class benchmark's own arithmetic (its figures are measured, never asserted: see docs/class-grading.md)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import ROOT


def load_benchmark():
    spec = importlib.util.spec_from_file_location("class_benchmark", ROOT / "benchmarks" / "class_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_says_how_much_of_the_cpu_a_virtual_machines_host_took(monkeypatch):
    bench = load_benchmark()
    monkeypatch.setattr(bench, "_cpu_ticks", lambda: (60, 1100))  # 50 of 1000 ticks stolen since (10, 100)
    assert bench.stolen((10, 100)) == "  (host took 5% of the CPU)"
    assert bench._most_stolen[0] == 0.05
    assert bench.stolen(None) == ""  # no /proc/stat (macOS, Windows): nothing said


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_the_cpu_ticks_come_from_this_machine():
    stolen, every = load_benchmark()._cpu_ticks()
    assert 0 <= stolen < every


def test_the_stand_in_cost_is_the_ratio_of_the_medians_of_interleaved_runs():
    off, score, ratio, each = load_benchmark().standin_figures([10.0, 12.0, 30.0], [21.0, 20.0, 24.0])
    assert (off, score) == (12.0, 21.0) and ratio == 1.75  # a slow outlier (30 s) moves no median
    assert each == [2.1, 20.0 / 12.0, 0.8]


def test_the_stand_in_floor_counts_the_cpu_twins_of_the_stand_in_checks_that_ran_but_not_a_modules_start(tmp_path):
    import json

    def check(nodeid, device, outcome, duration):
        return {"name": nodeid, "extra_data": {"nodeid": nodeid, "device": device, "outcome": outcome,
                                               "duration": duration, "exercise": "e"}}

    for student in ("ann", "bob"):
        (tmp_path / student).mkdir()
        (tmp_path / student / "results.json").write_text(json.dumps({"tests": [
            check("t.py::s[cpu]", "cpu", "passed", 9.0), check("t.py::s[cuda]", "cuda", "passed", 1.0),  # module start
            check("t.py::a[cpu]", "cpu", "passed", 0.5), check("t.py::a[cuda]", "cuda", "failed", 2.0),
            check("t.py::b[cpu-x]", "cpu", "passed", 0.25), check("t.py::b[cuda-x]", "cuda", "passed", 1.0),
            check("t.py::c[cpu]", "cpu", "passed", 4.0), check("t.py::c[cuda]", "cuda", "skipped", 0.0),  # set aside
            check("t.py::d", None, "passed", 8.0)]}))
    own, twins, floor = load_benchmark().standin_floor(tmp_path, off_seconds=15.0)
    # c's twin is not counted (its stand-in check did not run), nor s (it started the module's process)
    assert (own, twins) == (6.0, 1.5)
    assert floor == 1.1


def test_the_envelope_leaves_no_cgroup_behind_even_with_a_process_still_in_it():
    spec = importlib.util.spec_from_file_location("envelope", ROOT / "benchmarks" / "envelope.py")
    envelope_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(envelope_module)
    envelope = envelope_module.Envelope()
    if not envelope.folders:
        pytest.skip(f"no cgroup here: {envelope.how}")
    folders = list(envelope.folders)
    try:  # a command that leaves a process of its own in the cgroup, as a sandbox ending with it may
        _, _, status = envelope.run(["sh", "-c", "sleep 60 > /dev/null 2>&1 &"])
        assert status == 0 and (folders[0] / "cgroup.procs").read_text().split()
    finally:
        envelope.close()
    assert not any(folder.exists() for folder in folders)
