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
