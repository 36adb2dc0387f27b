"""`torchgrade audit`: mutants of the reference graded by the course's checks, on a course whose
checks are deliberately weak (the survivors it must report are known), on bad input, and on the
course `torchgrade init` makes (which must audit clean)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchgrade.cli import main
from torchgrade.authoring.mutants import make_mutants

REFERENCE = '''\
"""Two small operations."""

import torch


def scale(x, factor=2):
    """Return ``x * factor``; a negative ``factor`` raises ``ValueError``."""
    # BEGIN SOLUTION
    if factor < 0:
        raise ValueError("factor must not be negative")
    return x * factor
    # END SOLUTION


def first(x):
    """Return ``x[0]``."""
    # BEGIN SOLUTION
    return x[0]
    # END SOLUTION
'''

# Weak on purpose: "rejects a negative factor" never passes a negative factor, and the only visible
# check of `first` gives a tensor whose elements are all equal.
VISIBLE = '''\
import pytest
import torch


@pytest.mark.target("scale")
def test_scales_a_vector(check, device):
    check(torch.tensor([1.0, 2.0], device=device), 3)


@pytest.mark.target("scale")
def test_rejects_a_negative_factor(check, device):
    check(torch.tensor([1.0, 2.0], device=device), 4)


@pytest.mark.target("first")
def test_takes_the_first_element(check, device):
    check(torch.tensor([5.0, 5.0, 5.0], device=device))
'''

HIDDEN = '''\
import pytest
import torch


@pytest.mark.target("scale")
def test_doubles_by_default(check, device):
    check(torch.tensor([1.0, 2.0], device=device))


@pytest.mark.target("first")
def test_takes_the_first_of_distinct_elements(check, device):
    check(torch.tensor([1.0, 2.0, 3.0], device=device))
'''

ASSIGNMENT = '''\
title: A weak course
reference: reference
checks: graders/checks
stubs: exercises
time_limit: 10
exercises:
  ops:
    targets:
{targets}
'''


def make_course(root: Path, reference: str = REFERENCE, visible: str = VISIBLE, hidden: str = HIDDEN,
                targets: str = "      scale: 2\n      first: 1") -> Path:
    for name, text in {"assignment.yaml": ASSIGNMENT.format(targets=targets), "reference/ops.py": reference,
                       "graders/checks/visible/test_ops.py": visible,
                       "graders/checks/hidden/test_ops.py": hidden}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "assignment.yaml"


def audit(*args):
    return CliRunner().invoke(main, ["audit", "--device", "cpu", *[str(a) for a in args]], catch_exceptions=False)


def errors(result) -> list[str]:
    """What a failed audit said, less its progress lines; nothing on stdout."""
    assert result.stdout == ""
    return [line for line in result.stderr.splitlines() if not line.startswith("grading ")]


def audited(*args) -> dict:
    result = audit("--json", *args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def by_target(data: dict) -> dict[str, dict]:
    return {t["target"]: t for t in data["targets"]}


def diffs(target: dict, verdict: str) -> set[str]:
    return {m["diff"] for m in target["mutants"] if m["verdict"] == verdict}


SURVIVORS = {
    "ops.py:9: if factor < 0:  →  if factor <= 0:",
    "ops.py:9: if factor < 0:  →  if factor < -1:",
    "ops.py:9: if factor < 0:  →  if factor < 1:",
    'ops.py:10: raise ValueError("factor must not be negative")  →  pass',
    "ops.py:11: return x * factor  →  return x.detach() * factor",  # no check asks for a gradient
    "ops.py:11: return x * factor  →  return x.mul_(factor)",  # no check looks at the input afterwards
}


def test_a_weak_course_reports_exactly_the_survivors_its_checks_let_through(tmp_path):
    course = make_course(tmp_path)
    result = audit("--assignment", course)
    assert result.exit_code == 1, result.output  # survivors: not clean
    for line in SURVIVORS:
        assert line in result.stdout
    data = audited("--assignment", course)
    scale, first = by_target(data)["ops.scale"], by_target(data)["ops.first"]
    assert diffs(scale, "survived") == SURVIVORS
    assert diffs(scale, "hidden") == {"ops.py:6: def scale(x, factor=2):  →  def scale(x, factor=1):",
                                      "ops.py:6: def scale(x, factor=2):  →  def scale(x, factor=3):"}
    assert diffs(scale, "visible") == {"ops.py:9: if factor < 0:  →  if factor >= 0:",
                                       "ops.py:11: return x * factor  →  return x / factor",
                                       "ops.py:11: return x * factor  →  return x * factor.detach()",  # (an int)
                                       "ops.py:11: return x * factor  →  return x",  # an input returned
                                       "ops.py:11: return x * factor  →  return factor"}
    assert (scale["made"], scale["graded"], scale["survived"], scale["killed_hidden_only"]) == (13, 13, 6, 2)
    assert scale["killed_visible"] == 5
    assert diffs(first, "hidden") == {"ops.py:18: return x[0]  →  return x[-1]", "ops.py:18: return x[0]  →  return x[1]"}
    assert first["survived"] == first["killed_visible"] == 0
    # the visible checks that do not tell the truth
    assert first["visible_checks_no_mutant_fails"] == ["ops.first: takes the first element"]
    assert scale["visible_checks_no_mutant_fails"] == []
    assert scale["visible_checks_adding_nothing"] == [
        {"check": "ops.scale: rejects a negative factor", "covered_by": "ops.scale: scales a vector"}]
    assert data["totals"]["survived"] == 6 and data["clean"] is False
    page = (tmp_path / "reports" / "audit" / "index.html").read_text()
    assert "if factor &lt; 0:" in page and "if factor <= 0:" not in page  # autoescaped
    assert "no mutant fails it" in page and "rejects a negative factor" in page


def test_a_check_that_adds_nothing_is_listed_for_the_author_without_failing_the_audit(tmp_path):
    visible = ('import pytest\nimport torch\n\n\n@pytest.mark.target("first")\n'
               'def test_takes_the_first_element(check):\n    check(torch.tensor([1.0, 2.0]))\n\n\n'
               '@pytest.mark.target("first")\n'
               'def test_takes_the_first_of_a_long_vector(check):\n    check(torch.arange(9.0))\n')
    course = make_course(tmp_path, visible=visible, hidden="", targets="      first: 1")
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()
    result = audit("--assignment", course)
    assert result.exit_code == 0, result.output
    assert ("look at: visible check adding nothing: ops.first: takes the first of a long vector (each mutant it "
            "kills, ops.first: takes the first element kills too") in result.stdout
    first = by_target(audited("--assignment", course))["ops.first"]
    assert first["visible_checks_adding_nothing"] == [
        {"check": "ops.first: takes the first of a long vector", "covered_by": "ops.first: takes the first element"}]


ADD_AT = '''\
def add_at(target, index, src):
    """Add ``src`` into ``target`` at ``index``, in place; repeated indices add up."""
    # BEGIN SOLUTION
    return target.index_put_((index,), src, accumulate=True)
    # END SOLUTION
'''


def test_a_check_whose_name_names_what_a_mutant_changes_and_passes_it_is_listed(tmp_path):
    """The issue's example: "accumulates repeated indices" whose indices never repeat passes the variant
    that does not accumulate, which a hidden check kills."""
    visible = ('import pytest\nimport torch\n\n\n@pytest.mark.target("add_at")\n'
               'def test_accumulates_repeated_indices(check):\n'
               '    check(torch.zeros(4), torch.tensor([0, 2]), torch.tensor([1.0, 2.0]))\n')
    hidden = ('import pytest\nimport torch\n\n\n@pytest.mark.target("add_at")\n'
              'def test_adds_up_a_repeated_index(check):\n'
              '    check(torch.zeros(4), torch.tensor([1, 1]), torch.tensor([1.0, 2.0]))\n')
    course = make_course(tmp_path, reference=ADD_AT, visible=visible, hidden=hidden, targets="      add_at: 1")
    result = audit("--assignment", course)
    assert "look at: visible check ops.add_at: accumulates repeated indices names 'accumulates', yet passes" in result.stdout
    target = by_target(audited("--assignment", course))["ops.add_at"]
    assert target["visible_checks_passing_what_their_name_names"] == [{
        "check": "ops.add_at: accumulates repeated indices", "word": "accumulates",
        "mutant": next(m["id"] for m in target["mutants"] if m["after"].endswith("accumulate=False)")),
        "diff": "ops.py:4: return target.index_put_((index,), src, accumulate=True)  →  "
                "return target.index_put_((index,), src, accumulate=False)",
        "killed_by": ["ops.add_at: adds up a repeated index"]}]


def test_equivalent_mutants_are_marked_with_their_reason_and_stale_entries_get_a_note(tmp_path):
    course = make_course(tmp_path)
    ids = {m.after: m.id for m in make_mutants(tmp_path / "reference" / "ops.py", "ops", "scale")}
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(textwrap.dedent(f"""\
        ops.scale:
          - mutant: {ids["if factor <= 0:"]}
            reason: scaling by zero gives zeros either way (for this test)
          - mutant: "if factor < 0:  →  if factor < 1:"
            reason: marked by its change instead of its id (for this test)
          - mutant: "0123abcd"
            reason: no such mutant
          - mutant: {ids["return x / factor"]}
            reason: killed, so not equivalent
        ops.gone:
          - mutant: "0123abcd"
            reason: no such target
    """))
    data = audited("--assignment", course)
    scale = by_target(data)["ops.scale"]
    # both marks are false (a factor of 0 raises in both mutants): the audit's search overturns them; the
    # third, a check kills: overturned too (counted, the audit not clean), not a note
    assert scale["equivalent"] == 0 and scale["survived"] == 6 and scale["marks_overturned"] == 3
    overturned = {m["after"]: m["evidence"] for m in scale["mutants"] if m["mark"] == "overturned"}
    assert set(overturned) == {"if factor <= 0:", "if factor < 1:", "return x / factor"}
    assert all("the reference returns, the mutant raises ValueError" in overturned[a] and "= 0" in overturned[a]
               for a in ("if factor <= 0:", "if factor < 1:"))
    assert overturned["return x / factor"] == ("marked equivalent, but ops.scale: rejects a negative factor, "
                                               "ops.scale: scales a vector kills it")
    assert data["clean"] is False
    notes = "\n".join(data["notes"])
    assert "ops.gone is not a target of this course" in notes
    assert "no mutant matches '0123abcd'" in notes


def test_a_mutant_only_cuda_devices_tell_apart_is_set_aside_without_them_and_graded_with_them(tmp_path):
    """`needs_cuda_devices: N`: where fewer CUDA devices are graded (--device cpu here) a survivor is set
    aside with its reason, neither killed nor a survivor; a killed one gets a note; with N it is graded."""
    course = make_course(tmp_path)
    ids = {m.after: m.id for m in make_mutants(tmp_path / "reference" / "ops.py", "ops", "scale")}
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(textwrap.dedent(f"""\
        ops.scale:
          - mutant: {ids["if factor <= 0:"]}
            needs_cuda_devices: 1
            reason: only a GPU tells it apart (for this test)
          - mutant: {ids["return x / factor"]}
            needs_cuda_devices: 2
            reason: killed, so wrongly marked
    """))
    result = audit("--assignment", course)
    assert "needs CUDA" in result.stdout and "(only a GPU tells it apart (for this test))" in result.stdout
    data = audited("--assignment", course)
    scale = by_target(data)["ops.scale"]
    assert (scale["needs_cuda"], scale["survived"], scale["equivalent"]) == (1, 5, 0)
    assert [m["after"] for m in scale["mutants"] if m["verdict"] == "needs_cuda"] == ["if factor <= 0:"]
    assert f"{ids['return x / factor']} is marked as needing 2 CUDA device(s) but" in "\n".join(data["notes"])
    assert data["totals"]["needs_cuda"] == 1
    total = data["totals"]
    counted = total["graded"] - 1  # the set-aside mutant was not measured
    assert data["score"] == pytest.approx((counted - total["survived"]) / counted)


def test_an_id_that_reads_as_a_number_is_still_an_id(tmp_path):
    """Ids are hex: 52820313 and 8e1e2587 would be an int and a float to YAML's usual loader."""
    from torchgrade.authoring.audit import load_equivalents
    from torchgrade.engine.config import load_assignment

    course = make_course(tmp_path)
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(
        "ops.scale:\n  - mutant: 52820313\n    reason: a\n  - mutant: 8e1e2587\n    reason: b\n")
    data, _ = load_equivalents(load_assignment(course))
    assert [e["mutant"] for e in data["ops.scale"]] == ["52820313", "8e1e2587"]


def test_an_equivalent_mutants_file_without_reasons_stops_the_audit(tmp_path):
    course = make_course(tmp_path)
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text("ops.scale:\n  - mutant: abc\n")
    result = audit("--assignment", course)
    assert result.exit_code == 2
    assert "equivalent-mutants.yaml: ops.scale: expected a list of entries" in result.output
    # an input that is not a call of the target, and an outside-the-contract mark with no predicate: refused too
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(
        'ops.scale:\n  - mutant: abc\n    reason: r\n    input: "torch.ones(2) * 3"\n')
    result = audit("--assignment", course)
    assert result.exit_code == 2
    assert "ops.scale: abc: `input:` expected one call of scale, such as scale(torch.ones(2, 3), 1)" in result.output
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(
        'ops.scale:\n  - mutant: abc\n    reason: r\n    input: "scale(torch.ones(2), -1)"\n'
        '    outside_contract: "a negative factor raises ValueError"\n')
    result = audit("--assignment", course)
    assert result.exit_code == 2 and "`excludes:` (an expression over the target's parameters" in result.output


def test_seed_and_max_per_target_pick_the_same_mutants_each_time(tmp_path):
    course = make_course(tmp_path)
    picked = [{m["id"] for m in by_target(audited("--assignment", course, "--max-per-target", 3, "--seed", 7,
                                                  "ops.scale"))["ops.scale"]["mutants"]} for _ in range(2)]
    assert picked[0] == picked[1] and len(picked[0]) == 3
    data = by_target(audited("--assignment", course, "--max-per-target", 3, "--seed", 7, "ops.scale"))
    assert set(data) == {"ops.scale"} and data["ops.scale"]["made"] == 13


def test_a_reference_that_fails_its_own_check_stops_the_audit_naming_the_check(tmp_path):
    """Compared with itself the reference always agrees; a check that asserts values of its own, or a
    forbidden call the reference makes, can still fail it."""
    visible = VISIBLE.replace("    check(torch.tensor([1.0, 2.0], device=device), 3)\n",
                              "    _, got = check(torch.tensor([1.0, 2.0], device=device), 3)\n"
                              "    assert got.tolist() == [3.0, 6.0]\n")
    course = make_course(tmp_path, reference=REFERENCE.replace("return x * factor", "return x * factor + 1"),
                         visible=visible)
    result = audit("--assignment", course)
    assert result.exit_code == 2
    lines = errors(result)
    assert len(lines) == 1 and lines[0].startswith("torchgrade: error: the reference fails its own check ")
    assert "test_scales_a_vector" in lines[0] and "nothing to measure" in lines[0]


@pytest.mark.parametrize("break_it, message", [
    # the course's one validation (torchgrade.engine.course.validate_course) says it, as for every command
    (lambda root: (root / "reference" / "ops.py").unlink(), "exercise 'ops' has no reference solution"),
    (lambda root: (root / "reference" / "ops.py").write_text(REFERENCE.split("def first")[0]),
     "defines no 'first', a target of exercise 'ops'"),
])
def test_a_target_without_a_reference_stops_the_audit_in_one_line(tmp_path, break_it, message):
    course = make_course(tmp_path)
    break_it(tmp_path)
    result = audit("--assignment", course)
    assert result.exit_code == 2
    assert len(errors(result)) == 1 and message in errors(result)[0]


def test_an_unknown_target_is_refused(tmp_path):
    result = audit("--assignment", make_course(tmp_path), "ops.nothing")
    assert result.exit_code == 2 and "unknown exercise or target 'ops.nothing'" in result.output


COUNT_DOWN = '''\
def count_down(n):
    """How many steps of one take ``n`` to 0."""
    # BEGIN SOLUTION
    steps = 0
    while n > 0:
        n -= 1
        steps += 1
    return steps
    # END SOLUTION
'''


def test_a_mutant_that_never_ends_is_killed_by_the_time_limit_and_the_audit_goes_on(tmp_path):
    course = make_course(tmp_path, reference=COUNT_DOWN, targets="      count_down: 1",
                         visible='import pytest\n\n\n@pytest.mark.target("count_down")\n'
                                 'def test_counts_five_steps(check):\n    check(5)\n',
                         hidden="")
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()
    target = by_target(audited("--assignment", course))["ops.count_down"]
    endless = {m["after"]: m for m in target["mutants"] if m["after"] in ("n += 1", "n -= 0")}
    assert set(endless) == {"n += 1", "n -= 0"}
    assert all(m["verdict"] == "visible" and m["how"] == "time limit" for m in endless.values())
    assert target["graded"] == target["made"] > len(endless)  # the others were graded too


EXITS = '''\
import os


def safe(n):
    """``n``; a negative ``n`` ends the process."""
    # BEGIN SOLUTION
    if n < 0:
        os._exit(3)
    return n
    # END SOLUTION
'''


def test_a_mutant_that_kills_its_process_is_killed_and_the_audit_goes_on(tmp_path):
    course = make_course(tmp_path, reference=EXITS, targets="      safe: 1",
                         visible='import pytest\n\n\n@pytest.mark.target("safe")\n'
                                 'def test_returns_five(check):\n    check(5)\n',
                         hidden="")
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()
    target = by_target(audited("--assignment", course))["ops.safe"]
    verdicts = {m["after"]: (m["verdict"], m["how"]) for m in target["mutants"]}
    assert verdicts["if n >= 0:"] == ("visible", "crashed")
    assert verdicts["if n <= 0:"] == ("survived", "")  # graded after it, in a fresh sandbox process
    assert target["graded"] == target["made"]


def test_the_course_made_by_init_audits_clean(tmp_path):
    assert CliRunner().invoke(main, ["init", str(tmp_path / "course")]).exit_code == 0
    result = audit("--assignment", tmp_path / "course" / "assignment.yaml")
    assert result.exit_code == 0, result.output
    data = audited("--assignment", tmp_path / "course" / "assignment.yaml")
    relu = by_target(data)["activations.relu"]
    assert relu["graded"] > 5 and relu["survived"] == 0 and data["clean"] is True
    assert relu["visible_checks_no_mutant_fails"] == relu["visible_checks_adding_nothing"] == []


@pytest.mark.heavy
def test_a_pool_of_workers_gives_the_verdicts_one_process_gives(tmp_path):
    course = make_course(tmp_path)
    some = ("--max-per-target", 4, "--seed", 7)  # (6 of the 15 mutants: killed by a visible check, by hidden only, survived)
    one = audited("--assignment", course, *some)
    two = audited("--assignment", course, "-j", 2, *some)
    verdicts = lambda data: {(t["target"], m["id"], m["verdict"]) for t in data["targets"] for m in t["mutants"]}
    assert {verdict for *_, verdict in verdicts(one)} == {"visible", "hidden", "survived"}
    assert verdicts(one) == verdicts(two)


# --- the operators, on source alone ---

def mutants_of(tmp_path: Path, source: str, name: str = "f") -> dict[str, str]:
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(source))
    return {m.after: m.operator for m in make_mutants(path, "m", name)}


def test_operators_make_the_mistakes_students_make_with_tensor_code(tmp_path):
    made = mutants_of(tmp_path, '''\
        import torch


        def f(x, dim=1, keepdim=False):
            # BEGIN SOLUTION
            y = torch.zeros(3, device=x.device)
            assert x.dim() > 0
            return x.clone().sum(dim, keepdim=keepdim) + y and not x
            # END SOLUTION
    ''')
    for after, operator in {
        "def f(x, dim=2, keepdim=False):": "default", "def f(x, dim=1, keepdim=True):": "default",
        "y = torch.empty(3, device=x.device)": "call", "y = torch.zeros(3)": "call",
        "pass": "raise", "assert x.dim() >= 0": "cmp", "assert x.dim() > 1": "const",
        "return x.sum(dim, keepdim=keepdim) + y and not x": "call",
        "return x.clone().mean(dim, keepdim=keepdim) + y and not x": "call",
        "return x.clone().sum(dim) + y and not x": "call",
        "return x.clone().sum(dim, keepdim=keepdim) - y and not x": "arith",
        "return (x.clone().sum(dim, keepdim=keepdim) + y or not x)": "bool",
        "return x.clone().sum(dim, keepdim=keepdim) + y and (x)": "bool",
    }.items():
        assert made.get(after) == operator, (after, sorted(made))


def test_a_forgotten_layer_and_a_forgotten_call_of_another_function_are_mutants_too(tmp_path):
    made = mutants_of(tmp_path, '''\
        def shard(batch, rank):
            return batch


        class Net:
            def forward(self, x):
                # BEGIN SOLUTION
                return self.act(shard(x, 0))
                # END SOLUTION
    ''', "Net")
    assert made == {"return shard(x, 0)": "call", "return self.act(x)": "call", "return self.act(shard(x, 1))": "const",
                    "return self.act(shard(x, -1))": "const", "return x": "input"}


def test_a_forgotten_case_and_a_forgotten_move_are_mutants_too(tmp_path):
    made = mutants_of(tmp_path, '''\
        def f(obj, device):
            # BEGIN SOLUTION
            if isinstance(obj, list):
                return [f(o, device) for o in obj]
            return obj.to(device)
            # END SOLUTION
    ''')
    assert made == {"pass": "branch", "return obj": "call", "return [o for o in obj]": "call",  # the recursion forgotten too
                    "if not isinstance(obj, list):": "negate", "return [f(device, o) for o in obj]": "swap",
                    "return device": "input"}


def test_only_the_target_its_private_helpers_and_no_error_message_are_mutated(tmp_path):
    made = mutants_of(tmp_path, '''\
        def _helper(n):
            return n + 1


        def other(n):
            return n - 1


        def f(n):
            """Docstring 1 < 2."""
            if n < 0:
                raise ValueError(f"n must be at least {0 + 1}")
            # BEGIN SOLUTION
            return _helper(n) * 2
            # END SOLUTION
    ''')
    assert "return n - 1" in made  # the helper f calls
    assert "return n + 1" not in made  # `other` is not f's
    assert not any("if n" in after or "raise" in after or "ValueError" in after for after in made)  # outside the markers
    assert made["return _helper(n) / 2"] == "arith"


# --- a check that measures nothing (its reference raises what it does not expect) ---

# `scales_by_minus_one` gives a negative factor without saying it is about the ValueError; `scales_by_a_cpu_factor`
# multiplies a CUDA x by a CPU factor of one dimension: the reference raises on CUDA (the stand-in) only.
NOTHING = '''\
import pytest
import torch


@pytest.mark.target("scale")
def test_scales_by_minus_one(check):
    check(torch.tensor([1.0, 2.0]), -1)


@pytest.mark.target("scale")
def test_raises_value_error_for_a_negative_factor(check):
    check(torch.tensor([1.0, 2.0]), -2)


@pytest.mark.target("scale")
def test_scales_by_a_cpu_factor(check, device):
    check(torch.tensor([1.0, 2.0], device=device), torch.tensor([2.0]))
'''


def test_a_check_whose_reference_raises_what_it_does_not_expect_is_the_courses_mistake(tmp_path):
    """Whatever a student writes, such a check compares two exceptions: `check --path reference` and `audit`
    report it with the device and the error; a check whose name says it raises is left alone."""
    course = make_course(tmp_path, visible=NOTHING, hidden="", targets="      scale: 2")
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()
    text = course.read_text().replace("time_limit: 10", "time_limit: 10\ncuda_standin: score")
    course.write_text(text)
    result = CliRunner().invoke(main, ["check", "--assignment", str(course), "--path", str(tmp_path / "reference"),
                                       "-v", "--report", str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert ("the reference raises ValueError on cpu (factor must not be negative), and this check does not expect "
            "an exception") in said
    assert "the reference raises RuntimeError on cuda (the CUDA stand-in) (Expected all tensors to be on the same " \
           "device" in said
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    statuses = {t["name"].split(": ")[-1]: t["status"] for t in data["tests"]}
    assert statuses["raises value error for a negative factor"] == "passed"
    assert statuses["scales by minus one"] != "passed"
    # the audit reports each such check, with its device and the error, leaves its verdicts out of the counts
    # and measures the rest (the audit is not clean)
    result = CliRunner().invoke(main, ["audit", "--assignment", str(course)], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    said = " ".join(result.stdout.split())
    assert "check that measures nothing: ops.scale: scales by minus one: " in said
    assert "the reference raises ValueError on cpu (factor must not be negative)" in said
    assert "check that measures nothing: ops.scale: scales by a cpu factor [cuda]: " in said
    assert "the reference raises RuntimeError on cuda (the CUDA stand-in) (Expected all tensors" in said
    assert "visible check no mutant fails: ops.scale: scales by minus one" not in said  # (not counted: not listed)


# --- marks verified by the audit's own search ---

RELU = '''\
import torch


def relu(x):
    """``max(x, 0)`` elementwise, in x's dtype."""
    # BEGIN SOLUTION
    x = x + 0
    x = x + 0
    return torch.where(x > 0, x, torch.zeros_like(x))
    # END SOLUTION
'''

RELU_CHECKS = '''\
import pytest
import torch


@pytest.mark.target("relu")
def test_zeroes_the_negative_entries(check):
    check(torch.tensor([-1.0, 2.0]))
'''


def test_a_mark_counts_only_once_the_audits_search_verifies_it(tmp_path, monkeypatch):
    """A true mark is verified; a false one is overturned, with the input that shows it; a mark the search
    cannot try stays unverified (the audit is not clean); a mark that matches two mutants marks neither."""
    course = make_course(tmp_path, reference=RELU, visible=RELU_CHECKS, hidden="", targets="      relu: 1")
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()
    ids = {m.after: m.id for m in make_mutants(tmp_path / "reference" / "ops.py", "ops", "relu")}
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(textwrap.dedent(f"""\
        ops.relu:
          - mutant: {ids["return torch.where(x >= 0, x, torch.zeros_like(x))"]}
            reason: at 0 both give 0
          - mutant: {ids["return torch.where(x > 1, x, torch.zeros_like(x))"]}
            reason: false on purpose (between 0 and 1 they differ)
          - mutant: "x = x + 0  →  x = x - 0"
            reason: matches the mutants of two lines
    """))
    from torchgrade.authoring.audit import lines, run_audit
    from torchgrade.engine.config import load_assignment

    found = run_audit(load_assignment(course), device="cpu")
    said, relu = "\n".join(lines(found)), by_target(found.as_dict())["ops.relu"]
    assert "note: equivalent-mutants.yaml: ops.relu: 'x = x + 0  →  x = x - 0' matches 2 mutants" in said
    assert "marks: 1 verified, 0 outside the contract, verified, 0 unverified, 1 overturned" in said
    assert "marked equivalent, but the audit's search tells it apart: relu(tensor(float32" in said
    marks = {m["after"]: (m["verdict"], m["mark"]) for m in relu["mutants"] if m["mark"]}
    assert marks == {"return torch.where(x >= 0, x, torch.zeros_like(x))": ("equivalent", "verified"),
                     "return torch.where(x > 1, x, torch.zeros_like(x))": ("survived", "overturned")}
    assert {m["verdict"] for m in relu["mutants"] if m["after"] == "x = x - 0"} == {"survived"}
    from torchgrade.authoring.auditpage import write_page

    write_page(found, tmp_path / "page.html")
    page = (tmp_path / "page.html").read_text()
    assert "marks verified (0 outside the contract, verified; 0 unverified, 1 overturned)" in page and "mark verified" in page
    assert "marked equivalent, but the audit's search tells it apart: relu(tensor(float32" in page
    monkeypatch.setattr("torchgrade.authoring.verification.UNSUPPORTED_PROBES", ("call",))  # no generator for its arguments
    found = run_audit(load_assignment(course), device="cpu")
    said, relu = "\n".join(lines(found)), by_target(found.as_dict())["ops.relu"]
    assert relu["marks_unverified"] == 2 and relu["marks_verified"] == relu["marks_overturned"] == 0
    assert "unverified mark" in said and "cannot run the search" in said
    assert "2 equivalence mark(s) tried: 0 verified, 0 outside the contract, verified, 2 unverified, 0 overturned" in said
    assert found.clean is False


def test_every_outside_the_contract_mark_of_the_bundled_course_cites_its_docstring_word_for_word():
    """A mark that says a mutant differs only outside the contract names the input and the sentence that puts
    it outside; the audit accepts it only where the target's docstring has that sentence."""
    from torchgrade.authoring.audit import _docstring, load_equivalents
    from torchgrade.authoring.verification import parse_input
    from torchgrade.engine.config import load_assignment

    assignment = load_assignment(Path(__file__).resolve().parent.parent / "assignment.yaml")
    marks, _ = load_equivalents(assignment)
    cited = [(target, e) for target, entries in marks.items() for e in entries if "outside_contract" in e]
    assert len(cited) >= 10
    for target, entry in cited:
        exercise, name = target.split(".")
        parse_input(entry["input"], name)  # a call of the target, which the search runs first
        compile(entry["excludes"], "<excludes>", "eval")  # the inputs the sentence excludes, for a program
        assert " ".join(entry["outside_contract"].split()) in _docstring(assignment.reference_dir / f"{exercise}.py", name)


# --- the kinds of mistakes added for issue 36, on source alone ---

ATTENTION = '''\
import torch


def attend(q, k, v, mask, h0, x):
    # BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = weights @ v
    out = out.sum(dim=1, keepdim=True)
    h = h0
    for t in range(x.shape[1]):
        h = cell(x[:, t], h)
    if out.requires_grad:
        out = out * 2
    return out + h[:, 1:]
    # END SOLUTION


def cell(a, b):
    return a + b
'''


def test_a_mask_line_a_carry_and_a_loop_get_the_new_kinds_of_mistakes(tmp_path):
    made = mutants_of(tmp_path, ATTENTION, "attend")
    for after, operator in {
        "pass": "delete",  # (the mask line, among others)
        'scores = scores.masked_fill(mask, float("-inf"))': "negate",
        "if not out.requires_grad:": "negate",
        "h = cell(h, x[:, t])": "swap",
        "h = h0": None,  # (not a swap: a first binding of h reads h0 only)
        "h = cell(x[:, t], h0)": "swap",  # a variable of the same stem read in its place
        "for t in range(x.shape[1] - 1):": "bounds", "for t in range(1, x.shape[1]):": "bounds",
        "return out + h[:, 2:]": "const",  # (a number: `const` moves it, `bounds` does not repeat it)
        "weights = scores.softmax()": "keyword",
        "out = out.sum(dim=1)": "call",  # (keepdim=: `call` already drops it)
        "out = out.sum(keepdim=True)": "keyword",
        "out *= 2": "inplace", "scores = scores.masked_fill_(~mask, float('-inf'))": "inplace",
        "return out": None,  # (`out` is no parameter)
    }.items():
        if operator is None:
            assert made.get(after) in (None, "swap") and (after != "h = h0" or made.get(after) is None), after
        else:
            assert made.get(after) == operator, (after, made.get(after), sorted(made))
    deleted = [m.before for m in make_mutants(tmp_path / "m.py", "m", "attend") if m.operator == "delete"]
    assert 'scores = scores.masked_fill(~mask, float("-inf"))' in deleted  # a mask line
    assert "out = out.sum(dim=1, keepdim=True)" in deleted
    assert "h = cell(x[:, t], h)" in deleted  # the carry (read again in the loop)
    assert "scores = q @ k.transpose(-2, -1)" not in deleted  # a first binding: a NameError, not a mistake
    assert "weights = scores.softmax(dim=-1)" not in deleted


def test_slices_and_bounds_that_are_not_numbers_move_by_one(tmp_path):
    made = mutants_of(tmp_path, '''\
        def f(x, k, n):
            y = x[:k] + x[k:n]
            return y
    ''')
    for after in ("y = x[:k - 1] + x[k:n]", "y = x[:k] + x[k + 1:n]", "y = x[:k] + x[k:n - 1]"):
        assert made.get(after) == "bounds", (after, sorted(made))


def test_an_input_returned_an_update_made_out_of_place_and_a_statement_for_its_effect_deleted(tmp_path):
    made = mutants_of(tmp_path, '''\
        import torch


        def f(params, lr, x):
            total = 0
            acc = x
            with torch.no_grad():
                for p in params:
                    p.sub_(lr * p.grad)
                    total += 1
                    acc += p.grad
            return torch.relu(x) * total
    ''')
    assert made["return x"] == "input"
    assert made["acc = acc + p.grad"] == "outplace"  # (acc aliases x: in place, x changes)
    assert "total = total + 1" not in made  # on a number, in place and out of place are the same
    deleted = [m.before for m in make_mutants(tmp_path / "m.py", "m", "f") if m.operator == "delete"]
    assert deleted == ["p.sub_(lr * p.grad)", "total += 1"]  # (acc is never read afterwards)


def test_kinds_equivalent_by_construction_are_not_made(tmp_path):
    made = mutants_of(tmp_path, '''\
        import torch


        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.detach() * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad.detach() * 2 * x


        def f(labels, n):
            """A docstring."""
            unused = labels + 1
            if labels.numel() == 0:
                return labels.new_zeros(tuple(labels.shape) + (n,))
            pass
            message = "bad"
            if n > 1 and labels.dim():
                message += f" for {n}"
            if labels.dim() > 3:
                raise ValueError(message)
            return torch.add(labels, n, alpha=None)
    ''', "Square")
    assert "return x * x" not in made and "return grad * 2 * x" not in made  # .detach() where autograd is off
    assert "return x.detach() * x.detach()" not in made and "return grad.detach() * 2 * x.detach()" not in made
    other = mutants_of(tmp_path, (tmp_path / "m.py").read_text(), "f")
    assert not any("new_empty" in after for after in other)  # nothing to fill in an empty tensor
    deleted = [m.before for m in make_mutants(tmp_path / "m.py", "m", "f") if m.operator == "delete"]
    assert deleted == []  # never read afterwards; a docstring; a pass
    assert "return torch.add(n, labels, alpha=None)" not in other  # add is symmetric
    assert "return torch.add(labels, n)" not in other  # a keyword given as None is PyTorch's default
    assert "if not (n > 1 and labels.dim()):" not in other  # an if that only words an error message


def test_the_mutants_are_the_same_in_every_process(tmp_path):
    """Same mutants, same order, same ids, whatever the hash seed (no set order leaks into them)."""
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(ATTENTION)
    code = ("import sys; from pathlib import Path; from torchgrade.authoring.mutants import make_mutants; "
            "print([(m.id, m.operator, m.after) for m in make_mutants(Path(sys.argv[1]), 'm', 'attend')])")
    runs = [subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.py")], capture_output=True, text=True,
                           check=True, env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")]
    assert runs[0] == runs[1] and runs[0].count("'delete'") >= 3
    here = [(m.id, m.operator, m.after) for m in make_mutants(tmp_path / "m.py", "m", "attend")]
    assert repr(here) == runs[0].strip()


# --- the kinds of mistakes added for issue 48, on source alone ---

HEADS = '''\
import torch


def attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v


class Attention(torch.nn.Module):
    def forward(self, q, k, v, mask=None):
        return attention(q, k, v, mask)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x, mask=None, pad=(0, 0)):
        # BEGIN SOLUTION
        b, t, d = x.shape
        h = x.view(b, t, 2, d // 2).transpose(1, 2)
        for i in pad:
            if i < 0:
                break
        if not isinstance(pad, (tuple, list)) or len(pad) != 2:
            raise ValueError("pad is a pair")
        return self.attn(h, h.mT, torch.permute(h, (0, 1, 2, 3)), mask)
        # END SOLUTION
'''


def test_a_shape_operation_an_argument_passed_on_a_jump_a_type_and_an_operand_dropped_are_mutants(tmp_path):
    made = mutants_of(tmp_path, HEADS, "Block")
    for after, operator in {
        "h = x.view(b, t, 2, d // 2)": "shape",  # heads split without the transpose
        "return self.attn(h, h, torch.permute(h, (0, 1, 2, 3)), mask)": "shape",  # .mT dropped
        "return self.attn(h, h.mT, h, mask)": "shape",  # torch.permute(h, ...): h
        "return self.attn(h, h.mT, torch.permute(h, (0, 1, 2, 3)))": "argument",  # the mask never passed on
        "continue": "jump",
        "if not isinstance(pad, tuple) or len(pad) != 2:": "types",
        "if not isinstance(pad, list) or len(pad) != 2:": "types",
        "if not isinstance(pad, (tuple, list)):": "operand", "if len(pad) != 2:": "operand",
    }.items():
        assert made.get(after) == operator, (after, made.get(after), sorted(made))
    # the forward of Attention: the call of another function of the exercise loses its defaulted argument
    assert mutants_of(tmp_path, HEADS, "Attention").get("return attention(q, k, v)") == "argument"
    # an argument without a default is never dropped (a TypeError, not a mistake)
    assert not [a for a, o in mutants_of(tmp_path, HEADS, "Attention").items() if o == "argument" and "(q, k)" in a]


# --- issue 48: "verified" is the audit's claim; a false mark is overturned, and the run fails ---

FALSE_MARKS = '''\
import torch


def mean_or_zero(x):
    """The mean of ``x``; an empty ``x`` gives a 0-dim zero."""
    # BEGIN SOLUTION
    if x.numel() == 0:
        return x.new_zeros(())
    return x.mean()
    # END SOLUTION


def grad_of_square(x):
    """The gradient of ``(x * x).sum()`` at ``x`` (a float tensor), taken on a copy of ``x``."""
    # BEGIN SOLUTION
    w = x.detach().clone().requires_grad_()
    (w * w).sum().backward()
    return w.grad
    # END SOLUTION


def relu(x):
    """``x`` where it is positive, 0 elsewhere."""
    # BEGIN SOLUTION
    return torch.where(x > 0, x, torch.zeros_like(x))
    # END SOLUTION


def halve(x):
    """``x / 2``."""
    # BEGIN SOLUTION
    return x / 2
    # END SOLUTION
'''

FALSE_MARKS_CHECKS = '''\
import pytest
import torch


@pytest.mark.target("mean_or_zero")
def test_averages(check):
    check(torch.tensor([1.0, 2.0, 6.0]))


@pytest.mark.target("grad_of_square")
def test_doubles(check):
    check(torch.tensor([1.0, -2.0]))


@pytest.mark.target("relu")
def test_zeroes_the_negative_entries(check):
    check(torch.tensor([-1.0, 2.0]))


@pytest.mark.target("halve")
def test_halves(check):
    check(torch.tensor([4.0]))
'''


def test_a_mark_false_on_an_empty_or_inference_input_on_its_own_input_or_killed_by_a_check_is_overturned(tmp_path):
    """Each target's only mark is false: on an empty input the checks never send, on an input made under
    torch.inference_mode(), on the mark's own `input:`, and one a check kills. Each is overturned, with the
    input or the check that refutes it; the audit is not clean and exits 1."""
    targets = "".join(f"      {t}: 1\n" for t in ("mean_or_zero", "grad_of_square", "relu", "halve"))
    course = make_course(tmp_path, reference=FALSE_MARKS, visible=FALSE_MARKS_CHECKS, hidden="", targets=targets)
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()

    def mutant(name, after):
        return next(m.id for m in make_mutants(tmp_path / "reference" / "ops.py", "ops", name) if m.after == after)
    (tmp_path / "graders" / "equivalent-mutants.yaml").write_text(textwrap.dedent(f"""\
        ops.mean_or_zero:
          - mutant: "{mutant("mean_or_zero", "pass")}"
            reason: false on purpose (no check sends an empty x)
        ops.grad_of_square:
          - mutant: "{mutant("grad_of_square", "w = x.detach().requires_grad_()")}"
            reason: false on purpose (an x made under inference mode refuses requires_grad_ on its alias)
        ops.relu:
          - mutant: "{mutant("relu", "return torch.where(x > 1, x, torch.zeros_like(x))")}"
            reason: false on purpose (its own input shows it)
            input: "relu(torch.tensor([0.5]))"
        ops.halve:
          - mutant: "{mutant("halve", "return x * 2")}"
            reason: false on purpose (the check kills it)
    """))
    result = audit("--json", "--assignment", course)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["clean"] is False and data["totals"]["marks_overturned"] == 4
    marks = {t["target"]: [m for m in t["mutants"] if m["mark"]] for t in data["targets"]}
    assert all(len(found) == 1 and found[0]["mark"] == "overturned" for found in marks.values()), marks
    evidence = {target: found[0]["evidence"] for target, found in marks.items()}
    assert "shape=(0,)" in evidence["ops.mean_or_zero"], evidence
    assert "made under torch.inference_mode()" in evidence["ops.grad_of_square"], evidence
    assert evidence["ops.relu"].startswith("relu(tensor(float32, shape=(1,), [0.5])) (the mark's input): "), evidence
    assert evidence["ops.halve"] == "marked equivalent, but ops.halve: halves kills it"


def test_an_overturned_mark_alone_makes_the_audit_unclean():
    """No survivor, every check measuring something: one mark a check kills is enough to fail the run."""
    from torchgrade.authoring.audit import Audit, CheckInfo, MutantResult, TargetAudit
    from torchgrade.authoring.mutants import Mutant

    m = Mutant("ops.halve", "arith", "ops.py", 4, "return x / 2", "return x * 2", "", id="0123abcd")
    row = MutantResult(m, "visible", ["ops.halve: halves"], mark="overturned",
                       evidence="marked equivalent, but ops.halve: halves kills it")
    check = CheckInfo("visible/test_ops.py::test_halves", "ops.halve: halves", "visible", frozenset({"call"}), {"0123abcd"})
    audit = Audit("t", [TargetAudit("ops.halve", 1, [row], [check])], 0, None, 0.0, [])
    assert audit.totals["marks_overturned"] == 1 and audit.totals["survived"] == 0
    assert audit.clean is False
    row.mark = ""
    assert audit.clean is True


HEAD_SPLIT = '''\
import torch


def split_heads(x, heads):
    """``(b, t, d)`` to ``(b, heads, t, d // heads)``: the heads split off the last dim, then moved before ``t``."""
    # BEGIN SOLUTION
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)
    # END SOLUTION


def attention(q, k, v, mask=None):
    """Softmax attention; ``mask`` (bool, True where a position may be attended to) hides the rest."""
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v


class SelfAttention(torch.nn.Module):
    """Attention of ``x`` to itself; ``forward``'s ``mask`` is passed on to :func:`attention`."""

    def forward(self, x, mask=None):
        # BEGIN SOLUTION
        return attention(x, x, x, mask)
        # END SOLUTION
'''

# Weak on purpose: one time step and one head (the transpose changes nothing there), and no mask ever passed.
HEAD_SPLIT_CHECKS = '''\
import pytest
import torch


@pytest.mark.target("split_heads")
def test_splits_the_heads(check):
    check(torch.arange(8.0).reshape(2, 1, 4), 1)


@pytest.mark.target("SelfAttention")
def test_attends_to_itself(check):
    check(probe="run_forward", options={"inputs": (torch.arange(12.0).reshape(1, 3, 4) / 10,)})
'''

RUN_FORWARD = '''\
from torchgrade.probes import probe


@probe
def run_forward(target, args, kwargs, inputs=(), forward_kwargs=None):
    """Build the module and run forward on `inputs`."""
    module = target(*args, **kwargs)
    return target.run(module, *inputs, **(forward_kwargs or {}))
'''


def test_a_head_split_without_its_transpose_and_a_mask_never_passed_on_are_named_as_survivors(tmp_path):
    """The two bugs a transformer course written from the docs let through: the audit names both."""
    course = make_course(tmp_path, reference=HEAD_SPLIT, visible=HEAD_SPLIT_CHECKS, hidden="",
                         targets="      split_heads: 1\n      SelfAttention: 1")
    (tmp_path / "graders" / "checks" / "hidden" / "test_ops.py").unlink()
    (tmp_path / "graders" / "probes").mkdir()
    (tmp_path / "graders" / "probes" / "attention.py").write_text(RUN_FORWARD)
    data = audited("--assignment", course)
    survivors = {(m["operator"], m["after"]) for t in data["targets"] for m in t["mutants"] if m["verdict"] == "survived"}
    assert ("shape", "return x.view(b, t, heads, d // heads)") in survivors, survivors
    assert ("argument", "return attention(x, x, x)") in survivors, survivors


@pytest.mark.parametrize("target, operator, before, after", [
    ("tensors.scatter_", "jump", "break", "continue"),  # IndexError instead of the docstring's RuntimeError
    ("conv.pad2d", "types", "if isinstance(value, (tuple, list)):", "if isinstance(value, tuple):"),  # a list refused
    ("conv.corr2d_multi_in", "operand", "if X.dim() != 3 or K.dim() != 3:", "if K.dim() != 3:"),  # ValueError
], ids=["break-made-continue-in-scatter_", "tuple-narrowed-in-_pair", "or-operand-dropped-in-corr2d_multi_in"])
def test_the_survivors_an_outside_auditor_found_are_killed_by_the_bundled_course(grade, target, operator, before, after):
    from conftest import ROOT, lost_targets

    exercise, name = target.split(".")
    found = [m for m in make_mutants(ROOT / "reference" / f"{exercise}.py", exercise, name)
             if (m.operator, m.before, m.after) == (operator, before, after)]
    assert len(found) == 1, [m.diff for m in make_mutants(ROOT / "reference" / f"{exercise}.py", exercise, name)
                             if m.operator == operator]
    assert target in lost_targets(grade(only=(target,), files={f"{exercise}.py": found[0].source}))
