"""The course as content-addressed bytes (torchgrade.classroom.coursepack), as Dask workers receive it."""

from __future__ import annotations

import dataclasses

import pytest

from torchgrade.engine.config import load_assignment
from torchgrade.classroom.coursepack import CoursePackError, materialise, pack

from tiny_course import make_course


@pytest.fixture
def course(tmp_path):
    return load_assignment(make_course(tmp_path / "course"))


def test_the_same_course_packs_to_the_same_digest_and_a_change_to_a_check_changes_it(course):
    first = pack(course)
    assert pack(course) == first
    check = next(course.checks_dir.rglob("test_*.py"))
    check.write_text(check.read_text() + "\n# a change\n")
    assert pack(course).digest != first.digest


def test_an_unpacked_course_grades_from_its_own_files_and_is_unpacked_once(course, tmp_path):
    shipped = pack(course)
    path = materialise(shipped, tmp_path / "cache")
    unpacked = load_assignment(path)
    assert [t.qualname for t in unpacked.targets] == [t.qualname for t in course.targets]
    assert (unpacked.reference_dir / "tensors.py").read_bytes() == (course.reference_dir / "tensors.py").read_bytes()
    assert unpacked.checks_dir.name == course.checks_dir.name  # pytest names the check modules after it
    marker = path.parent / "reference" / "tensors.py"
    marker.write_text("# left as it was")
    assert materialise(shipped, tmp_path / "cache") == path and marker.read_text() == "# left as it was"


def test_bytes_that_do_not_match_their_digest_are_refused(course, tmp_path):
    shipped = pack(course)
    tampered = dataclasses.replace(shipped, data=shipped.data[:-1] + bytes([shipped.data[-1] ^ 1]))
    with pytest.raises(CoursePackError, match="does not match its digest"):
        materialise(tampered, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("torchgrade-course-*"))
