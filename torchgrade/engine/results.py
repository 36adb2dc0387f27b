"""results.json: Gradescope's autograder results format, with torchgrade's own fields under `extra_data`.

The file is valid against Gradescope's specification as it is (tests/gradescope_results.schema.json
transcribes it): per-test `status` is only `passed` or `failed`, torchgrade's finer outcome
(`passed`/`failed`/`error`/`skipped`) is `extra_data.outcome`, and checks skipped for a device that
was not graded are not tests at all: their count and reasons are in `output`, and the checks
themselves in `extra_data.skipped_checks`, so a grade read back (`read_grade`) is the grade written.
Scores are written at full precision (a float's shortest round-trip form), never rounded per test.

There are two copies. The student's (the default; what Gradescope and `torchgrade check` write, and
DIR/<submission>/results.json) gives a hidden check its name, verdict and points only: its message
is one fixed line, and what the submission printed once hidden checks had begun is left out, for
both may hold the hidden inputs. The instructor's (`instructor=True`; DIR/<submission>/instructor/)
keeps every message, and that printed output as `extra_data.hidden_output`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from torchgrade.base.version import __version__
from torchgrade.engine.config import Assignment
from torchgrade.base.printable import utf8
from torchgrade.engine.scoring import CheckResult, Grade, points_text

#: DIR/<submission>/INSTRUCTOR_FOLDER holds the instructor's copy (results.json, report.html): a folder
#: of its owner's only (0700), which no page of the student's links to.
INSTRUCTOR_FOLDER = "instructor"
#: Mode of every file torchgrade writes: readable by a web server running as another user
#: (`set_private(True)`, or `--private`, makes them 0600).
FILE_MODE = 0o644


def set_private(private: bool) -> None:
    """Write output files readable by their owner only (0600) instead of by everyone (0644)."""
    global FILE_MODE
    FILE_MODE = 0o600 if private else 0o644


def skip_summary(skipped: list[CheckResult]) -> str:
    """One line per reason checks were set aside: "11 checks skipped: CUDA is not available"."""
    reasons = Counter((t.output.split("\n", 1)[0] or "skipped") for t in skipped)
    return "\n".join(f"{n} check{'s' if n != 1 else ''} skipped: {reason}" for reason, n in
                     sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def _check_data(t: CheckResult, instructor: bool = False) -> dict[str, Any]:
    data = {"exercise": t.exercise, "target": t.target, "device": t.device, "outcome": t.status,
            "nodeid": t.nodeid, "duration": t.duration, "forbidden": t.forbidden}
    if not instructor and t.visibility != "visible":  # how long the code took on a hidden input says of the input
        del data["duration"]
    if t.standin:  # a device fact from the CUDA stand-in, not a GPU
        data["standin"] = True
    if t.adjusted:  # an instructor's decision (torchgrade/classroom/overrides.py): torchgrade's own score in their copy
        data["adjusted"] = t.adjusted
        if instructor and t.automatic is not None:
            data["automatic_score"] = t.automatic
    if t.excused:  # out of the total (the grade's score is the other checks' share, scaled to the full points)
        data["excused"] = True
    return data


def _adjusted_line(reason: str) -> str:
    from torchgrade.engine.i18n import t as words

    return words("adjusted", reason=reason)


def adjustment_lines(grade: Grade, *, instructor: bool = False) -> list[str]:
    """One line per instructor's decision on this grade; the instructor's also give torchgrade's score and any flag."""
    from torchgrade.engine.i18n import t as words

    lines = []
    for a in grade.adjustments:
        line = _adjusted_line(a["reason"])
        if a.get("points") is not None:
            line += " (" + words("adjusted_scope", scope=a["scope"], points=points_text(a["points"]),
                                 max_score=points_text(a["max_score"])) + ")"
        if instructor and a.get("automatic") is not None:
            line += f" [automatic: {points_text(a['automatic'])}]"
        if instructor and a.get("review"):
            line += f" [review: {a['review']}]"
        lines.append(line)
    return lines


def _student_output(t: CheckResult) -> str:
    """What the student's copy says of a check: a hidden check's message (a skip reason too) is the instructor's."""
    if t.visibility == "visible" or t.status == "passed":
        return t.output
    from torchgrade.engine.i18n import t as words

    return words("hidden_check_details")


def results_document(grade: Grade, assignment: Assignment, *, instructor: bool = False) -> dict[str, Any]:
    """The results.json content for one graded submission: the student's copy, or with `instructor` the
    instructor's (every message, and what was printed during hidden checks)."""
    tests, skipped, positions = [], [], []
    for position, t in enumerate(grade.tests):
        if t.status == "skipped":
            skipped.append(t)
            positions.append(position)
            continue
        tests.append({
            "name": t.name,
            "visibility": "visible" if t.visibility == "visible" else assignment.hidden_visibility,
            "status": "passed" if t.status == "passed" else "failed",
            "score": t.score,
            "max_score": t.max_score,
            "output": "\n".join(part for part in (_adjusted_line(t.adjusted) if t.adjusted else "",
                                                   t.output if instructor else _student_output(t)) if part),
            "output_format": "text",  # student text is never rendered as HTML or Markdown
            "extra_data": _check_data(t, instructor),
        })
    if not instructor:  # what the student's copy may say of each set-aside check
        skipped = [dataclasses.replace(t, output=_student_output(t)) for t in skipped]
    summary = skip_summary(skipped)
    output = "\n".join(part for part in (*adjustment_lines(grade, instructor=instructor), grade.output, summary) if part)
    adjustments = [a if instructor else {k: a[k] for k in ("scope", "reason", "points", "max_score")}
                   for a in grade.adjustments]
    return {
        "score": grade.score,
        "execution_time": grade.execution_time,
        "output": output,
        "output_format": "text",
        "extra_data": {
            "max_score": grade.max_score, "submission": grade.submission, "isolation": grade.isolation,
            "watch": grade.watch,
            "devices": grade.devices, "assignment": assignment.title, "version": __version__,
            "cuda_standin": grade.standin or None,
            "copy": "instructor" if instructor else "student",
            **({"adjustments": adjustments} if adjustments else {}),
            **({"notebooks": grade.notebooks} if grade.notebooks else {}),
            **({"hidden_output": grade.hidden_output} if instructor else {}),
            "skipped": len(skipped), "skipped_reasons": dict(Counter(t.output.split("\n", 1)[0] for t in skipped)),
            # Where each stood among the checks, so that a grade read back lists them in the same order.
            "skipped_checks": [{"name": t.name, "output": t.output, "position": position,
                                "visibility": "visible" if t.visibility == "visible" else "hidden",
                                **_check_data(t, instructor)}
                               for t, position in zip(skipped, positions)],
        },
        "tests": tests,
    }


def read_grade(data: dict[str, Any], default_name: str = "") -> Grade:
    """The Grade a results_document was made from (for resumed, merged and re-paged runs)."""
    meta = data.get("extra_data", {})
    tests = []

    def result(name, visibility, output, score, max_score, extra) -> CheckResult:
        if extra.get("adjusted"):  # read back as torchgrade graded it: overrides are applied anew (overrides.py)
            score = extra.get("automatic_score", score)
            line = _adjusted_line(extra["adjusted"])
            output = output[len(line):].lstrip("\n") if output.startswith(line) else output
        return CheckResult(nodeid=extra.get("nodeid", name), name=name, exercise=extra.get("exercise", ""),
                           target=extra.get("target", ""), device=extra.get("device"),
                           visibility="visible" if visibility == "visible" else "hidden",
                           status=extra.get("outcome", "error"), output=output, forbidden=bool(extra.get("forbidden")),
                           duration=float(extra.get("duration", 0.0)), score=float(score), max_score=float(max_score),
                           standin=bool(extra.get("standin")))

    for t in data["tests"]:
        tests.append(result(t["name"], t.get("visibility"), t.get("output", ""), t.get("score", 0.0),
                            t.get("max_score", 0.0), t.get("extra_data", {})))
    skipped = []
    everything = list(tests)
    for s in sorted(meta.get("skipped_checks", []), key=lambda s: int(s.get("position", 1 << 30))):
        skipped.append(result(s["name"], s.get("visibility"), s.get("output", ""), 0.0, 0.0, s))
        everything.insert(min(int(s.get("position", len(everything))), len(everything)), skipped[-1])
    output = data.get("output", "")
    summary = skip_summary(skipped)
    if summary and output.endswith(summary):
        output = output[: -len(summary)].rstrip("\n")
    adjustments = list(meta.get("adjustments", []))
    if adjustments:  # the lines adjustment_lines wrote come first, one per decision
        output = "\n".join(output.split("\n")[len(adjustments):])
    return Grade(submission=meta.get("submission", default_name), tests=everything,
                 execution_time=float(data.get("execution_time", 0.0)), output=output,
                 devices=list(meta.get("devices", [])), isolation=meta.get("isolation", "process"),
                 watch=meta.get("watch", ""),
                 standin=meta.get("cuda_standin") or "",
                 hidden_output=meta.get("hidden_output", ""), adjustments=adjustments,
                 notebooks={str(k): str(v) for k, v in (meta.get("notebooks") or {}).items()})


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that a reader (or a killed run) sees the old content or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; pages are served by web servers running as others
        with os.fdopen(fd, "wb") as f:
            f.write(utf8(text))  # a name of bytes that are not UTF-8 that reached the text stops nothing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_results(grade: Grade, assignment: Assignment, path: Path, *, instructor: bool = False) -> None:
    """Write results.json for one submission (the student's copy unless `instructor`)."""
    write_atomic(path, json.dumps(results_document(grade, assignment, instructor=instructor), indent=2,
                                  ensure_ascii=False) + "\n")
