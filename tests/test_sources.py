"""The trusted side's reading of a submission's files (torchgrade/sandbox/sources.py): bounded in size and in what it keeps."""

from __future__ import annotations

import pytest

from torchgrade.sandbox import forbidden, sources
from torchgrade.engine.config import load_assignment
from torchgrade.engine.grading import grade_submission

from tiny_course import FULL_MARKS, make_course, student


def test_an_exercise_file_past_the_limit_is_that_students_error_and_is_never_parsed(tmp_path, monkeypatch):
    """A 1.5 MiB list literal appended to a correct tensors.py: every check of it fails with the reason, and
    the trusted process never parses it (it once cost 2.4 GB there)."""
    course = load_assignment(make_course(tmp_path / "course"))
    parsed = []
    real_parse = sources.parse
    monkeypatch.setattr(sources, "parse", lambda source, key=None: parsed.append(len(source)) or real_parse(source, key))
    folder = student(tmp_path / "big", extra="DATA = [" + "0, " * 520_000 + "]\n")
    g = grade_submission(folder, course, device="cpu")
    graded = [t for t in g.tests if t.status != "skipped"]  # (the CUDA ones are set aside: --device cpu)
    assert g.score == 0 and graded and all(t.status == "error" for t in graded)
    assert all("an exercise file may be at most 1 MiB" in t.output for t in graded), graded[0].output
    assert all(size <= sources.MAX_SOURCE_BYTES for size in parsed)
    # the same file, within the limit, is graded as usual
    ok = grade_submission(student(tmp_path / "small", extra="DATA = [0, 0]\n"), course, device="cpu")
    assert ok.score == FULL_MARKS


def test_the_static_scan_keeps_a_bounded_number_of_parsed_modules(tmp_path):
    for i in range(sources.PARSED_KEPT * 3):
        path = tmp_path / f"m{i}.py"
        path.write_text(f"import torch\n\ndef f(x):\n    return x.view({i})\n")
        assert forbidden.static_violations(path, "f", ("view",))
    assert len(sources._parsed) <= sources.PARSED_KEPT and len(forbidden._indexes) <= sources.PARSED_KEPT


@pytest.mark.parametrize("text", ["(" * 200_000, "x = " + "-" * 300_000 + "1"])
def test_a_file_python_cannot_parse_in_the_trusted_process_has_no_static_findings(tmp_path, text):
    """Deep nesting: a RecursionError or MemoryError of the parser is the file's, not the grader's."""
    path = tmp_path / "m.py"
    path.write_text(text)
    assert forbidden.static_violations(path, "f", ("view",)) == []
