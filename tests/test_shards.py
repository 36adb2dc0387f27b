"""--shard i/n splits a class by a stable hash of names; merge joins the shards into one class report."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from torchgrade.classroom.batch import grade_class
from torchgrade.cli import main
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.ledger import Ledger
from torchgrade.classroom.shards import MergeError, Shard, merge
from torchgrade.classroom.submissions import Submission, discover

from tiny_course import copy_class, make_course, student

NAMES = [f"student{i:03d}" for i in range(60)] + ["Ünïcode-名前", "a b", "x.zip-2"]


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_the_shards_cover_the_class_exactly_once_whatever_the_order(count):
    shards = [Shard(i, count) for i in range(1, count + 1)]
    holders = {name: [s for s in shards if s.holds(name)] for name in NAMES}
    assert all(len(h) == 1 for h in holders.values())
    shuffled = [Submission(n, None) for n in random.Random(1).sample(NAMES, len(NAMES))]
    for shard in shards:
        ordered = [s.name for s in shard.select([Submission(n, None) for n in NAMES])]
        assert sorted(s.name for s in shard.select(shuffled)) == sorted(ordered)
    if count > 1:
        assert all(shard.select([Submission(n, None) for n in NAMES]) for shard in shards)


def test_a_name_always_lands_in_the_same_shard():
    # Pinned (sha256 of the name, not Python's salted hash()): every machine of a CI matrix, on any
    # Python, must split a class the same way.
    assert {n: next(i for i in (1, 2, 3, 4) if Shard(i, 4).holds(n)) for n in ("alice", "bob", "carol", "dan", "eve")} \
        == {"alice": 4, "bob": 3, "carol": 3, "dan": 2, "eve": 4}


@pytest.mark.parametrize("text, message", [("0/4", "count from 1"), ("5/4", "count from 1"), ("1/0", "count from 1"),
                                           ("1-4", "not i/n"), ("a/b", "not i/n"), ("1/2/3", "not i/n")])
def test_a_bad_shard_is_refused_with_the_reason(text, message):
    with pytest.raises(ValueError, match=message):
        Shard.parse(text)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


@pytest.fixture(scope="module")
def cls(tmp_path_factory):
    return copy_class({"alice": "reference", "bob": "stub", "carol": "reference", "dan": "stub", "eve": "reference"},
                      tmp_path_factory.mktemp("class"))


def test_merged_shards_make_the_same_class_report_as_one_run(course, cls, tmp_path):
    submissions = discover([cls], ("tensors",))
    whole = grade_class(submissions, course, tmp_path / "whole", device="cpu")
    runner = CliRunner()
    shard_dirs = []
    for i in (1, 2, 3):
        out = tmp_path / f"shard{i}"
        result = runner.invoke(main, ["grade", str(cls), "--out", str(out), "--shard", f"{i}/3", "--device", "cpu",
                                      "--assignment", str(course.path)])
        assert result.exit_code == 0, result.output
        assert f"shard {i}/3: " in result.output
        shard_dirs.append(out)
    merged = tmp_path / "merged"
    result = runner.invoke(main, ["merge", *map(str, shard_dirs), "--out", str(merged), "--assignment", str(course.path)])
    assert result.exit_code == 0, result.output
    assert "merged 5 submission(s) from 3 shard(s)" in result.output

    assert (merged / "grades.csv").read_text() == (tmp_path / "whole" / "grades.csv").read_text()
    assert sorted(Ledger(merged).load()) == [s.name for s in submissions]
    for s in submissions:
        assert (merged / s.name / "results.json").is_file() and (merged / s.name / "report.html").is_file()
    index = (merged / "index.html").read_text()
    assert all(f'href="{s.name}/report.html"' in index for s in submissions)
    assert len(whole.grades) == 5


def test_merge_refuses_shards_that_do_not_fit_together(course, cls, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    grade_class([Submission("alice", cls / "alice")], course, a, device="cpu")
    grade_class([Submission("alice", student(tmp_path / "other", "stub"))], course, b, device="cpu")
    with pytest.raises(MergeError, match="alice was graded from different files"):
        merge([a, b], tmp_path / "out")
    c = tmp_path / "c"
    grade_class([Submission("bob", cls / "bob")], course, c, device="all")  # another grader key
    with pytest.raises(MergeError, match="different graders"):
        merge([a, c], tmp_path / "out2")


def test_merge_of_a_folder_without_a_ledger_exits_2(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["merge", str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "no ledger.jsonl" in result.output
    assert not (tmp_path / "out").exists()
