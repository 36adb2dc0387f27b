"""One score on every path (design.md, "Devices"): `check`, `grade`, the student bundle and the Gradescope
autograder grade the same submission to the same score, CUDA checks included, on a machine without CUDA
as on one with it.

The submission holds every CUDA-only mistake of the fairness corpus (tests/fairness/*/...on_the_cpu.py:
right on the CPU, wrong on CUDA). The course is the bundled one cut to the targets of those mistakes and
to their visible checks (so that all four paths grade the same checks: `check` and the bundle grade visible
checks only; autograd's too, which functions' checks import), with the bundled course's `cuda_standin: score`. Each path runs as its user runs it: the CLI
for `check` and `grade`, `torchgrade check` inside the built bundle, and the autograder's run_autograder
from the zip `torchgrade gradescope` builds with its defaults (the path that graded `--device cpu`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import checks_of, make_submission
from test_gradescope import run_autograder, unpacked  # noqa: F401  (a fixture)

from torchgrade.sandbox import isolation
from torchgrade.sandbox.host import isolation_level

pytestmark = pytest.mark.heavy  # (a minute or more: run first, tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fairness"
MISTAKES = sorted(p for p in CORPUS.glob("*/*.py") if "# on cuda: loses" in p.read_text().split("\n", 2)[1])


#: The targets of the CUDA-only mistakes, by module; and one of autograd's (functions' checks import autograd's).
TARGETS = {module: {target for p in MISTAKES if p.parent.name == module
                    for target in json.loads(p.read_text().split("\n", 2)[1].split("# on cuda: loses", 1)[1])}
           for module in {p.parent.name for p in MISTAKES}} | {"autograd": {"accumulated_grad"}}


def _course(folder: Path) -> Path:
    """The bundled course, cut to the targets of the CUDA-only mistakes and their visible checks."""
    modules = sorted(TARGETS)
    data = yaml.safe_load((ROOT / "assignment.yaml").read_text())
    data["exercises"] = {name: dict(data["exercises"][name], targets={
        target: entry for target, entry in data["exercises"][name]["targets"].items() if target in TARGETS[name]})
        for name in modules}
    checks = folder / "graders" / "checks"
    (checks / "visible").mkdir(parents=True)
    (checks / "hidden").mkdir()
    for name in modules:
        (checks / "visible" / f"test_{name}.py").write_text(
            checks_of((ROOT / "graders" / "checks" / "visible" / f"test_{name}.py").read_text(), TARGETS[name]))
    shutil.copytree(ROOT / "graders" / "probes", folder / "graders" / "probes")
    for part in ("reference", "exercises"):
        (folder / part).mkdir()
        for name in modules:
            shutil.copy(ROOT / part / f"{name}.py", folder / part)
    data.update(reference="reference", stubs="exercises", checks="graders/checks", probes="graders/probes")
    data.pop("hints", None)  # the course's hints name targets of the modules left out
    data["chinese_summaries"] = False
    assert data["cuda_standin"] == "score"  # the bundled course's policy, which every path must follow
    (folder / "assignment.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / "assignment.yaml"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHGRADE_LANG", "TORCHGRADE_CUDA_STANDIN")}
    return env


def _torchgrade(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchgrade.cli", *args], cwd=cwd, env=env or _env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=550)


def _scores(document: dict) -> tuple[float, float, dict[str, float]]:
    """(score, max_score, points per CUDA check lost): what must agree between paths."""
    lost = {t["name"]: t["max_score"] - t["score"] for t in document["tests"] if t["score"] < t["max_score"]}
    return document["score"], document["extra_data"]["max_score"], lost


def test_the_cuda_only_mistakes_get_one_score_from_check_grade_the_bundle_and_the_autograder(tmp_path, unpacked):
    assert {p.parent.name for p in MISTAKES} >= {"tensors", "conv", "functions"}
    assignment = _course(tmp_path / "course")
    course = assignment.parent
    submission = make_submission(tmp_path / "student", append={p.parent.name: p.read_text() for p in MISTAKES})
    for path in submission.glob("*.py"):  # only the course's modules
        if not (course / "reference" / path.name).exists():
            path.unlink()

    documents = {}
    done = _torchgrade("check", "--path", str(submission), "--report", str(tmp_path / "check"), cwd=course)
    assert done.returncode == 1, done.stdout + done.stderr  # the CUDA checks failed
    documents["check"] = json.loads((tmp_path / "check" / "results.json").read_text())

    # (at the best level here: `grade` refuses `process` unless asked, and a zygote grades it faster)
    level = isolation_level(isolation.requested_level())
    done = _torchgrade("grade", str(submission), "--out", str(tmp_path / "graded"), "--isolation", level, cwd=course)
    assert done.returncode == 0, done.stdout + done.stderr
    documents["grade"] = json.loads((tmp_path / "graded" / "student" / "results.json").read_text())

    done = _torchgrade("bundle", "--out", str(tmp_path / "dist"), cwd=course)
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = tmp_path / "dist" / "student"
    for path in submission.glob("*.py"):
        shutil.copy(path, bundle / "exercises" / path.name)
    done = _torchgrade("check", "--report", str(tmp_path / "bundled"), cwd=bundle, env=dict(_env(), PYTHONPATH=str(bundle)))
    assert done.returncode == 1, done.stdout + done.stderr
    documents["bundle"] = json.loads((tmp_path / "bundled" / "results.json").read_text())

    done = _torchgrade("gradescope", "--out", str(tmp_path / "gradescope"), cwd=course)  # its defaults
    assert done.returncode == 0, done.stdout + done.stderr
    root = unpacked(tmp_path / "gradescope" / "autograder.zip")
    for path in submission.glob("*.py"):
        shutil.copy(path, root / "submission" / path.name)
    ran = run_autograder(root, "host")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    documents["autograder"] = json.loads((root / "results" / "results.json").read_text())
    assert "not graded on cuda" not in documents["autograder"]["output"], documents["autograder"]["output"]

    scores = {path: _scores(d) for path, d in documents.items()}
    score, top, lost = scores["check"]
    assert 0 < score < top and lost, scores  # the mistakes cost points, and only some
    assert all(re.search(r"\[cuda\]$", name) for name in lost), lost  # CUDA checks only: the CPU is right
    assert scores == {path: (score, top, lost) for path in documents}, scores


def test_grading_cpu_only_does_not_say_the_cuda_checks_were_graded_on_the_stand_in(tmp_path):
    """`--device cpu` sets every CUDA check aside: the grade must not also claim the stand-in graded them (the
    autograder's old output said both)."""
    import torch

    from tiny_course import make_course, student

    from torchgrade.engine.config import load_assignment
    from torchgrade.engine.grading import grade_submission

    if torch.cuda.is_available():
        pytest.skip("with CUDA there is no stand-in")
    path = make_course(tmp_path)
    path.write_text(path.read_text() + "cuda_standin: score\n")
    grade = grade_submission(student(tmp_path / "s"), load_assignment(path), device="cpu")
    assert grade.standin == "" and "stand-in" not in grade.output
    assert grade.score == grade.max_score and any(t.status == "skipped" and t.device == "cuda" for t in grade.tests)
