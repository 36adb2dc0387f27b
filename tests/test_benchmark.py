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
