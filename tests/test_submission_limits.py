"""Submission limits on Gradescope (torchgrade/engine/submission_limits.py), counted from submission_metadata.json
written as Gradescope documents it (https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from torchgrade.classroom import autograder as gradescope
from torchgrade.engine.config import ConfigError, load_assignment
from torchgrade.engine.submission_limits import Limit, LimitError, decide, parse, read_metadata

GRADESCOPE = json.loads((Path(__file__).with_name("gradescope_results.schema.json")).read_text())


def earlier_results(score: float, *, counted: bool | None = None, test: str = "tensors.one_hot: earlier") -> dict:
    """A results.json of an earlier submission, as Gradescope hands it back in previous_submissions."""
    extra = {"max_score": 5.0}
    if counted is not None:
        extra["submission_limit"] = {"counted": counted}
    return {"score": score, "output": "earlier", "extra_data": extra,
            "tests": [{"name": test, "score": score, "max_score": 5.0, "status": "passed", "visibility": "visible"}]}


def metadata(path: Path, created_at: str, previous: list[tuple[str, dict]], *, due: str = "2026-12-10T23:00:00.000000-08:00",
             late: str | None = None) -> Path:
    """submission_metadata.json with every field Gradescope documents."""
    path.write_text(json.dumps({
        "id": 123456,
        "created_at": created_at,
        "assignment": {"due_date": due, "group_size": None, "group_submission": False, "id": 25828,
                       "course_id": 1234, "late_due_date": late, "release_date": "2026-11-01T00:00:00.000000-07:00",
                       "title": "PyTorch basics", "total_points": "100.0"},
        "submission_method": "upload",
        "users": [{"email": "student@example.com", "id": 1234, "name": "Student User"}],
        "previous_submissions": [{"submission_time": t, "score": r["score"], "results": r} for t, r in previous],
    }, indent=2))
    return path


def test_a_limit_is_a_count_per_period_or_per_due_date():
    assert parse({"count": 3, "per": "24h"}).period.total_seconds() == 86400
    assert parse({"count": 2, "per": "30m"}).period.total_seconds() == 1800
    assert parse({"count": 5, "per": "due_date"}).period is None
    for wrong in ({"count": 0, "per": "24h"}, {"count": 3, "per": "daily"}, {"count": 3}, 3, {"count": True, "per": "1d"}):
        with pytest.raises(LimitError):
            parse(wrong)


def test_the_assignment_file_says_the_limit_and_a_wrong_one_is_one_line(tmp_path):
    from tiny_course import make_course

    path = make_course(tmp_path)
    path.write_text(path.read_text() + "submission_limit: {count: 3, per: 24h}\n")
    assert str(load_assignment(path).submission_limit) == "3 per 24h"
    path.write_text(path.read_text().replace("per: 24h", "per: daily"))
    with pytest.raises(ConfigError, match="submission_limit: per: expected a period"):
        load_assignment(path)


def test_a_rolling_period_counts_the_counted_submissions_inside_it(tmp_path):
    limit = Limit(2, parse({"count": 2, "per": "24h"}).period, "2 per 24h")
    previous = [("2026-12-01T08:00:00-08:00", earlier_results(1.0)),  # outside the 24 hours
                ("2026-12-02T09:00:00-08:00", earlier_results(2.0)),
                ("2026-12-02T10:00:00-08:00", earlier_results(0.0, counted=False)),  # turned away: not counted
                ("2026-12-02T11:00:00-08:00", earlier_results(3.0))]
    meta = read_metadata(metadata(tmp_path / "m.json", "2026-12-02T12:00:00-08:00", previous))
    verdict = decide(limit, meta)
    assert not verdict.counted and verdict.used == 2
    assert verdict.kept["score"] == 3.0  # the last counted one's, not the turned-away one's
    assert verdict.next_try.isoformat() == "2026-12-03T09:00:00-08:00"  # when the oldest counted one leaves
    later = read_metadata(metadata(tmp_path / "m.json", "2026-12-03T09:30:00-08:00", previous))
    assert decide(limit, later).counted and decide(limit, later).used == 2


def test_per_due_date_counts_before_the_due_date_then_again_until_the_late_one(tmp_path):
    limit = parse({"count": 2, "per": "due_date"})
    due, late = "2026-12-10T23:00:00-08:00", "2026-12-12T23:00:00-08:00"
    before = [("2026-12-09T10:00:00-08:00", earlier_results(1.0)), ("2026-12-10T10:00:00-08:00", earlier_results(4.0))]
    over = decide(limit, read_metadata(metadata(tmp_path / "m.json", "2026-12-10T20:00:00-08:00", before, due=due, late=late)))
    assert not over.counted and over.kept["score"] == 4.0 and over.next_try.isoformat() == due
    after = decide(limit, read_metadata(metadata(tmp_path / "m.json", "2026-12-11T08:00:00-08:00", before, due=due, late=late)))
    assert after.counted and after.used == 1


def test_per_due_date_no_new_allowance_starts_after_the_late_due_date(tmp_path):
    limit = parse({"count": 2, "per": "due_date"})
    due, late = "2026-12-10T23:00:00-08:00", "2026-12-12T23:00:00-08:00"
    between = [("2026-12-11T10:00:00-08:00", earlier_results(3.0)), ("2026-12-12T10:00:00-08:00", earlier_results(4.0))]
    past = decide(limit, read_metadata(metadata(tmp_path / "m.json", "2026-12-13T08:00:00-08:00", between, due=due, late=late)))
    assert not past.counted and past.used == 2 and past.kept["score"] == 4.0 and past.next_try is None
    one = decide(limit, read_metadata(metadata(tmp_path / "m.json", "2026-12-13T08:00:00-08:00", between[:1], due=due, late=late)))
    assert one.counted and one.used == 2  # the count between the due dates goes on after the late one


def test_over_the_limit_with_the_last_results_missing_the_student_is_told_not_shown_older_scores(tiny, tmp_path):
    previous = [("2026-12-02T09:00:00-08:00", earlier_results(5.0, counted=True, test="tensors.one_hot: older")),
                ("2026-12-02T10:00:00-08:00", earlier_results(2.0, counted=True))]
    path = metadata(tmp_path / "m.json", "2026-12-02T12:00:00-08:00", previous)
    data = json.loads(path.read_text())
    data["previous_submissions"][-1]["results"] = None  # Gradescope sends `results: null` for it
    path.write_text(json.dumps(data))
    document = _autograde(tiny, tmp_path, path)
    assert document["score"] == 2.0 and document["tests"] == []  # the last counted one's score, not the older 5
    assert "The results of your last counted submission (submitted 2026-12-02T10:00-08:00) are missing" in \
        document["output"] and "those of your last counted submission" not in document["output"]
    assert document["extra_data"]["submission_limit"]["counted"] is False
    data["previous_submissions"][-1]["score"] = None  # nor its score: 0, and said so
    path.write_text(json.dumps(data))
    document = _autograde(tiny, tmp_path, path)
    assert document["score"] == 0.0 and document["tests"] == [] and "neither its score nor its checks" in document["output"]


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The tiny course with a limit of 2 per 24h, graded by `autograde` without a sandbox proof (tests of
    the proof are in test_gradescope.py)."""
    from tiny_course import make_course, student

    path = make_course(tmp_path)
    path.write_text(path.read_text() + "submission_limit: {count: 2, per: 24h}\n")
    monkeypatch.setattr(gradescope, "prove_level", lambda *args: "process")
    return load_assignment(path), student(tmp_path / "submission", "reference")


def _autograde(tiny, tmp_path, meta: Path | None) -> dict:
    assignment, folder = tiny
    results = tmp_path / "results" / "results.json"
    assert gradescope.autograde(folder, results, "cpu", assignment, [], [], metadata=meta) == 0
    document = json.loads(results.read_text())
    jsonschema.validate(document, GRADESCOPE)
    return document


def test_over_the_limit_the_last_counted_results_stay_with_when_the_next_try_counts(tiny, tmp_path, monkeypatch):
    def graded(*args, **kwargs):
        raise AssertionError("a submission over the limit is not graded")

    monkeypatch.setattr("torchgrade.classroom.batch.grade_one", graded)
    previous = [("2026-12-02T09:00:00-08:00", earlier_results(5.0, counted=True, test="tensors.one_hot: kept")),
                ("2026-12-02T10:00:00-08:00", earlier_results(2.0, counted=True))]
    document = _autograde(tiny, tmp_path, metadata(tmp_path / "m.json", "2026-12-02T12:00:00-08:00", previous))
    assert document["score"] == 2.0 and [t["name"] for t in document["tests"]] == ["tensors.one_hot: earlier"]
    assert document["output"].startswith("Submission limit reached (2 per 24h; 2 counted)")
    assert "possible from 2026-12-03T09:00-08:00" in document["output"]
    assert document["extra_data"]["submission_limit"]["counted"] is False
    # the next submission's count skips this one
    previous.append(("2026-12-02T12:00:00-08:00", document))
    later = read_metadata(metadata(tmp_path / "m2.json", "2026-12-03T09:30:00-08:00", previous))
    assert decide(tiny[0].submission_limit, later).counted


def test_under_the_limit_the_submission_is_graded_and_marked_counted(tiny, tmp_path):
    previous = [("2026-12-02T10:00:00-08:00", earlier_results(2.0))]
    document = _autograde(tiny, tmp_path, metadata(tmp_path / "m.json", "2026-12-02T12:00:00-08:00", previous))
    assert document["score"] == 5.0 and "Counted submission 2 of 2 per 24h." in document["output"]
    assert document["extra_data"]["submission_limit"] == {"counted": True, "limit": "2 per 24h", "used": 2}


@pytest.mark.parametrize("content", [None, "{not json", json.dumps({"previous_submissions": []}),
                                     json.dumps({"created_at": "yesterday", "previous_submissions": []})],
                         ids=["missing", "not-json", "no-created_at", "garbled-time"])
def test_a_missing_or_garbled_metadata_file_grades_normally_with_a_note(tiny, tmp_path, content):
    meta = tmp_path / "submission_metadata.json"
    if content is not None:
        meta.write_text(content)
    document = _autograde(tiny, tmp_path, meta)
    assert document["score"] == 5.0
    assert "the submission limit (2 per 24h) was not applied: Gradescope's submission_metadata.json" in document["output"]
    assert "submission_limit" not in document["extra_data"]
