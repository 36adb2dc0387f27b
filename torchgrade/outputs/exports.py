"""Class exports other tools read: a CSV gradebook and JUnit XML; and grades read back from results.json.

Gradebooks for an LMS (Canvas, Moodle) are in torchgrade/outputs/lms.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from torchgrade.engine.config import Assignment
from torchgrade.engine.results import INSTRUCTOR_FOLDER
from torchgrade.engine.scoring import Grade

#: Characters XML 1.0 cannot hold at all, even escaped (student output may contain any of them).
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: A cell starting with one of these is a formula to a spreadsheet (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def load_grade(path: Path) -> Grade:
    """A Grade read back from a results.json this grader wrote (for resumed, merged and re-paged runs):
    from the instructor's copy beside it (DIR/<submission>/instructor/results.json) where there is one."""
    from torchgrade.engine.results import read_grade

    path = Path(path)
    # The student's copy must be there and sound: a missing or damaged one is graded again.
    student = read_grade(json.loads(path.read_text(encoding="utf-8")), path.parent.name)
    full = path.parent / INSTRUCTOR_FOLDER / path.name
    return read_grade(json.loads(full.read_text(encoding="utf-8")), path.parent.name) if full.is_file() else student


def exercise_scores(grade: Grade, assignment: Assignment) -> dict[str, float]:
    """The grade's points per exercise, in assignment order."""
    return {e.name: round(sum(t.score for t in grade.tests if t.exercise == e.name), 4) for e in assignment.exercises}


def _cell(text: str) -> str:
    return "'" + text if text.startswith(_FORMULA_START) else text


def grades_csv(grades: list[Grade], assignment: Assignment) -> str:
    """One row per student, one column per exercise, then the total and the maximum (LMS-importable)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["submission", *(e.name for e in assignment.exercises), "score", "max_score"])
    for g in grades:
        per = exercise_scores(g, assignment)
        writer.writerow([_cell(g.submission), *per.values(), g.score, g.max_score])
    return buffer.getvalue()


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(grades: list[Grade]) -> str:
    """JUnit XML for CI systems: one testsuite per submission, one testcase per check.

    Valid against the Jenkins xUnit plugin's junit-10.xsd (tests/junit-10.xsd): `skipped` only on a
    testsuite, `file` only on a testsuite. Each suite names its student in `name`, `package` and
    `file` (the student's results.json), and each testcase's classname starts with the student's
    name, so that reporters which group by file or by class keep students apart.
    """
    root = ET.Element("testsuites", name="torchgrade")
    totals = dict.fromkeys(("tests", "failures", "errors"), 0)
    seconds = 0.0
    for g in grades:
        counts = {"tests": len(g.tests), "failures": sum(t.status == "failed" for t in g.tests),
                  "errors": sum(t.status == "error" for t in g.tests)}
        for k, v in counts.items():
            totals[k] += v
        seconds += g.execution_time
        suite = ET.SubElement(root, "testsuite", name=_xml_text(g.submission), package=_xml_text(g.submission),
                              file=_xml_text(f"{g.submission}/results.json"), time=f"{g.execution_time:.3f}",
                              skipped=str(sum(t.status == "skipped" for t in g.tests)),
                              **{k: str(v) for k, v in counts.items()})
        props = ET.SubElement(suite, "properties")
        for name, value in (("score", g.score), ("max_score", g.max_score), ("devices", ",".join(g.devices))):
            ET.SubElement(props, "property", name=name, value=_xml_text(str(value)))
        for t in g.tests:
            case = ET.SubElement(suite, "testcase", classname=_xml_text(f"{g.submission}.{t.exercise}.{t.target}"),
                                 name=_xml_text(t.name), time=f"{t.duration:.3f}")
            text = _xml_text(t.output)
            first = text.splitlines()[0] if text else t.status
            if t.status == "failed":
                ET.SubElement(case, "failure", message=first[:500], type="failed").text = text
            elif t.status == "error":
                ET.SubElement(case, "error", message=first[:500], type="error").text = text
            elif t.status == "skipped":
                ET.SubElement(case, "skipped", message=first[:500])
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
