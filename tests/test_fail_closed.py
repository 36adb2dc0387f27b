"""`torchgrade grade` fails closed: without a sandbox stronger than `process` it refuses, unless asked.

A machine without bubblewrap, where torchgrade does not run as root, is simulated in a subprocess:
a PATH without `bwrap`, and `os.geteuid` answering an ordinary user's id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, make_submission, small_course

from torchgrade.sandbox.isolation import ENV_VAR

#: The command line, on a machine with neither bubblewrap (see PATH below) nor root.
NO_SANDBOX = "import os, sys; os.geteuid = lambda: 1000; sys.argv[0] = 'torchgrade'; " \
             "from torchgrade.cli import main; main()"


@pytest.fixture
def small_assignment(tmp_path):
    return small_course(tmp_path, {"tensors": {"broadcast_shape": 2}})


def without_sandbox(tmp_path, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    environment.update(PATH=str(empty), **(env or {}))
    return subprocess.run([sys.executable, "-c", NO_SANDBOX, *map(str, args)], env=environment, cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def snooping_submission(tmp_path):
    """The reference, plus a line at import that leaves a file behind: it shows whether student code ran."""
    marker = tmp_path / "student-code-ran"
    folder = make_submission(tmp_path / "class" / "alice",
                             append={"tensors": f"open({str(marker)!r}, 'w').close()"})
    return folder.parent, marker


@pytest.mark.parametrize("jobs", ["1", "2"])  # -j 2: the parent's sandbox only proves the level
def test_without_bubblewrap_grade_refuses_in_one_line_and_runs_nothing(tmp_path, small_assignment, jobs):
    klass, marker = snooping_submission(tmp_path)
    out = tmp_path / "out"
    done = without_sandbox(tmp_path, "grade", klass, "--out", out, "--device", "cpu", "--assignment", small_assignment,
                           "-j", jobs)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for words in ("isolation 'process'", "bubblewrap is not installed", "not run as root", "other submissions",
                  "sudo apt-get install bubblewrap", "sudo apt-get install -y bubblewrap", "--isolation process",
                  f"{ENV_VAR}=process"):
        assert words in lines[0]
    assert not out.exists() and not marker.exists()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_asked_for_process_isolation_grades_and_says_so_everywhere(tmp_path, small_assignment, how):
    klass, marker = snooping_submission(tmp_path)
    out = tmp_path / "out"
    args = ["grade", klass, "--out", out, "--device", "cpu", "--assignment", small_assignment]
    done = without_sandbox(tmp_path, *args, "--isolation", "process") if how == "option" else \
        without_sandbox(tmp_path, *args, env={ENV_VAR: "process"})
    assert done.returncode == 0, done.stderr
    assert "warning: grading at isolation 'process'" in done.stderr
    document = json.loads((out / "alice" / "results.json").read_text())
    assert document["extra_data"]["isolation"] == "process"
    assert document["score"] == document["extra_data"]["max_score"] > 0
    assert 'id="isolation-warning"' in (out / "alice" / "report.html").read_text()
    assert marker.exists()


def test_check_keeps_working_without_bubblewrap(tmp_path, small_assignment):
    report = tmp_path / "report"
    done = without_sandbox(tmp_path, "check", "tensors.broadcast_shape", "--path", ROOT / "reference",
                           "--report", report, "--assignment", small_assignment)
    assert done.returncode == 0, done.stderr
    assert json.loads((report / "results.json").read_text())["extra_data"]["isolation"] == "process"


def test_a_report_graded_in_a_sandbox_has_no_warning(tmp_path):
    from torchgrade.engine.config import load_assignment
    from torchgrade.outputs.report import render_report
    from torchgrade.engine.scoring import Grade

    assignment = load_assignment(ROOT / "assignment.yaml")
    assert 'id="isolation-warning"' not in render_report(Grade("alice", [], isolation="bwrap"), assignment)
    assert 'id="isolation-warning"' in render_report(Grade("alice", [], isolation="process"), assignment)


def test_a_pool_s_parent_proves_the_level_with_a_sandbox_that_ends_at_once():
    import psutil

    from torchgrade.sandbox import host

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert host.choose_level() == host.isolation_level()  # the best level here, really started
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before  # and ended: nothing kept
