"""What no check exercises (torchgrade/authoring/coverage.py, sandbox/linetrace.py), the audit page that keeps the
targets a run did not audit (torchgrade/authoring/auditpage.py), and a course whose checks are weak on purpose
(tests/weak_course.py): the audit reports each of its weaknesses."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from torchgrade.authoring.audit import Audit, MutantResult, TargetAudit, lines
from torchgrade.authoring.coverage import load_ran, save_ran, statements, target_coverage
from torchgrade.authoring.mutants import Mutant
from torchgrade.sandbox.linetrace import LineTrace

MODULE = '''\
"""A module."""

import torch


class Net(torch.nn.Module):
    """A class target: its method bodies run when it is called."""

    scale = 2  # a class attribute: runs at import

    def forward(self, x):
        """Docstring."""
        # BEGIN SOLUTION
        y = x * self.scale  # a comment

        for i in range(x.shape[0]):
            y = y + _helper(
                y, i)
        return y
        # END SOLUTION


def _helper(y, i):
    """A private helper the target calls: its body counts."""
    if i > 5:
        pass
    return y * 1


def other(x):
    return x - 1
'''


def _module(tmp_path: Path) -> Path:
    path = tmp_path / "mod.py"
    path.write_text(MODULE)
    return path


def test_counted_statements_are_the_region_that_runs_when_the_target_is_called(tmp_path):
    """Between the markers and in the private helpers it calls; no def or class line, class attribute,
    docstring, comment, blank line or `pass`; a statement over two lines counts once; another target not at all."""
    found = statements(_module(tmp_path), "Net")
    assert [(s.line, s.text) for s in found] == [
        (14, "y = x * self.scale  # a comment"), (16, "for i in range(x.shape[0]):"), (17, "y = y + _helper("),
        (19, "return y"), (25, "if i > 5:"), (27, "return y * 1")]
    assert found[2].header == (17, 18)  # its continuation line is its own
    assert found[1].body == (17, 18)  # the loop's body begins there


def test_the_trace_sees_the_lines_run_in_its_file_only_and_the_loops_run_twice(tmp_path):
    import importlib.util

    path = _module(tmp_path)
    spec = importlib.util.spec_from_file_location("mod_traced", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import torch

    with LineTrace(str(path)) as once:
        module.Net()(torch.ones(1, 2))
    with LineTrace(str(path)) as twice:
        module.Net()(torch.ones(2, 2))
    assert {14, 16, 17, 19, 25, 27} <= once.lines and not once.lines & {31}  # `other` not called
    assert 17 not in once.repeated and 17 in twice.repeated
    reply = once.reply()
    assert reply["lines"] == sorted(once.lines) and reply["lines_elsewhere"] is False
    json.dumps(reply)  # plain data: what crosses back to the trusted process


def test_lines_no_check_runs_loops_run_once_and_lines_no_mutant_changes(tmp_path):
    path = _module(tmp_path)
    # mutants on these lines (18: the second line of the statement at 17, which it changes)
    mutants = [Mutant("mod.Net", "arith", "mod.py", n, "", "", "", str(n)) for n in (14, 16, 18, 25)]
    # what checks of one-row inputs run: the loop's body once, the helper's `pass` branch never
    ran = {"lines": {14, 16, 17, 19, 25, 27}, "repeated": {16}, "elsewhere": False}
    save_ran(tmp_path / "net.lines", ran)
    assert load_ran(tmp_path / "net.lines") == ran
    assert load_ran(tmp_path / "missing.lines") is None
    found = target_coverage(path, "Net", ran, mutants)
    assert found.counted == 6 and found.unrun == []
    assert [s.line for s in found.once] == [16]
    assert [s.line for s in found.untouched] == [19, 27]
    without = target_coverage(path, "Net", {**ran, "lines": ran["lines"] - {27}}, mutants)
    assert [(s.line, s.text) for s in without.unrun] == [(27, "return y * 1")]
    elsewhere = target_coverage(path, "Net", {**ran, "elsewhere": True}, mutants)  # the data-parallel ranks
    assert not elsewhere.measured and elsewhere.unrun == [] and elsewhere.as_dict()["lines_no_check_runs"] is None
    assert not target_coverage(path, "Net", None, mutants).measured


def test_the_host_refuses_line_numbers_that_are_not_numbers():
    from torchgrade.sandbox.host import BadReply, checked

    assert checked({"value": 1, "lines": [3, 4], "lines_repeated": [], "lines_elsewhere": False})["lines"] == [3, 4]
    for bad in ({"lines": ["3"]}, {"lines": {"a": 1}}, {"lines_repeated": [1.5]}, {"lines_elsewhere": "yes"}):
        with pytest.raises(BadReply):
            checked({"value": 1, **bad})


# --- the page: auditing some targets updates only their part of it ---

def _target(qualname: str, after: str) -> TargetAudit:
    mutant = Mutant(qualname, "arith", "ops.py", 3, "return x + 1", after, "", "ab12cd34")
    return TargetAudit(qualname, 1, [MutantResult(mutant, "survived")], [])


def test_the_page_keeps_the_targets_a_run_did_not_audit(tmp_path):
    from torchgrade.authoring.auditpage import write_page

    page = tmp_path / "audit" / "index.html"
    course = ("ops.first", "ops.second")
    write_page(Audit("Course", [_target("ops.first", "return x - 1"), _target("ops.second", "return x * 1")], 0, None,
                     1.0, [], course), page)
    write_page(Audit("Course", [_target("ops.first", "return x + 2")], 3, None, 1.0, [], course), page)
    text = page.read_text()
    assert "return x + 2" in text and "return x - 1" not in text  # this run's section replaces the last one's
    assert "return x * 1" in text  # the other target's section is kept, saying when it was audited
    assert text.index('id="ops.first"') < text.index('id="ops.second"')  # in the course's order
    assert "Audited earlier (" in text and ", seed 0)" in text and "1 target(s) shown as an earlier run left them" in text
    saved = json.loads((page.parent / "audit.json").read_text())
    assert set(saved["targets"]) == set(course) and saved["targets"]["ops.first"]["seed"] == 3
    # another course (its title), or a target the course no longer has: nothing kept
    write_page(Audit("Course", [_target("ops.first", "return x + 2")], 3, None, 1.0, [], ("ops.first",)), page)
    assert "return x * 1" not in page.read_text()
    write_page(Audit("Course", [_target("ops.second", "return x * 1")], 0, None, 1.0, [], course), page)
    write_page(Audit("Another", [_target("ops.first", "return x + 2")], 0, None, 1.0, [], course), page)
    assert "return x * 1" not in page.read_text()
    (page.parent / "audit.json").write_text("{not json")  # a broken file: the page is this run's alone
    write_page(Audit("Another", [_target("ops.second", "return x * 1")], 0, None, 1.0, [], course), page)
    assert "return x * 1" in page.read_text() and "Audited earlier" not in page.read_text()


# --- a course whose checks are weak on purpose ---

def test_each_weakness_of_a_weak_course_is_reported(tmp_path):
    """A mask line no check runs, a loop no check runs twice, a false mark and a check whose reference raises
    on the stand-in: each is reported, in the terminal, in --json and on the page."""
    import weak_course
    from click.testing import CliRunner

    from torchgrade.cli import main

    course = weak_course.make_course(tmp_path)
    result = CliRunner().invoke(main, ["audit", "--assignment", str(course), "--json"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    data = {t["target"]: t for t in json.loads(result.stdout)["targets"]}
    mask, rnn = data["seq.masked_softmax"], data["seq.run_rnn"]
    mask_line = {"line": weak_course.MASK_LINE, "code": 'scores = scores.masked_fill(~mask, float("-inf"))'}
    assert mask["coverage"]["lines_no_check_runs"] == [mask_line]
    # the mistakes of that line (the mask negated, the line deleted) survive: no check runs it
    on_mask = {m["operator"] for m in mask["mutants"] if m["line"] == weak_course.MASK_LINE and m["verdict"] == "survived"}
    assert {"negate", "delete"} <= on_mask
    assert rnn["coverage"]["lines_no_check_runs"] == []
    assert rnn["coverage"]["loops_no_check_runs_twice"] == [{"line": weak_course.LOOP_LINE,
                                                              "code": "for t in range(x.shape[1]):"}]
    # the carry mixed up with the first state survives one-step sequences; the first binding is left alone
    assert ("swap", "h = _cell(x[:, t], h0, w)", "survived") in {(m["operator"], m["after"], m["verdict"])
                                                                for m in rnn["mutants"] if m["line"] == weak_course.CARRY_LINE}
    assert {"line": weak_course.CARRY_LINE - 2, "code": "h = h0"} in rnn["coverage"]["lines_no_mutant_changes"]
    false = [m for m in rnn["mutants"] if m["mark"]]
    assert [(m["after"], m["verdict"], m["mark"]) for m in false] == [
        ("return torch.tanh(x @ w - h)", "survived", "overturned")]
    assert false[0]["evidence"].startswith("run_rnn(tensor(float32")  # the input that shows it
    [nothing] = rnn["checks_that_measure_nothing"]
    assert nothing.startswith("seq.run_rnn: one step on the device [cuda]: ")
    assert "the reference raises RuntimeError on cuda (the CUDA stand-in) (Expected all tensors to be on the same " \
           "device" in nothing
    page = (tmp_path / "reports" / "audit" / "index.html").read_text()
    for shown in ("masked_fill(~mask", "for t in range(x.shape[1]):", "one step on the device [cuda]",
                  "marked equivalent, but the audit's search tells it apart: run_rnn("):
        assert shown in page, shown
    said = "\n".join(lines(_audit_from(json.loads(result.stdout))))
    assert f"    line {weak_course.MASK_LINE}: scores = scores.masked_fill(~mask" in said
    assert "1 loop(s) whose body no check runs twice in one call" in said


def _audit_from(data: dict) -> Audit:
    """The --json output as an Audit again (what the terminal lines are made of)."""
    from torchgrade.authoring.auditpage import target_from_dict

    return Audit(data["title"], [target_from_dict(t) for t in data["targets"]], data["seed"], data["max_per_target"],
                 data["seconds"], data["notes"])
