"""A fresh install is the only proof of an install: the package is built, installed non-editable into a new
virtual environment without the test extras, and used as a user would, outside this checkout's Python.

(numpy once hid in the test extra for a whole release: the suite was green while the README's first
command graded the reference 11/100 on a clean machine.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock

from conftest import ROOT

pytestmark = pytest.mark.heavy  # (a minute or more: run first, tests/conftest.py)

GUIDE = ROOT / "docs" / "authoring.md"
_STEP = re.compile(r"<!-- (?P<kind>file|append|run)(?::\s*(?P<arg>[^>]*?))? -->\s*```\w*\n(?P<code>.*?)```", re.DOTALL)


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900, **kwargs)


def _cached(shared: Path, name: str) -> Path:
    """A folder for a build of this checkout's engine as it is now, shared by every xdist worker of a run and
    kept between runs until the engine changes: keyed by this checkout's path and its engine's content (the
    folder above pytest's temporary folders is the same for every checkout on the machine). Older builds of
    this checkout are removed (each holds an environment with torch: a gigabyte)."""
    import hashlib
    import shutil

    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
    content = hashlib.sha256()
    for path in sorted([ROOT / "pyproject.toml", *(ROOT / "torchgrade").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts:
            content.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    where = shared / f"{name}-{checkout}-{content.hexdigest()[:12]}"
    for old in shared.glob(f"{name}-{checkout}-*"):
        if old != where and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return where


@pytest.fixture(scope="session")
def fresh(tmp_path_factory) -> dict:
    """{"wheel": path, "bin": the new environment's bin folder}: built and installed once for all workers."""
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every xdist worker
    with FileLock(str(shared / "fresh-install.lock")):
        where = _cached(shared, "fresh-install")
        done = where / "done.json"
        if not done.is_file():
            where.mkdir(exist_ok=True)
            built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(where / "dist"), str(ROOT)])
            assert built.returncode == 0, built.stderr[-3000:]
            wheel = next((where / "dist").glob("torchgrade-*.whl"))
            venv.create(where / "venv", with_pip=True, clear=True)
            bin_dir = where / "venv" / ("Scripts" if os.name == "nt" else "bin")
            installed = _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-compile", "-c",
                              str(ROOT / "constraints.txt"), str(wheel)])  # no extras: what `pip install torchgrade` gives a user
            assert installed.returncode == 0, installed.stderr[-3000:]
            _compile_what_is_imported(bin_dir / "python")
            done.write_text(json.dumps({"wheel": str(wheel), "bin": str(bin_dir)}))
        return json.loads(done.read_text())


def _compile_what_is_imported(python: Path) -> None:
    """Byte-compile what grading imports (the engine, torch and what a sandbox warms up), by importing it once with
    bytecode written: a third of torch's files, where pip's own compile step (skipped: --no-compile) takes all
    of them (37 CPU-seconds against 11 on the development machine). What nothing imports is never compiled;
    a Python told not to write bytecode (PYTHONDONTWRITEBYTECODE) would otherwise compile these anew each start."""
    code = ("import importlib, torchgrade.cli, torchgrade.engine.grading\n"
            "from torchgrade.sandbox import warmup\n"
            "for name in (*warmup._MODULES, *warmup.LATER):\n    importlib.import_module(name)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    done = _run([str(python), "-c", code], env=env, cwd=python.parent)
    assert done.returncode == 0, done.stderr[-3000:]


def _env(fresh: dict) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TORCHGRADE_LANG")}
    env["PATH"] = fresh["bin"] + os.pathsep + env.get("PATH", "")
    return env


def test_the_wheel_holds_the_engine_and_nothing_of_any_course(fresh):
    with zipfile.ZipFile(fresh["wheel"]) as wheel:
        names = wheel.namelist()
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"torchgrade"}
    assert "torchgrade/checks.ini" in names and "torchgrade/templates/report.html" in names
    assert "torchgrade/sandbox/observer.cpp" in names  # (the compiled observer is built from it where it is used)
    assert not [n for n in names if "hidden" in n or "reference" in n.split("/")[-1] or "/checks/" in n]


def _first_command() -> tuple[str, str, str]:
    """The README's first command block, with the text before it and the paragraph after it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Two commands"):text.index("## For students")]
    before, block, after = re.match(r"(.*?)```bash\n(.*?)```\n(.*)", section, re.DOTALL).groups()
    return before, block, after.strip().split("\n\n")[0]


def test_the_readmes_first_command_says_what_it_needs_first_where_it_runs_what_it_shows_and_how_long():
    before, block, after = _first_command()
    assert "bubblewrap" in before and "root" in before  # the sandbox it needs, before the command
    assert "inside a course folder" in before and "assignment.yaml" in before
    grade = block.strip().splitlines()[-1]
    assert grade.startswith("torchgrade grade reference exercises --out ")
    assert "`reference: 100 / 100`" in after and "`exercises: 0 / 100`" in after
    assert re.search(r"under \w+ minutes", after) and "status 0" in after


def test_the_readmes_first_command_grades_the_reference_full_without_the_test_extras(fresh, tmp_path):
    """The README's `torchgrade grade reference exercises --out reports/demo`, in this course, with the
    installed engine: it prints what the README says it prints."""
    out = tmp_path / "demo"
    env = _env(fresh)
    where = _run(["python", "-c", "import torchgrade; print(torchgrade.__file__)"], cwd=tmp_path, env=env)
    assert not where.stdout.startswith(str(ROOT)), "the fresh environment imports this checkout's engine"
    _, block, after = _first_command()
    command = block.strip().splitlines()[-1].split()
    done = _run([*command[:-1], str(out)], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for shown in re.findall(r"`(\w+: \d+ / \d+)`", after):
        assert shown in done.stdout.splitlines(), (shown, done.stdout[-2000:])
    reference = json.loads((out / "reference" / "results.json").read_text())
    stubs = json.loads((out / "exercises" / "results.json").read_text())
    assert reference["score"] == _max(reference) == 100, [t["output"] for t in reference["tests"] if t["score"] == 0][:5]
    assert stubs["score"] == 0


def _max(results: dict) -> float:
    return results.get("max_score", results.get("extra_data", {}).get("max_score"))


def _follow_the_guide(folder: Path, env: dict[str, str]) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Do what docs/authoring.md says, step by step: write its files, run its commands."""
    course = folder / "mycourse"
    ran = []
    for step in _STEP.finditer(GUIDE.read_text(encoding="utf-8")):
        kind, arg, code = step["kind"], (step["arg"] or "").strip(), step["code"]
        if kind == "file":
            (course / arg).parent.mkdir(parents=True, exist_ok=True)
            (course / arg).write_text(code, encoding="utf-8")
        elif kind == "append":
            with open(course / arg, "a", encoding="utf-8") as f:
                f.write(code)
        else:
            done = _run(["bash", "-e", "-c", code], cwd=folder if arg == "outside" else course, env=env)
            if arg != "may fail":
                assert done.returncode == 0, f"{code}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            ran.append((code, done))
    return ran


def test_a_course_written_from_the_guide_outside_the_repository_grades_as_it_should(fresh, tmp_path):
    """The guide's course, made with the installed engine in a folder of its own: the reference full, the
    stubs zero, and a wrong RMSNorm (a weight that is a plain tensor) losing exactly its own points."""
    env = _env(fresh)
    ran = _follow_the_guide(tmp_path, env)
    course = tmp_path / "mycourse"
    assert any("torchgrade init mycourse" in code for code, _ in ran)
    reference = json.loads((course / "reports/demo/reference/results.json").read_text())
    stubs = json.loads((course / "reports/demo/exercises/results.json").read_text())
    assert reference["score"] == _max(reference) == 8, [t["output"] for t in reference["tests"] if t["score"] == 0]
    assert stubs["score"] == 0
    assert (course / "dist" / "student.zip").is_file()

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "activations.py").write_text((course / "reference" / "activations.py").read_text())
    (wrong / "norms.py").write_text((course / "reference" / "norms.py").read_text().replace(
        "self.weight = nn.Parameter(torch.ones(dim))", "self.weight = torch.ones(dim)"))
    done = _run(["torchgrade", "grade", str(wrong), "--out", str(tmp_path / "out")], cwd=course / "graders", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    graded = json.loads((tmp_path / "out" / "wrong" / "results.json").read_text())
    lost = {}
    for test in graded["tests"]:
        target = test.get("target", test.get("extra_data", {}).get("target"))
        lost[target] = lost.get(target, 0) + test["max_score"] - test["score"]
    assert graded["score"] == 5 and {t: round(p, 6) for t, p in lost.items() if p} == {"RMSNorm": 3}
    state_dict = next(t["output"] for t in graded["tests"] if "converts with to" in t["name"])
    assert "the names in the module's state_dict (its registered parameters and buffers)" in state_dict


# --- the student bundle, built by a wheel install, installed in a student's fresh environment -----------

@pytest.fixture(scope="session")
def student(fresh, tmp_path_factory) -> dict:
    """A bundle of the `init` course built with the wheel's engine, then installed with the one command its README
    gives into a new environment of the student's: built once for all workers.

    The student's environment has its torch already (installed before the course, as students have it): the
    fresh environment's packages, seen through a .pth file, rather than a second install of torch and its
    dependencies (a minute). `pip install .` then installs the bundle's engine into the student's own
    site-packages, in front of the wheel's; that the bundle asks for what the wheel asks for is the test below."""
    shared = tmp_path_factory.getbasetemp().parent
    with FileLock(str(shared / "student-install.lock")):
        where = _cached(shared, "student-install")
        done = where / "done.json"
        if not done.is_file():
            where.mkdir(exist_ok=True)
            env = _env(fresh)
            made = _run(["torchgrade", "init", "course"], cwd=where, env=env)
            assert made.returncode == 0, made.stderr[-3000:]
            built = _run(["torchgrade", "bundle", "--out", str(where / "dist"), "--device", "cpu"], cwd=where / "course",
                         env=env)
            assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
            venv.create(where / "venv", with_pip=True, clear=True)
            bin_dir = where / "venv" / ("Scripts" if os.name == "nt" else "bin")
            python = str(bin_dir / "python")
            constraints = ["-c", str(ROOT / "constraints.txt")]  # the local CPU torch, never a CUDA download
            _share_site_packages(Path(fresh["bin"]).parent, where / "venv")
            torch = _run([python, "-c", "import torch, torchgrade; print(torch.__version__)"])  # the student's torch
            assert torch.returncode == 0, torch.stderr[-3000:]
            bundle = where / "dist" / "student"
            readme = (bundle / "README.md").read_text(encoding="utf-8")
            command = re.search(r"^(pip install \S+)\s+#", readme, re.MULTILINE).group(1).split()
            installed = _run([python, "-m", *command, *constraints], cwd=bundle)
            assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
            done.write_text(json.dumps({"bundle": str(bundle), "bin": str(bin_dir), "command": " ".join(command),
                                        "installed": installed.stdout}))
        return json.loads(done.read_text())


def _site_packages(environment: Path) -> Path:
    return next(environment.glob("lib/python3*/site-packages"), environment / "Lib" / "site-packages")


def _share_site_packages(source: Path, environment: Path) -> None:
    """Let `environment` import what `source` has installed (after its own packages)."""
    (_site_packages(environment) / "student-torch.pth").write_text(str(_site_packages(source)) + "\n")


def test_the_bundle_asks_for_what_the_wheel_asks_for(fresh, student):
    """The bundle's pyproject.toml lists the wheel's own requirements (the student's environment above shares
    the wheel's packages, so a requirement the bundle lacked would not show there)."""
    with zipfile.ZipFile(fresh["wheel"]) as wheel:
        metadata = next(wheel.read(n).decode() for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    wheel_requires = sorted(line.split(":", 1)[1].strip() for line in metadata.splitlines()
                            if line.startswith("Requires-Dist:") and "extra ==" not in line)
    installed = _run([str(Path(student["bin"]) / "python"), "-c", "import importlib.metadata as m, json; "
                      "print(json.dumps(m.requires('torchgrade')))"], cwd=Path(student["bin"]))
    bundle_requires = sorted(json.loads(installed.stdout))  # (the bundle's engine: the student's site-packages)
    assert bundle_requires == wheel_requires and wheel_requires, (bundle_requires, wheel_requires)


def test_a_bundle_built_from_a_wheel_install_installs_with_its_readmes_one_command(student):
    assert student["command"] == "pip install ."
    assert "Successfully installed" in student["installed"] and "torch-" not in student["installed"].split(
        "Successfully installed")[-1], student["installed"]  # the student's torch is kept
    where = _run([str(Path(student["bin"]) / "python"), "-c", "import torchgrade; print(torchgrade.__file__)"],
                 cwd=Path(student["bin"]))
    assert "site-packages" in where.stdout and not where.stdout.startswith((str(ROOT), student["bundle"])), where


def test_the_installed_bundle_checks_the_stub_and_its_rerun_lines_work(student, tmp_path):
    """`torchgrade check` from the bundle's own install: the stub at zero, exit 1; a `rerun:` line it prints
    runs that one check; the README promises no Chinese docstrings for a course that does not ask for them."""
    import shutil

    bundle = tmp_path / "student"
    shutil.copytree(student["bundle"], bundle)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TORCHGRADE_LANG")}
    env["PATH"] = student["bin"] + os.pathsep + env.get("PATH", "")
    checked = _run(["torchgrade", "check", "--device", "cpu", "--report", str(tmp_path / "r")], cwd=bundle, env=env)
    assert checked.returncode == 1, checked.stdout[-3000:] + checked.stderr[-3000:]
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["score"] == 0 and _max(results) == 3
    assert "relu is not implemented yet" in checked.stdout
    (bundle / "exercises" / "activations.py").write_text("def relu(x):\n    return x.abs()\n")  # a wrong answer
    wrong = _run(["torchgrade", "check", "--device", "cpu", "--report", str(tmp_path / "w")], cwd=bundle, env=env)
    rerun = re.search(r"rerun: (torchgrade check \S+ --device cpu)", wrong.stdout)
    assert wrong.returncode == 1 and rerun, wrong.stdout[-3000:] + wrong.stderr[-3000:]
    again = _run(["bash", "-c", rerun.group(1) + f" --report {tmp_path / 'again'}"], cwd=bundle, env=env)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    one = json.loads((tmp_path / "again" / "results.json").read_text())
    assert len(one["tests"]) == 1, one["tests"]
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert "in English and in Chinese" not in readme and "中英文" not in readme
