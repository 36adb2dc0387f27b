"""The student bundle: everything `torchgrade check` needs, provably nothing else, and it grades right."""

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torchgrade.authoring.bundle import build_bundle
from torchgrade.engine.config import load_assignment
from torchgrade.authoring.notebooks import generate_notebooks
from conftest import ROOT

SECRET_FOLDERS = (ROOT / "reference", ROOT / "graders" / "checks" / "hidden")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The bundle of this course, built once (it runs the visible checks on the reference to record them)."""
    out = tmp_path_factory.mktemp("dist")
    return build_bundle(load_assignment(ROOT / "assignment.yaml"), out, device="cpu", notebooks=True)


@pytest.fixture(scope="module")
def unpacked(built, tmp_path_factory):
    """The zip, unpacked where a student would: the folder the tests look into and run from."""
    where = tmp_path_factory.mktemp("student")
    with zipfile.ZipFile(built.zip) as archive:
        archive.extractall(where)
    return where / built.folder.name


def _lines(path: Path) -> set[str]:
    return {line.strip() for line in path.read_text(encoding="utf-8").splitlines() if len(line.strip()) >= 20}


def secret_lines() -> set[str]:
    """Lines found only in the reference solutions and the hidden checks, nowhere else in the project
    (a line that also occurs in a stub's docstring or in the engine tells nothing)."""
    secret = set().union(*(_lines(p) for folder in SECRET_FOLDERS for p in folder.rglob("*.py")))
    public = [p for folder in ("graders", "torchgrade") for p in (ROOT / folder).rglob("*.py")
              if not p.is_relative_to(SECRET_FOLDERS[1])]
    public_text = "\n".join(p.read_text(encoding="utf-8") for p in [*public, *(ROOT / "exercises").glob("*.py")])
    return {line for line in secret if line not in public_text}


def _contents(path: Path) -> bytes:
    """A file's bytes, and for an archive (a .pt recording is a zip) the bytes of every member."""
    data = path.read_bytes()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            data += b"".join(archive.read(name) for name in archive.namelist())
    return data


def test_the_zip_and_the_folder_hold_the_same_listed_files(built, unpacked):
    files = sorted(str(p.relative_to(unpacked)) for p in unpacked.rglob("*") if p.is_file())
    assert files == sorted(built.files)
    assert json.loads((unpacked / "bundle.json").read_text())["files"] == list(built.files)
    top = {f.split("/")[0] for f in files}
    assert top == {"README.md", "assignment.yaml", "pyproject.toml", "bundle.json", "exercises", "expected", "graders",
                   "torchgrade", "notebooks"}
    assert sorted(f for f in files if f.startswith("notebooks/")) == \
        sorted(f"notebooks/{p.stem}.ipynb" for p in (ROOT / "exercises").glob("*.py"))
    assert {f for f in files if f.startswith("graders/") and not f.startswith("graders/checks/visible/")} == \
        {"graders/checks/README.md", "graders/hints.yaml",
         *(f"graders/probes/{p.name}" for p in (ROOT / "graders" / "probes").glob("*.py"))}


def test_no_reference_and_no_hidden_check_inside(unpacked):
    paths = [p.relative_to(unpacked) for p in unpacked.rglob("*")]
    assert not [p for p in paths if {"reference", "hidden"} & set(p.parts)]
    assert not [p for p in paths if "hidden" in p.name or "reference" in p.stem.lower()]
    secrets = secret_lines()
    assert len(secrets) > 100  # the solutions' bodies and the hidden checks' code
    for path in unpacked.rglob("*"):
        if path.is_file():
            data = _contents(path)
            leaked = [line for line in secrets if line.encode() in data]
            assert not leaked, f"{path.relative_to(unpacked)} holds reference or hidden-check lines: {leaked[:3]}"


def test_the_stubs_are_freshly_generated_and_the_assignment_points_at_the_recordings(unpacked):
    for stub in (ROOT / "exercises").glob("*.py"):
        assert (unpacked / "exercises" / stub.name).read_text() == stub.read_text()
    bundled = load_assignment(unpacked / "assignment.yaml")
    assert bundled.reference_dir == unpacked / "expected"
    assert bundled.checks_dir == unpacked / "graders" / "checks"
    assert [e.name for e in bundled.exercises] == [e.name for e in load_assignment(ROOT / "assignment.yaml").exercises]
    visible = sorted(p.stem.removeprefix("test_") for p in (ROOT / "graders/checks/visible").glob("test_*.py"))
    assert sorted(p.stem for p in (unpacked / "expected").glob("*.pt")) == visible
    readme = (unpacked / "README.md").read_text()
    assert "torchgrade check" in readme and "中文说明" in readme
    # this course asks for Chinese docstring summaries (chinese_summaries: true), and has hidden checks
    assert "in English and in Chinese" in readme and "用中英文说明" in readme and "hidden checks" in readme
    # built with notebooks: both languages say how to work in them, and the torch pyproject.toml allows
    english, chinese = readme.split("## 中文说明")
    assert '"torch>=2.7"' in (unpacked / "pyproject.toml").read_text()
    for text, torch_range in ((english, "(torch 2.7 or newer)"), (chinese, "（torch 2.7 或更新版本）")):
        assert "notebooks/" in text and "--path notebooks" in text and "%torchgrade check" in text and torch_range in text


def _check(bundle: Path, report: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TORCHGRADE_LANG"}
    env["PYTHONPATH"] = str(bundle)  # the bundle's own torchgrade/, not this checkout's
    return subprocess.Popen([sys.executable, "-m", "torchgrade.cli", "check", "--device", "cpu", "--report", str(report),
                             *args],
                            cwd=bundle, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_in_the_bundle_the_stubs_score_zero_and_the_reference_scores_full_marks(built, unpacked, tmp_path):
    solved = tmp_path / "solved"
    subprocess.run(["cp", "-r", str(unpacked), str(solved)], check=True)
    for solution in (ROOT / "reference").glob("*.py"):  # a student who solved everything
        (solved / "exercises" / solution.name).write_bytes(solution.read_bytes())
    # a student who works in the bundle's notebooks, untouched and solved (the reference as notebooks)
    generate_notebooks(load_assignment(ROOT / "assignment.yaml"), solved / "notebooks", from_reference=True)
    runs = {"stubs": _check(unpacked, tmp_path / "stubs"), "solved": _check(solved, tmp_path / "solved-report"),
            "stub notebooks": _check(unpacked, tmp_path / "stub-notebooks", "--path", "notebooks"),
            "solved notebooks": _check(solved, tmp_path / "solved-notebooks", "--path", "notebooks")}
    outputs = {name: run.communicate(timeout=550)[0] for name, run in runs.items()}
    notebooks = {name: json.loads((tmp_path / name.replace(" ", "-") / "results.json").read_text())
                 for name in ("stub notebooks", "solved notebooks")}
    assert runs["stub notebooks"].returncode == 1 and notebooks["stub notebooks"]["score"] == 0, outputs["stub notebooks"]
    assert runs["solved notebooks"].returncode == 0, outputs["solved notebooks"]
    assert notebooks["solved notebooks"]["score"] == notebooks["solved notebooks"]["extra_data"]["max_score"] > 0
    assert not list((unpacked / "notebooks").glob("*.py"))  # graded from a copy: the student's folder is as it was
    assert runs["stubs"].returncode == 1, outputs["stubs"]  # checks failed: a CI-friendly status
    assert runs["solved"].returncode == 0, outputs["solved"]
    stubs = json.loads((tmp_path / "stubs" / "results.json").read_text())
    full = json.loads((tmp_path / "solved-report" / "results.json").read_text())
    visible_points = sum(e.points for e in load_assignment(ROOT / "assignment.yaml").exercises if e.name in built.recorded)
    assert stubs["extra_data"]["max_score"] == full["extra_data"]["max_score"] == pytest.approx(visible_points)
    assert stubs["score"] == 0, outputs["stubs"]
    assert full["score"] == full["extra_data"]["max_score"], outputs["solved"]
    assert {t["visibility"] for t in full["tests"]} == {"visible"}
    assert "is not implemented yet" in outputs["stubs"]


def test_the_bundle_imports_its_own_engine(unpacked):
    env = dict(os.environ, PYTHONPATH=str(unpacked))
    where = subprocess.run([sys.executable, "-c", "import torchgrade; print(torchgrade.__file__)"], cwd=unpacked, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where) == unpacked / "torchgrade" / "__init__.py"


def test_installing_the_bundle_keeps_the_torch_already_installed(unpacked):
    """`pip install .` in the bundle needs nothing it has to download where torch (and the rest) is installed:
    pip, told to use no index at all, still finds every requirement satisfied, and installs only torchgrade."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation",
                           "--report", "-", "--quiet", str(unpacked)],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    installing = [item["metadata"]["name"] for item in json.loads(done.stdout)["install"]]
    assert installing == ["torchgrade"], installing
    readme = (unpacked / "README.md").read_text()
    assert "--extra-index-url" in readme and "/whl/cpu" in readme  # how to get the CPU build where there is none
