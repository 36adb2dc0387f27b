"""The grader's own failures are never charged to a student (torchgrade/engine/grader_errors.py).

The call watch (the profiler's, as where no compiled observer is built) is broken on purpose, as torch 2.4 broke it (``_ExperimentalConfig`` refused with a
TypeError when the watch arms): the sandbox runs a copy of the engine in which torch's profiler config
cannot be made (`host._PACKAGE_ROOT`, the engine the zygote imports, and what bubblewrap binds), while this process stays the real
one. Then `check` exits 2 with one line, `grade` marks the rows it hit as grader errors and grades the
whole class, and the Gradescope autograder fails closed. With the watch whole, a submission that breaks
it itself, or only says it broke, is charged for it (and tests/hostile/imitate_grader_errors.py).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import xmlschema
from click.testing import CliRunner
from tiny_course import ROOT, copy_class, make_course, student

from torchgrade.engine import grader_errors
from torchgrade.cli import main
from torchgrade.sandbox import host, isolation

HERE = Path(__file__).resolve().parent
GRADESCOPE = json.loads((HERE / "gradescope_results.schema.json").read_text())
JUNIT_XSD = xmlschema.XMLSchema(str(HERE / "junit-10.xsd"))

#: Appended to the copy's recorder: torch's profiler config cannot be made, whatever the arguments.
BREAK_THE_WATCH = '''

def _refused(*args, **kwargs):
    raise TypeError("__init__(): incompatible constructor arguments. (the call watch broken on purpose by "
                    "tests/test_grader_errors.py)")


torch._C._profiler._ExperimentalConfig = _refused
'''
#: The one student's module the attack test uses: it breaks the watch itself, from its own process.
BREAKS_IT_ITSELF = '''
import torch as _torch
_torch._C._profiler._ExperimentalConfig = lambda *a, **k: (_ for _ in ()).throw(TypeError("incompatible"))
_recorder = __import__("sys").modules.get("torchgrade.sandbox.recorder")
if _recorder is not None:
    _recorder._config.cache_clear()
'''


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The tiny course, its one_hot with forbidden calls (the watch arms for its checks only)."""
    path = make_course(tmp_path_factory.mktemp("course"))
    text = path.read_text()
    path.write_text(text.replace("one_hot: 3", "one_hot: {points: 3, forbidden: [one_hot]}"))
    return path


@pytest.fixture(scope="module")
def broken_engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine")
    shutil.copytree(ROOT / "torchgrade", root / "torchgrade", ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "torchgrade" / "sandbox" / "recorder.py", "a", encoding="utf-8") as f:
        f.write(BREAK_THE_WATCH)
    return root


@pytest.fixture
def no_faults():
    """No fault, nor verdict, remembered from another test (nor left for the next)."""
    grader_errors.reset()
    yield
    grader_errors.reset()


@pytest.fixture
def fresh_sandboxes(monkeypatch):
    """Zygotes of this test's own (closed after it; none taken up from those resting), and no fault remembered
    from another test."""
    monkeypatch.setattr(host, "_zygotes", {})
    monkeypatch.setattr(host, "_resting", {})
    monkeypatch.setattr(host, "_chosen", {})
    grader_errors.reset()
    yield monkeypatch
    host.close_all()
    grader_errors.reset()


@pytest.fixture
def broken_watch(fresh_sandboxes, broken_engine):
    fresh_sandboxes.setenv("TORCHGRADE_OBSERVER", "off")  # the profiler watches, as where no compiler is
    fresh_sandboxes.setattr(host, "_PACKAGE_ROOT", broken_engine)
    fresh_sandboxes.setattr(isolation, "_ENGINE_DIR", broken_engine / "torchgrade")  # (what bubblewrap binds)
    return fresh_sandboxes


def one_line_exit_2(result, *words: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchgrade: error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


WATCH_LINE = ("torchgrade's call watch cannot start with torch", "cannot watch every thread",
              "install a torch release torchgrade supports (torch>=", "or report this")


def test_a_broken_watch_is_the_graders_error_in_check_grade_and_the_autograder(broken_watch, course, tmp_path):
    """One sandbox with the broken engine for the three commands (each start imports torch: seconds)."""
    # check: exit 2, one line, nothing charged to the student
    result = CliRunner().invoke(main, ["check", "--path", str(ROOT / "reference"), "--assignment", str(course),
                                       "--report", str(tmp_path / "report")])
    one_line_exit_2(result, *WATCH_LINE)
    assert "FAILED" not in result.output and "called:" not in result.output

    # grade: the rows the broken watch hit are grader errors, the others are graded, the class goes on
    cls = copy_class({"alice": "reference", "bob": "stub"}, tmp_path / "class")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["grade", str(cls), "--out", str(out), "--device", "cpu", "--assignment",
                                       str(course), "--no-progress", "-j", "1"])
    assert result.exit_code in (0, 1), result.output
    for name in ("alice", "bob"):
        document = json.loads((out / name / "results.json").read_text())
        jsonschema.validate(document, GRADESCOPE)
        hit = [t for t in document["tests"] if "one_hot" in t["name"]]
        assert hit and all(t["extra_data"]["outcome"] == "error" and "grader error (not your fault" in t["output"]
                           and "call watch cannot start" in t["output"] for t in hit), hit
    alice = json.loads((out / "alice" / "results.json").read_text())
    assert [t["extra_data"]["outcome"] for t in alice["tests"] if "broadcast_shape" in t["name"]] == ["passed"]
    JUNIT_XSD.validate(str(out / "junit.xml"))
    assert 'type="error"' in (out / "junit.xml").read_text()
    assert {r["submission"] for r in csv.DictReader((out / "grades.csv").open())} >= {"alice", "bob"}

    # the Gradescope autograder: fails closed, every target 0 with the reason, valid for Gradescope
    from torchgrade.classroom import autograder as gradescope
    from torchgrade.engine.config import load_assignment

    results = tmp_path / "results" / "results.json"
    student(tmp_path / "submission")
    broken_watch.setattr(gradescope, "prove_level", lambda *args: "process")  # (this machine's level is not the test)
    assert gradescope.autograde(tmp_path / "submission", results, "cpu", load_assignment(course), [], []) == 0
    document = json.loads(results.read_text())
    jsonschema.validate(document, GRADESCOPE)
    assert document["score"] == 0 and document["tests"]
    assert all("The autograder is misconfigured" in t["output"] and "call watch cannot start" in t["output"]
               for t in document["tests"])


def test_a_submission_that_breaks_the_watch_itself_is_charged_for_it(fresh_sandboxes, course, tmp_path):
    fresh_sandboxes.setenv("TORCHGRADE_OBSERVER", "off")  # (the compiled observer takes no config to break)
    folder = student(tmp_path / "mallory", extra=BREAKS_IT_ITSELF)
    result = CliRunner().invoke(main, ["check", "--path", str(folder), "--assignment", str(course),
                                       "--report", str(tmp_path / "report")])
    assert result.exit_code == 1, result.output
    document = json.loads((tmp_path / "report" / "results.json").read_text())
    hit = [t for t in document["tests"] if "one_hot" in t["name"]]
    assert hit and all(t["score"] == 0 and "a run without your code does not have" in t["output"]
                       and "grader error" not in t["output"] for t in hit), hit
    assert all(t["score"] == t["max_score"] > 0 for t in document["tests"] if "broadcast_shape" in t["name"])
    assert grader_errors.FAULTS == []


@pytest.mark.parametrize("reply", [{"grader_fault": "watch"}, {"grader_fault": {"stage": "reference"}},
                                   {"grader_fault": {"stage": "watch", "error": 3}}])
def test_a_claim_of_the_wrong_shape_is_the_submissions(reply):
    assert grader_errors.claim(reply) == ("forged", "")
    assert grader_errors.judge(reply, None, "tensors", "view", {}, 1.0, True, False)  # (no canary asked)


@pytest.mark.parametrize("reply", [{"grader_fault": {"stage": "watch", "error": "TypeError: incompatible"}},
                                   {"grader_fault": {"stage": "standin", "error": "RuntimeError: no"}},
                                   {"sandbox_error": "RuntimeError: Found no NVIDIA driver on your system"}],
                         ids=["watch", "standin", "inputs"])
def test_a_claim_that_a_run_without_the_students_code_does_not_confirm_is_the_submissions(no_faults, tmp_path, reply):
    import torch

    sandbox = host.Sandbox(student(tmp_path / "alice"))
    request = {"probe": "call", "args": [torch.tensor([0, 2, 1]), 3], "kwargs": {}, "options": {}}
    try:
        text = grader_errors.judge(reply, sandbox, "tensors", "one_hot", request, 10.0, True,
                                   "standin" in str(reply))
    finally:
        sandbox.close()
    assert "a run without your code does not have" in text
    assert grader_errors.FAULTS == []


def test_the_same_refuted_claim_about_inputs_on_the_same_devices_is_tested_once(no_faults, tmp_path, monkeypatch):
    """A submission that breaks its own worker claims, check after check, that the sandbox could not take
    the inputs: one run without its code per error and devices refutes them all (a hostile submission
    once cost a run per check, a minute of the grader's time), while another error is tested again."""
    import torch

    runs = []
    real = grader_errors._canary
    monkeypatch.setattr(grader_errors, "_canary", lambda *args: runs.append(args[3]["args"]) or real(*args))
    sandbox = host.Sandbox(student(tmp_path / "alice"))
    reply = {"sandbox_error": "WireError: reply is not plain data (maximum recursion depth exceeded)"}
    try:
        for n in (3, 4, 5):
            request = {"probe": "call", "args": [torch.tensor([0, 2, 1]), n], "kwargs": {}, "options": {}}
            assert "a run without your code does not have" in grader_errors.judge(
                reply, sandbox, "tensors", "one_hot", request, 10.0, True, False)
        assert len(runs) == 1
        other = {"sandbox_error": "RuntimeError: something else"}
        assert grader_errors.judge(other, sandbox, "tensors", "one_hot", request, 10.0, True, False)
        assert len(runs) == 2
    finally:
        sandbox.close()
    assert grader_errors.FAULTS == []
