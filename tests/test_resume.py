"""Resumable class runs: a re-run skips what is graded, a change regrades, a killed run loses and repeats nothing."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from torchgrade.classroom.batch import grade_class
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.ledger import Ledger, Record
from torchgrade.engine.fingerprint import grader_key
from torchgrade.classroom.submissions import discover

from tiny_course import ROOT, copy_class, make_course, slow_one_hot, student


@pytest.fixture
def course(tmp_path):
    return load_assignment(make_course(tmp_path / "course"))


def graded(course, cls, out, **options):
    return grade_class(discover([cls], ("tensors",)), course, out, device="cpu", **options)


def test_a_rerun_skips_what_is_graded_regrades_what_changed_and_force_regrades_all(course, tmp_path):
    cls = copy_class({"alice": "reference", "bob": "stub", "carol": "reference"}, tmp_path / "class")
    out = tmp_path / "out"
    assert graded(course, cls, out).graded == ["alice", "bob", "carol"]

    again = graded(course, cls, out)
    assert again.graded == [] and again.skipped == ["alice", "bob", "carol"]
    assert [g.score for g in again.grades] == [5.0, 0.0, 5.0]  # read back from results.json

    student(cls / "bob", "reference")  # bob hands in a new version
    changed = graded(course, cls, out)
    assert changed.graded == ["bob"] and changed.skipped == ["alice", "carol"]
    assert json.loads((out / "bob" / "results.json").read_text())["score"] == 5.0

    assert graded(course, cls, out, force=True).graded == ["alice", "bob", "carol"]
    assert sorted(Ledger(out).load()) == ["alice", "bob", "carol"]
    assert len((out / "ledger.jsonl").read_text().splitlines()) == 3


def test_a_change_to_the_checks_or_the_device_choice_regrades(course, tmp_path):
    cls = copy_class({"alice": "reference"}, tmp_path / "class")
    out = tmp_path / "out"
    graded(course, cls, out)
    key = grader_key(course, device="cpu")
    assert grader_key(course, device="all") != key

    check_file = course.checks_dir / "visible" / "test_tensors.py"
    check_file.write_text(check_file.read_text() + "\n# a new check would go here\n")
    assert grader_key(course, device="cpu") != key
    assert graded(course, cls, out).graded == ["alice"]


def test_a_class_graded_on_a_machine_with_a_gpu_is_graded_again_on_one_without(course, tmp_path, monkeypatch):
    """The CUDA checks a GPU graded are not what a machine without one grades (the stand-in, or nothing):
    a class folder moved between the two is graded again, unless only the CPU was asked for."""
    from torchgrade.sandbox import isolation

    cls = copy_class({"alice": "reference"}, tmp_path / "class")
    out = tmp_path / "out"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(isolation, "gpu_device_nodes", lambda: [])
    here = {device: grader_key(course, device=device) for device in ("cpu", "all")}
    assert grade_class(discover([cls], ("tensors",)), course, out, device="all").graded == ["alice"]
    monkeypatch.setattr(isolation, "gpu_device_nodes", lambda: ["/dev/nvidia0"])  # as on the GPU machine
    assert grader_key(course, device="cpu") == here["cpu"] and grader_key(course, device="all") != here["all"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # its GPU hidden: another grader again
    assert len({here["all"], grader_key(course, device="all")}) == 2
    assert grade_class(discover([cls], ("tensors",)), course, out, device="all").graded == ["alice"]


def test_a_run_under_another_cuda_standin_policy_regrades(course, tmp_path, monkeypatch):
    """TORCHGRADE_CUDA_STANDIN overrides the course's cuda_standin for one run: what a run graded under
    `off` (CUDA checks set aside) is not what a run under `score` would give (docs/devices.md)."""
    cls = copy_class({"alice": "reference"}, tmp_path / "class")
    out = tmp_path / "out"
    monkeypatch.delenv("TORCHGRADE_CUDA_STANDIN", raising=False)
    key = grader_key(course, device="all")
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", "off")
    off = grader_key(course, device="all")
    assert grade_class(discover([cls], ("tensors",)), course, out, device="all").graded == ["alice"]
    monkeypatch.setenv("TORCHGRADE_CUDA_STANDIN", "score")
    assert len({key, off, grader_key(course, device="all")}) == 3
    assert grade_class(discover([cls], ("tensors",)), course, out, device="all").graded == ["alice"]
    assert grade_class(discover([cls], ("tensors",)), course, out, device="all").skipped == ["alice"]


@pytest.mark.parametrize("part", ["graders/probes/mine.py", "graders/hints.yaml"])
def test_a_change_to_the_courses_own_probes_or_hints_regrades(course, part):
    """They decide what a check runs and what its report says, as the checks do."""
    key = grader_key(course, device="cpu")
    path = course.root / part
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# new\n")
    assert grader_key(course, device="cpu") != key


def test_a_missing_results_file_is_graded_again(course, tmp_path):
    cls = copy_class({"alice": "reference"}, tmp_path / "class")
    out = tmp_path / "out"
    graded(course, cls, out)
    (out / "alice" / "results.json").unlink()
    assert graded(course, cls, out).graded == ["alice"]


def test_a_torn_last_line_is_ignored_and_the_next_record_starts_a_line_of_its_own(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append(Record("alice", "dir:1", "g", 5.0, 5.0))
    with open(ledger.path, "a") as f:
        f.write('{"name": "bob", "content": "dir:2", "gra')  # killed in the middle of a write
    assert sorted(ledger.load()) == ["alice"]
    ledger.append(Record("carol", "dir:3", "g", 1.0, 5.0))
    assert sorted(ledger.load()) == ["alice", "carol"]


def _records(out):
    return [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines() if line.endswith("}")]


def test_killing_the_grader_mid_batch_then_rerunning_gives_every_result_exactly_once(course, tmp_path):
    names = [f"student{i:02d}" for i in range(10)]
    cls = tmp_path / "class"
    for name in names:
        student(cls / name, extra=slow_one_hot(0.2))  # about half a second each: time to kill in between
    out = tmp_path / "out"
    command = [sys.executable, "-c", "from torchgrade.cli import main; main()", "grade", str(cls), "--out", str(out),
               "--device", "cpu", "--assignment", str(course.path), "--no-progress"]
    grader = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not ((out / "ledger.jsonl").exists() and len(_records(out)) >= 3):
            assert grader.poll() is None, "the grader finished before it could be killed"
            assert time.monotonic() < deadline, "the grader recorded nothing in two minutes"
            time.sleep(0.02)
        os.kill(grader.pid, signal.SIGKILL)
    finally:
        grader.kill()
        grader.wait()
    done_before = {r["name"] for r in _records(out)}
    assert 3 <= len(done_before) < len(names)
    assert not (out / "grades.csv").exists()  # the run really was cut short

    rerun = CliRunner().invoke(main, command[3:])
    assert rerun.exit_code == 0, rerun.output
    assert f"graded {len(names) - len(done_before)}, skipped {len(done_before)} already graded" in rerun.output
    for name in done_before:
        assert f"{name}:" not in rerun.output  # not graded again

    records = _records(out)
    assert sorted(r["name"] for r in records) == names  # every result exactly once
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["submission"] for r in rows) == names
    assert all(float(r["score"]) == 5.0 for r in rows)
    for name in names:
        assert json.loads((out / name / "results.json").read_text())["score"] == 5.0
