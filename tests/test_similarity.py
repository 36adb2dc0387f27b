"""`torchgrade similarity OUT`: pairs of students with the same code for a target, found through each kind of
disguise (tests/near_copies.py makes the copies), with the stub's code left out, the reference and known
solutions as sources; pairs of people ranked by evidence on a page linked from the class index, and every
row for scripts (--json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
import ast

from torchgrade.classroom import similarity as sim
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment

from near_copies import DISGUISES, definitions, disguised_class, near_copy
from tiny_course import make_course, student

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "reference" / "tensors.py").read_text()
COURSE = load_assignment(ROOT / "assignment.yaml")
NAMES = tuple(e.name for e in COURSE.exercises)
TARGETS = [(t.exercise, t.name) for t in COURSE.targets]

#: A one_hot of a student's own, unlike the reference's (a comparison with arange, not a scatter).
OWN_ONE_HOT = '''
def one_hot(labels, num_classes=-1):
    if labels.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if labels.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(labels.max()) + 1
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise RuntimeError("Class values must be non-negative and smaller than num_classes.")
    classes = torch.arange(num_classes, device=labels.device)
    hits = labels.unsqueeze(-1) == classes
    return hits.to(torch.int64)
'''

#: Another student's own one_hot: rows of Python lists.
EVE_ONE_HOT = '''
def one_hot(labels, num_classes=-1):
    values = labels.reshape(-1).tolist()
    if labels.dtype != torch.int64:
        raise RuntimeError("one_hot needs int64 labels")
    width = num_classes if num_classes != -1 else (max(values) + 1 if values else 0)
    rows = []
    for value in values:
        if not 0 <= value < width:
            raise RuntimeError("a label is out of range")
        rows.append([1 if k == value else 0 for k in range(width)])
    return torch.tensor(rows, dtype=torch.int64, device=labels.device).reshape(*labels.shape, width)
'''


def test_a_renamed_and_reformatted_copy_is_as_similar_as_the_original_and_other_code_is_not():
    copy = near_copy(REFERENCE + OWN_ONE_HOT, seed=3)
    mine = copy.rsplit("def one_hot", 1)[1]
    assert "hits = " not in mine and "classes = " not in mine and "labels" not in mine  # every name renamed
    a = sim.version("a", REFERENCE + OWN_ONE_HOT, "one_hot")
    b = sim.version("b", copy, "one_hot")
    ref = sim.version("reference", REFERENCE, "one_hot", source=True)
    pairs = {(p.a.owner, p.b.owner): p.similarity for p in sim.compare([ref, a, b], set(), "tensors.one_hot", 0.0)[0]}
    assert pairs[("a", "b")] == 1.0
    assert pairs[("a", "reference")] < 0.4 and pairs[("b", "reference")] < 0.4
    # a rename alone (no reformatting) and a reformat alone change nothing either
    renamed = sim.version("c", (REFERENCE + OWN_ONE_HOT).replace("hits", "mask").replace("classes", "ks"), "one_hot")
    assert sim.compare([a, renamed], set(), "t", 0.0)[0][0].similarity == 1.0


def test_the_stubs_code_is_boilerplate():
    stub = (ROOT / "exercises" / "tensors.py").read_text()
    versions = [sim.version(name, stub, "one_hot") for name in ("x", "y")]
    boilerplate = set(sim.version("stub", stub, "one_hot").grams)
    assert sim.compare(versions, set(), "t", 0.6)[0] and sim.compare(versions, boilerplate, "t", 0.0) == ([], 0)


def _similarities(a: dict[str, str], b: dict[str, str]) -> dict[str, float]:
    """Each target's similarity between two people's modules on the bundled course, the stub's code left out."""
    stubs = dict(sim.versions_of("stub", sim.modules(COURSE.stubs_dir, NAMES), TARGETS))
    mine, theirs = dict(sim.versions_of("a", a, TARGETS)), dict(sim.versions_of("b", b, TARGETS))
    found = {}
    for target in mine.keys() & theirs.keys():
        pairs, _ = sim.compare([mine[target], theirs[target]], set(stubs[target].grams), target, 0.0)
        found[target] = pairs[0].similarity if pairs else 0.0
    return found


@pytest.mark.parametrize("kind", DISGUISES)
def test_each_disguise_of_the_reference_keeps_every_target_at_least_60_percent_similar(kind):
    reference = sim.modules(COURSE.reference_dir, NAMES)
    copy = {m: DISGUISES[kind](text, {t for e, t in TARGETS if e == m}) for m, text in reference.items()}
    assert copy != reference  # the disguise changed something
    found = _similarities(reference, copy)
    assert len(found) == len(TARGETS)
    assert {t: s for t, s in found.items() if s < sim.THRESHOLD} == {}


def test_renaming_one_method_only_changes_nothing():
    """The issue's case: backward's locals renamed, forward's kept (numbering across the class used to drop it)."""
    text = (ROOT / "reference" / "functions.py").read_text()
    tree = ast.parse(text)
    linear = next(n for n in tree.body if getattr(n, "name", "") == "LinearFn")
    backward = next(n for n in linear.body if getattr(n, "name", "") == "backward")
    local = {a.arg for a in backward.args.args} | {n.id for n in ast.walk(backward) if isinstance(n, ast.Name)
                                                    and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(backward):
        if isinstance(node, ast.Name) and node.id in local:
            node.id += "_renamed"
        elif isinstance(node, ast.arg):
            node.arg += "_renamed"
    assert "grad_output_renamed" in ast.unparse(tree)
    assert _similarities({"functions": text}, {"functions": ast.unparse(tree)})["functions.LinearFn"] == 1.0


@pytest.fixture(scope="module")
def disguised():
    """A class of the fairness corpus's own solutions with six disguised pairs and two copies of the reference,
    read as the command reads a graded class (no grading needed: similarity reads only the code)."""
    students, copies, independent = disguised_class(ROOT / "tests" / "fairness", COURSE)
    report = sim.analyse(students, COURSE, {"reference": sim.modules(COURSE.reference_dir, NAMES)})
    return report, copies, independent, students


def test_every_disguised_copy_of_an_independent_solution_is_at_least_60_percent_similar(disguised):
    report, copies, _, students = disguised
    listed = {frozenset((p.a, p.b)): {m.target: m.similarity for m in p.matches} for p in report.pairs}
    assert len(copies) == 7
    # each disguise changed the definition of a target it copied (not only the layout of what it copied)
    for pair in copies:
        if "ref-copy-1" not in pair:
            original, copy = sorted(pair, key=lambda who: who.startswith("copy-of-"))
            assert any(definitions(students[original], t) != definitions(students[copy], t) for t in copies[pair]), pair
    for pair, targets in copies.items():
        assert targets and targets <= set(listed[pair]), (sorted(pair), targets - set(listed[pair]))


def test_the_copying_pairs_rank_above_every_pair_of_independent_students_by_evidence(disguised):
    """The six disguised pairs and the two students who copied the reference (each with the reference, and
    with each other) rank above every pair of independent students."""
    report, copies, independent, _ = disguised
    copying = [tuple(sorted(pair)) for pair in copies] + [("ref-copy-1", "reference"), ("ref-copy-2", "reference")]
    honest = [report.evidence.get((a, b), 0.0) for i, a in enumerate(independent) for b in independent[i + 1:]]
    assert len(copying) == 9 and len(honest) == 19 * 18 // 2
    assert min(report.evidence[pair] for pair in copying) > max(honest)
    ranked = [tuple(sorted((p.a, p.b))) for p in report.pairs]
    assert set(ranked[:9]) == set(copying)  # the page leads with them
    # code every correct student writes alike weighs less than its similarity: evidence is below the sum
    first = report.pairs[0]
    assert first.evidence < sum(m.similarity for m in first.matches)


def test_the_first_pairs_open_to_their_targets_the_code_shown_within_its_budget(disguised):
    report, *_ = disguised
    page = sim.render(report, COURSE, {}, most=5, blocks=3)
    assert page.count('<details class="card pair"') == 5 and page.count('<div class="match">') == 3
    first, second = report.pairs[0], report.pairs[1]
    assert f"{first.count - 3} more targets at 60% or more" in page  # the first pair's others named
    assert f"{second.count} targets at 60% or more: <code>{second.matches[0].target}</code>" in page
    assert "the code of 3 targets is below, the first pairs'; the first 5 pairs open" in page
    assert page.count('<a href="#pair-') == 5 and len(report.pairs) > 5  # the others only in the table


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The tiny course graded for a class: ann and ben hand in the same own one_hot (ben's renamed and
    reformatted), cy copies the reference, dee keeps the stub, eve writes her own (another own one_hot)."""
    root = tmp_path_factory.mktemp("sim")
    course = make_course(root)
    cls = root / "class"
    student(cls / "ann", extra=OWN_ONE_HOT)
    (cls / "ben").mkdir()
    (cls / "ben" / "tensors.py").write_text(near_copy((cls / "ann" / "tensors.py").read_text(), seed=7))
    student(cls / "cy")
    (cls / "cy" / "tensors.py").write_text(near_copy(REFERENCE, seed=11))
    student(cls / "dee", "stub")
    student(cls / "eve", extra=EVE_ONE_HOT)
    known = root / "known" / "last-term"
    known.mkdir(parents=True)
    (known / "tensors.py").write_text(near_copy(REFERENCE + OWN_ONE_HOT, seed=5))
    out = root / "out"
    result = CliRunner().invoke(main, ["grade", str(cls), "--out", str(out), "--device", "cpu", "--assignment", str(course)])
    assert result.exit_code == 0, result.output
    return course, out, root / "known"


def test_grade_keeps_each_students_modules_for_the_instructor(graded):
    course, out, _ = graded
    kept = out / "ann" / "instructor" / "code" / "tensors.py"
    assert kept.read_text().endswith(OWN_ONE_HOT.lstrip("\n")) or OWN_ONE_HOT.strip() in kept.read_text()
    assert not (out / "ann" / "code").exists()  # not beside the student's copy


def test_the_page_leads_with_pairs_by_evidence_and_json_lists_every_row(graded):
    course, out, known = graded
    result = CliRunner().invoke(main, ["similarity", str(out), "--known", str(known), "--json",
                                                       "--assignment", str(course)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["pairs"]
    assert rows and all(set(r) == {"a", "b", "target", "similarity"} and r["similarity"] >= sim.THRESHOLD for r in rows)
    one_hot = {frozenset((r["a"], r["b"])): r["similarity"] for r in rows if r["target"] == "tensors.one_hot"}
    # ann, ben and the known solution share one code; cy copied the reference; dee's stub and eve's own are apart
    assert set(one_hot) == {frozenset(p) for p in (
        ("ann", "ben"), ("ann", "known/last-term"), ("ben", "known/last-term"), ("cy", "reference"))}
    assert set(one_hot.values()) == {1.0}
    assert not any("dee" in (r["a"], r["b"]) for r in rows)
    report = sim.analyse(sim.class_code(out, ("tensors",)), load_assignment(course),
                         {"reference": sim.modules(ROOT / "reference", ("tensors",)), **sim.known_sources(known, ("tensors",))})
    assert len(report.rows) == len(rows)
    assert [p.evidence for p in report.pairs] == sorted((p.evidence for p in report.pairs), reverse=True)
    students = {frozenset((p.a, p.b)) for p in report.pairs if not p.source}
    assert frozenset(("ann", "ben")) in students and len(students) == report.student_pairs <= 10  # pairs of 5, not rows
    page = (out / "similarity.html").read_text()
    assert f"{report.student_pairs} pairs of students (of 10)" in page and "Pairs by evidence" in page
    assert page.count('<details class="card pair"') == len(report.pairs)  # every pair listed, each opens
    first = report.pairs[0]
    assert page.index(f"1. {first.a} and {first.b}") < page.index('class="matched"')
    assert 'href="ann/report.html"' in page and "helpers it calls" in page
    assert f'href="{sim.PAGE}"' in (out / "index.html").read_text()


def test_the_page_escapes_what_students_wrote():
    hostile = {"tensors": REFERENCE.replace("def one_hot", "# <script>alert(1)</script>\ndef one_hot")}
    report = sim.analyse({"<img src=x>": hostile, "b": hostile}, COURSE, {})
    page = sim.render(report, COURSE, {})
    assert "<script>alert" not in page and "<img src=x>" not in page and "&lt;img src=x&gt;" in page


def test_a_folder_graded_without_kept_code_is_one_line_and_exit_2(graded, tmp_path):
    course, out, _ = graded
    old = tmp_path / "old"
    shutil.copytree(out, old)
    for folder in old.glob("*/instructor/code"):
        shutil.rmtree(folder)
    result = CliRunner().invoke(main, ["similarity", str(old), "--assignment", str(course)])
    assert result.exit_code == 2 and "no student code kept there" in result.output
