"""`torchgrade gradescope`: an autograder.zip that Gradescope runs, tried in a simulated /autograder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from torchgrade.cli import main
from torchgrade.gradescope import find_submission

ROOT = Path(__file__).resolve().parent.parent
GRADESCOPE = json.loads((Path(__file__).with_name("gradescope_results.schema.json")).read_text())


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    result = CliRunner().invoke(main, ["gradescope", "--out", str(out), "--assignment", str(ROOT / "assignment.yaml")])
    assert result.exit_code == 0, result.output
    return out / "autograder.zip"


def test_the_zip_has_gradescopes_two_scripts_at_its_root_and_the_course_beside_them(autograder):
    with zipfile.ZipFile(autograder) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "engine/pyproject.toml", "engine/torchgrade/cli.py",
            "course/assignment.yaml"} <= names
    assert all(modes[s] & stat.S_IXUSR for s in ("setup.sh", "run_autograder"))
    assert any(n.startswith("course/reference/") for n in names)
    assert any(n.startswith("course/graders/checks/hidden/") for n in names)
    import torch

    # setup.sh installs torch's CPU build (pinned to this one) and the engine; run_autograder downloads nothing.
    assert f'"torch=={torch.__version__.split("+")[0]}"' in setup and "download.pytorch.org/whl/cpu" in setup
    assert '"$SOURCE/engine"' in setup
    assert "pip install" not in run and "${AUTOGRADER_ROOT:-/autograder}" in run
    assert '"$ROOT/results/results.json"' in run and '"$ROOT/submission"' in run
    for script in (setup, run):
        assert script.startswith("#!/usr/bin/env bash\n")
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)  # parses


def test_the_autograder_grades_the_reference_to_full_marks_in_a_simulated_autograder(autograder, tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(autograder) as z:
        z.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    # Gradescope's submission folder: the reference, wrapped in a folder as a student's zip would be, and
    # trying to read the reference and a hidden check of the autograder while it is imported.
    submission = root / "submission" / "my-work"
    submission.mkdir(parents=True)
    for path in (ROOT / "reference").glob("*.py"):
        (submission / path.name).write_text(path.read_text())
    secrets = [root / "source" / "course" / "reference" / "tensors.py",
               next((root / "source" / "course" / "graders" / "checks" / "hidden").glob("test_*.py"))]
    (submission / "tensors.py").write_text((ROOT / "reference" / "tensors.py").read_text() + f"""

for _path in {[str(p) for p in secrets]!r}:
    try:
        open(_path).read()
        print("leaked", _path)
    except OSError as e:
        print("kept out:", type(e).__name__)
""")
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, cwd=root, capture_output=True,
                          text=True, timeout=550)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(document, GRADESCOPE)
    assert document["score"] == document["extra_data"]["max_score"] == 100, \
        [(t["name"], t["output"][:200]) for t in document["tests"] if t["status"] != "passed"][:3]
    assert {t["visibility"] for t in document["tests"]} >= {"visible", "hidden"}
    if document["extra_data"]["isolation"] == "process":
        pytest.skip("graded without a sandbox user (not root, no bubblewrap): file permissions cannot keep the "
                    "student's code out here")
    assert "leaked" not in document["output"] and document["output"].count("kept out:") == 2
    for secret in (root / "source" / "course" / "reference", root / "source" / "course" / "graders" / "checks"):
        assert secret.stat().st_mode & 0o077 == 0  # the owner's (root's) only


def test_the_submission_is_found_inside_gradescopes_folder(tmp_path):
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "a" / "deep" / "tensors.py").write_text("")
    assert find_submission(tmp_path, ("tensors",)) == tmp_path / "a" / "deep"
    (tmp_path / "tensors.py").write_text("")
    assert find_submission(tmp_path, ("tensors",)) == tmp_path
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "work.zip").write_bytes(b"PK")
    assert find_submission(tmp_path / "z", ("tensors",)) == tmp_path / "z" / "work.zip"
