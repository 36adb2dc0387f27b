"""`torchgrade similarity OUT`: pairs of students with the same code for a target, found through renaming
and reformatting (tests/near_copies.py makes the copies), with the stub's code left out, the reference and
known solutions as sources, on a page linked from the class index."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchgrade.classroom import similarity as sim
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment

from near_copies import near_copy
from tiny_course import make_course, student

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "reference" / "tensors.py").read_text()

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


def test_the_similarity_page_ranks_the_copies_first_and_is_linked_from_the_index(graded):
    course, out, known = graded
    result = CliRunner().invoke(main, ["similarity", str(out), "--known", str(known), "--assignment", str(course)])
    assert result.exit_code == 0, result.output
    report = sim.analyse(sim.class_code(out, ("tensors",)), load_assignment(course),
                         {"reference": sim.modules(ROOT / "reference", ("tensors",)),
                          **sim.known_sources(known, ("tensors",))})
    one_hot = [(p.a.owner, p.b.owner, round(p.similarity, 2)) for p in report.pairs if p.target == "tensors.one_hot"]
    # ann, ben and the known solution share one code; cy copied the reference; dee's stub and eve's own are apart
    assert {frozenset(pair[:2]) for pair in one_hot} == {frozenset(p) for p in (
        ("ann", "ben"), ("ann", "known/last-term"), ("ben", "known/last-term"), ("cy", "reference"))}
    assert all(s == 1.0 for *_, s in one_hot)
    assert not any("dee" in (p.a.owner, p.b.owner) for p in report.pairs)
    page = (out / "similarity.html").read_text()
    assert "ann" in page and "ben" in page and 'class="matched"' in page and 'href="ann/report.html"' in page
    assert f'href="{sim.PAGE}"' in (out / "index.html").read_text()


def test_a_folder_graded_without_kept_code_is_one_line_and_exit_2(graded, tmp_path):
    course, out, _ = graded
    old = tmp_path / "old"
    shutil.copytree(out, old)
    for folder in old.glob("*/instructor/code"):
        shutil.rmtree(folder)
    result = CliRunner().invoke(main, ["similarity", str(old), "--assignment", str(course)])
    assert result.exit_code == 2 and "no student code kept there" in result.output
