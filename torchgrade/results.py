"""results.json: Gradescope's autograder format, plus exercise, target, device and status per test."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from . import __version__
from .config import Assignment
from .scoring import Grade


def results_document(grade: Grade, assignment: Assignment) -> dict[str, Any]:
    """The results.json content for one graded submission."""
    tests = []
    for t in grade.tests:
        tests.append({
            "name": t.name,
            "exercise": t.exercise,
            "target": t.target,
            "device": t.device,
            "visibility": "visible" if t.visibility == "visible" else assignment.hidden_visibility,
            "status": t.status,
            "score": round(t.score, 4),
            "max_score": round(t.max_score, 4),
            "output": t.output,
        })
    return {
        "score": grade.score,
        "max_score": grade.max_score,
        "execution_time": grade.execution_time,
        "output": grade.output,
        "tests": tests,
        "torchgrade": {"version": __version__, "submission": grade.submission, "devices": grade.devices,
                       "isolation": grade.isolation, "assignment": assignment.title},
    }


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that a reader (or a killed run) sees the old content or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_results(grade: Grade, assignment: Assignment, path: Path) -> None:
    """Write results.json for one submission."""
    write_atomic(path, json.dumps(results_document(grade, assignment), indent=2, ensure_ascii=False) + "\n")
