"""`torchgrade gradescope`: an autograder.zip that Gradescope runs, tried in a simulated /autograder."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from torchgrade.cli import main
from torchgrade.classroom.autograder import find_submission
ROOT = Path(__file__).resolve().parent.parent
GRADESCOPE = json.loads((Path(__file__).with_name("gradescope_results.schema.json")).read_text())
FORGE = Path(__file__).with_name("hostile") / "gradescope_forge.py"


# --- a simulated Gradescope container ---------------------------------------------------------------
# Gradescope runs run_autograder as root in a Docker container with Docker's default capabilities
# (no CAP_SYS_ADMIN: bubblewrap cannot make namespaces), so the level there is `unprivileged-user`;
# with user-namespace remapping (or rootless Docker) the container's user namespace maps only uids
# 0-65535, so the sandbox user (0x70000000 + pid) cannot be switched to either. Both are made here with
# `unshare` (a mount namespace, and for the remapped one a user namespace mapping uid 0 alone) and
# `capsh --drop=cap_sys_admin`. Inside, a Python installation under a folder only root may enter (a
# pyenv in /root) is made reachable as a system Python is on Gradescope's images.

def _unreachable_ancestor() -> tuple[Path, Path] | None:
    """(folder others cannot enter, its child on the way to the Python installation), if there is one."""
    prefix = Path(os.path.realpath(sys.base_prefix))
    for child in [*reversed(prefix.parents[:-1]), prefix][1:]:
        if not child.parent.stat().st_mode & stat.S_IXOTH:
            return child.parent, child
    return None


def _containers() -> bool:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("capsh")):
        return False
    try:
        return subprocess.run(["unshare", "-U", "-r", "-m", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


CONTAINERS = _containers()
#: Inside the new mount namespace: make the Python reachable, drop CAP_SYS_ADMIN, run the script ($1).
_INSIDE = """set -e
if [ -n "$HIDDEN" ]; then
  hold="$(mktemp -d)"; mount --bind "$CHILD" "$hold"; mount -t tmpfs -o mode=0711 tmpfs "$HIDDEN"
  mkdir -p "$CHILD"; mount --bind "$hold" "$CHILD"
fi
exec capsh --drop=cap_sys_admin -- "$1"
"""


def run_autograder(root: Path, container: str, script: str = "run_autograder") -> subprocess.CompletedProcess:
    """Run root's run_autograder (or another script of source/) as Gradescope would: `container` is "host"
    (this machine as it is), "docker" (Docker's default capabilities) or "remapped" (and a user namespace
    mapping uid 0 only)."""
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("TORCHGRADE_ISOLATION", None)  # run_autograder decides, as on Gradescope
    script = str(root / "source" / script)
    if container == "host":
        command = ["bash", script]
    else:
        if not CONTAINERS:
            pytest.skip("a simulated container needs root, unshare and capsh")
        hidden = _unreachable_ancestor()
        env.update(HIDDEN=str(hidden[0]) if hidden else "", CHILD=str(hidden[1]) if hidden else "")
        command = ["unshare", *(["-U", "-r"] if container == "remapped" else []), "-m", "--propagation", "private",
                   "bash", "-c", _INSIDE, "container", script]
    return subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=550)


@pytest.fixture
def unpacked():
    """Unpack an autograder.zip into a fresh simulated /autograder (in /tmp, entered by anyone as
    /autograder is: a folder the sandbox user cannot even enter would prove nothing)."""
    roots = []

    def unpack(zip_path: Path) -> Path:
        root = Path(tempfile.mkdtemp(prefix="gradescope-", dir="/tmp"))
        roots.append(root)
        root.chmod(0o755)
        (root / "source").mkdir()
        with zipfile.ZipFile(zip_path) as z:
            z.extractall(root / "source")
        for script in ("setup.sh", "run_autograder"):
            (root / "source" / script).chmod(0o755)
        (root / "submission").mkdir()
        # an earlier result, with a hidden test's name and output: Gradescope puts it there, world-readable
        (root / "submission_metadata.json").write_text(json.dumps(
            {"previous_submissions": [{"results": {"tests": [{"name": "SECRET-HIDDEN-NAME", "output": "x"}]}}]}))
        (root / "submission_metadata.json").chmod(0o644)
        return root

    yield unpack
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def tiny_autograder(tmp_path_factory) -> Path:
    """The zip of a course of three checks of `tensors` (tests/tiny_course.py): seconds, not minutes, to grade."""
    from tiny_course import make_course

    course = make_course(tmp_path_factory.mktemp("tiny"))
    out = tmp_path_factory.mktemp("tinydist")
    result = CliRunner().invoke(main, ["gradescope", "--out", str(out), "--assignment", str(course)])
    assert result.exit_code == 0, result.output
    return out / "autograder.zip"


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
    assert {"setup.sh", "run_autograder", "engine/pyproject.toml", "engine/torchgrade/cli/__init__.py",
            "course/assignment.yaml"} <= names
    assert all(modes[s] & stat.S_IXUSR for s in ("setup.sh", "run_autograder"))
    with zipfile.ZipFile(autograder) as z:
        lock = z.read("engine/requirements.lock").decode()
    assert any(n.startswith("course/reference/") for n in names)
    assert any(n.startswith("course/graders/checks/hidden/") for n in names)
    import torch

    # setup.sh installs torch's CPU build (pinned to this one) and the engine; run_autograder downloads nothing.
    assert f'"torch=={torch.__version__.split("+")[0]}"' in setup and "download.pytorch.org/whl/cpu" in setup
    assert '"$SOURCE/engine"' in setup
    assert "pip install" not in run and "${AUTOGRADER_ROOT:-/autograder}" in run
    # the same image every time: apt's lists first, every package at the version tested here, and a build
    # that fails unless the reference scores full marks in it
    assert setup.index("apt-get update") < setup.index("apt-get install")
    assert '-c "$SOURCE/engine/requirements.lock"' in setup
    assert "--smoke" in setup and '"$SOURCE/course/reference"' in setup
    import importlib.metadata

    pins = dict(line.split("==") for line in lock.splitlines() if not line.startswith("#"))
    assert pins["torch"] == torch.__version__.split("+")[0]
    for name in ("numpy", "pytest", "pyyaml", "jinja2", "msgpack", "psutil", "markupsafe", "pluggy"):
        assert pins[name] == importlib.metadata.version(name), name  # dependencies of dependencies too
    # the submission's metadata (earlier results) and the course are root's before each submission
    assert 'chmod go-rwx "$ROOT/submission_metadata.json"' in run and 'chmod -R go-rwx "$SOURCE/course"' in run
    assert '"$ROOT/results/results.json"' in run and '"$ROOT/submission"' in run
    for script in (setup, run):
        assert script.startswith("#!/usr/bin/env bash\n")
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)  # parses


@pytest.mark.heavy
def test_the_autograder_grades_the_reference_to_full_marks_in_a_simulated_autograder(autograder, unpacked):
    root = unpacked(autograder)
    # Gradescope's submission folder: the reference, wrapped in a folder as a student's zip would be, and
    # trying to read the reference and a hidden check of the autograder while it is imported.
    submission = root / "submission" / "my-work"
    submission.mkdir()
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
    done = run_autograder(root, "docker" if CONTAINERS else "host")
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(document, GRADESCOPE)
    assert document["score"] == document["extra_data"]["max_score"] == 100, \
        [(t["name"], t["output"][:200]) for t in document["tests"] if t["status"] != "passed"][:3]
    # hidden checks carry points: Gradescope's "hidden" would still count them in the total the student sees
    assert {t["visibility"] for t in document["tests"]} == {"visible", "after_due_date"}
    assert any(t["max_score"] > 0 for t in document["tests"] if t["visibility"] == "after_due_date")
    assert document["output"].startswith("Graded by torchgrade") and \
        f"isolation level '{document['extra_data']['isolation']}'" in document["output"].splitlines()[0]
    if document["extra_data"]["isolation"] == "process":
        pytest.skip("graded without a sandbox user (not root, no bubblewrap): file permissions cannot keep the "
                    "student's code out here")
    assert "leaked" not in document["output"] and document["output"].count("kept out:") == 2, document["output"]
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


def _forging_submission(root: Path) -> None:
    """The stubs (worth 0), with every known Gradescope attack run when tensors.py is imported (tests/hostile)."""
    for path in (ROOT / "exercises").glob("*.py"):
        shutil.copy(path, root / "submission" / path.name)
    attack = FORGE.read_text().replace('ROOT = "/autograder"', f"ROOT = {str(root)!r}")
    (root / "submission" / "tensors.py").write_text((ROOT / "exercises" / "tensors.py").read_text() + "\n\n" + attack)
    (root / "linger").mkdir()
    (root / "linger").chmod(0o1777)  # where the daemon it leaves says who it is


def _results(root: Path) -> dict:
    document = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(document, GRADESCOPE)
    return document


@pytest.mark.parametrize("container", ["host", "docker"])
def test_a_forging_stub_gets_zero_at_each_level_gradescope_gives(tiny_autograder, unpacked,
                                                                                       container):
    import psutil

    from torchgrade.sandbox.host import isolation_level

    if container == "host" and isolation_level() == "process":
        pytest.skip("this machine has neither bubblewrap nor root: the attacks would succeed (see SECURITY.md)")
    root = unpacked(tiny_autograder)
    _forging_submission(root)
    done = run_autograder(root, container)
    assert done.returncode == 0, done.stderr[-3000:]
    document = _results(root)
    level = document["extra_data"]["isolation"]
    if container == "docker":
        assert level == "unprivileged-user"  # what Gradescope gives: no namespaces, root to switch users
    assert level != "process"  # the autograder refuses it unless the course opts in
    # torchgrade's own results.json, written after the attacks: the real grade of the stubs' code, 0
    assert document["score"] == 0 and document["extra_data"]["max_score"] == 5
    assert document["tests"] and all(t["status"] == "failed" and t["score"] == 0 for t in document["tests"])
    assert "version" in document["extra_data"] and "FORGED" not in json.dumps(document)
    student_sees = document["output"] + "".join(t["output"] for t in document["tests"])
    for sign in ("LEAKED", "WRITABLE", "KILLED", "SECRET-HIDDEN-NAME"):
        assert sign not in student_sees, student_sees
    assert done.stdout.startswith(f"Graded by torchgrade") and f"isolation level '{level}'" in done.stdout.splitlines()[0]
    assert document["output"].splitlines()[0] == done.stdout.splitlines()[0]  # the student sees the level too
    # the daemon it left ran (it wrote its pid), and is gone: nothing rewrites results.json any more
    pid_file = root / "linger" / "pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    else:
        assert level == "bwrap"  # the sandbox's own file system: it wrote its pid where the test cannot see it
    assert _results(root) == document
    for secret in (root / "submission_metadata.json", root / "source" / "course" / "reference"):
        assert secret.stat().st_mode & 0o077 == 0


def test_in_a_uid_remapped_container_the_autograder_refuses_in_seconds_and_says_so(tiny_autograder, unpacked):
    root = unpacked(tiny_autograder)
    _forging_submission(root)
    done = run_autograder(root, "remapped")
    assert done.returncode == 0, done.stderr[-3000:]
    document = _results(root)
    # no student code ran: the attack's daemon never wrote its pid; every target says why, at score 0
    assert not (root / "linger" / "pid").exists()
    assert document["score"] == 0 and document["tests"] and all(t["score"] == 0 for t in document["tests"])
    assert done.stdout.startswith("The autograder is misconfigured: no sandbox at isolation level 'unprivileged-user'")
    assert all(t["output"].startswith("The autograder is misconfigured") for t in document["tests"])
    assert "gradescope_isolation: process" in done.stdout


def test_a_course_that_opts_into_process_is_graded_there_and_says_so(tiny_autograder, unpacked):
    root = unpacked(tiny_autograder)
    course = root / "source" / "course" / "assignment.yaml"
    course.write_text(course.read_text() + "gradescope_isolation: process\n")
    for path in (ROOT / "reference").glob("*.py"):
        shutil.copy(path, root / "submission" / path.name)
    done = run_autograder(root, "remapped")
    assert done.returncode == 0, done.stderr[-3000:]
    document = _results(root)
    assert document["score"] == 5 and document["extra_data"]["isolation"] == "process"
    assert "isolation level 'process'" in document["output"].splitlines()[0]
    assert "without a sandbox user" in document["output"].splitlines()[0]


def test_what_stays_when_grading_is_stopped_is_a_score_of_zero_that_says_so(tmp_path, monkeypatch):
    from tiny_course import make_course

    from torchgrade.classroom import autograder as gradescope
    from torchgrade.engine.config import load_assignment

    assignment = load_assignment(make_course(tmp_path))
    results = tmp_path / "results" / "results.json"
    (tmp_path / "submission").mkdir()
    monkeypatch.setattr(gradescope, "prove_level", lambda *args: "bwrap")

    def stopped(*args, **kwargs):  # what a timeout's SIGTERM or an OOM kill does to the grader
        assert json.loads(results.read_text())["score"] == 0  # already there before any student code
        raise KeyboardInterrupt

    monkeypatch.setattr("torchgrade.classroom.batch.grade_one", stopped)
    with pytest.raises(KeyboardInterrupt):
        gradescope.autograde(tmp_path / "submission", results, "cpu", assignment, [], [])
    document = json.loads(results.read_text())
    jsonschema.validate(document, GRADESCOPE)
    assert document["score"] == 0 and document["tests"]
    assert all(t["output"] == gradescope.UNFINISHED for t in document["tests"])


_PROOF_TEST = """
import os, sys
from pathlib import Path
from torchgrade.classroom.autograder import prove_confined
folder = Path(sys.argv[1])
secret, kept = folder / "metadata.json", folder / "results"
user = (0x70000000 + os.getpid(), 0x70000000 + os.getpid())
assert prove_confined(user, [secret], [kept]) == [f"read {secret}", f"write {kept}"]
secret.chmod(0o600)
kept.chmod(0o755)
assert prove_confined(user, [secret], [kept]) == []
print("proven")
"""


def test_the_proof_finds_what_the_sandbox_user_could_read_or_write(unpacked, tiny_autograder):
    root = unpacked(tiny_autograder)  # a folder anyone may enter, and a container where the sandbox user runs Python
    (root / "metadata.json").write_text("{}")
    (root / "metadata.json").chmod(0o644)
    (root / "results").mkdir()
    (root / "results").chmod(0o777)
    script = root / "source" / "run_autograder"  # what the container runs, here the proof's test
    script.write_text(f"exec {sys.executable} -c {_shell(_PROOF_TEST)} {root}\n")
    done = run_autograder(root, "docker")
    assert done.returncode == 0 and done.stdout.strip() == "proven", done.stderr[-2000:]


def _shell(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_hidden_checks_are_never_gradescopes_hidden(tmp_path):
    from torchgrade.engine.config import ConfigError, load_assignment

    path = tmp_path / "assignment.yaml"
    base = "title: T\nexercises:\n  tensors:\n    targets: {view: 1}\n"
    path.write_text(base)
    assert load_assignment(path).hidden_visibility == "after_due_date"
    path.write_text(base + "hidden_visibility: after_published\n")
    assert load_assignment(path).hidden_visibility == "after_published"
    path.write_text(base + "hidden_visibility: hidden\n")
    with pytest.raises(ConfigError, match="still counts their points"):
        load_assignment(path)
    path.write_text(base + "gradescope_isolation: none\n")
    with pytest.raises(ConfigError, match="gradescope_isolation"):
        load_assignment(path)


def test_the_init_course_autograder_grades_its_reference_full_and_its_stub_zero_in_a_container(tmp_path, unpacked):
    """`torchgrade init`'s course, as an instructor would first upload it (its own probe and hint included);
    with setup.sh's --smoke, the build's test, a submission short of full marks fails the build."""
    course = tmp_path / "course"
    assert CliRunner().invoke(main, ["init", str(course)]).exit_code == 0
    out = tmp_path / "dist"
    result = CliRunner().invoke(main, ["gradescope", "--out", str(out), "--assignment", str(course / "assignment.yaml")])
    assert result.exit_code == 0, result.output
    scores = {}
    for kind in ("reference", "exercises"):
        root = unpacked(out / "autograder.zip")
        for path in (course / kind).glob("*.py"):
            shutil.copy(path, root / "submission" / path.name)
        script = root / "source" / "run_autograder"
        script.write_text(script.read_text().replace("--results", "--smoke --results"))
        done = run_autograder(root, "docker" if CONTAINERS else "host")
        assert done.returncode == (0 if kind == "reference" else 1), done.stderr[-3000:]
        document = _results(root)
        scores[kind] = (document["score"], document["extra_data"]["max_score"])
    assert scores["reference"][0] == scores["reference"][1] > 0 and scores["exercises"][0] == 0, scores
    assert "the reference does not score full marks here" in done.stderr


def test_the_reference_outcomes_are_recorded_once_and_never_trusted_stale_or_damaged(tmp_path, monkeypatch):
    from tiny_course import make_course

    import torchgrade.engine.session
    from torchgrade.engine import refcache
    from torchgrade.engine.config import load_assignment

    assignment = load_assignment(make_course(tmp_path / "course"))
    folder = tmp_path / "outcomes"

    def use() -> str:
        monkeypatch.setattr(torchgrade.engine.session, "_sessions", {})  # as in a fresh container per submission
        return refcache.ensure(assignment, "cpu", folder)

    assert use() == "recorded"
    [recording] = folder.glob("reference-*.bin")  # (beside the folder's signing secret)
    made = recording.read_bytes()
    assert use() == "reused" and recording.read_bytes() == made
    recording.write_bytes(b"\x00garbage")
    assert use() == "recorded" and recording.read_bytes() == made
    checks = next(assignment.checks_dir.rglob("test_*.py"))
    checks.write_text(checks.read_text() + "\n# changed\n")
    assert use() == "recorded" and len(list(folder.glob("reference-*.bin"))) == 2  # a new key
    assert use() == "reused"


def test_the_builds_test_grades_the_reference_and_records_what_each_submission_reuses(tiny_autograder, unpacked):
    """setup.sh after its installs (which need the network): the lock-down and the build's test, run in
    the simulated container with this machine's torchgrade as the image's venv; then a submission."""
    root = unpacked(tiny_autograder)
    setup = (root / "source" / "setup.sh").read_text()
    assert setup.index('"$SOURCE/engine"') < setup.index('chmod -R go-rwx "$SOURCE/course"')  # installs first
    head = setup[:setup.index("if command -v apt-get")]
    (root / "source" / "build_test.sh").write_text(head + setup[setup.index('chmod -R go-rwx "$SOURCE/course"'):])
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "bin" / "torchgrade").symlink_to(Path(sys.executable).parent / "torchgrade")
    container = "docker" if CONTAINERS else "host"
    built = run_autograder(root, container, "build_test.sh")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert "graded" in built.stdout and ": 5 / 5" in built.stdout
    recording = root / "reference-outcomes"
    assert list(recording.glob("reference-*.bin")) and recording.stat().st_mode & 0o077 == 0
    for path in (ROOT / "reference").glob("*.py"):
        shutil.copy(path, root / "submission" / path.name)
    done = run_autograder(root, container)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"reference outcomes ({recording}): reused" in done.stdout
    assert _results(root)["score"] == 5


def test_a_notebook_handed_in_is_graded_as_its_module_with_messages_that_name_its_cells(tiny_autograder, unpacked):
    """A student who uploads the notebook they worked in (here inside a folder, as a drag-and-drop of it gives)."""
    from class_folders import solved_notebook

    root = unpacked(tiny_autograder)
    (root / "submission" / "hw1").mkdir()
    (root / "submission" / "hw1" / "tensors.ipynb").write_text(solved_notebook(
        "def broadcast_shape(*shapes):\n    raise ValueError('not yet')\n\n\nprint('hello from the notebook')\n"))
    assert find_submission(root / "submission", ("tensors",)) == root / "submission" / "hw1"
    done = run_autograder(root, "host")
    assert done.returncode == 0, done.stderr[-3000:]
    document = _results(root)  # valid against Gradescope's schema
    assert document["score"] == 3 and document["extra_data"]["max_score"] == 5  # broadcast_shape's 2 points lost
    failed = [t for t in document["tests"] if t["status"] == "failed"]
    assert failed and all('File "tensors.ipynb", cell 7, line 2, in broadcast_shape' in t["output"] for t in failed)
    assert "tensors.py" not in "".join(t["output"] for t in failed)
    # what it printed is said to come from the notebook, and the document keeps which module was one
    assert "--- printed by tensors.ipynb while importing ---\nhello from the notebook" in document["output"]
    assert "tensors.py" not in document["output"] and document["extra_data"]["notebooks"] == {"tensors": "tensors.ipynb"}


def test_autograde_is_listed_and_the_docs_recipe_runs_a_built_autograder_on_a_submission_here(tmp_path):
    """docs/exports.md's recipe, run as written in a course folder: the reference's files as the submission
    score full marks; `torchgrade --help` lists the command run_autograder runs."""
    import re

    from tiny_course import make_course

    listed = CliRunner().invoke(main, ["--help"])
    assert re.search(r"^\s+autograde\s+Grade one submission", listed.output, re.MULTILINE), listed.output
    recipe = re.search(r"<!-- recipe: autograder -->\s*```bash\n(.*?)```",
                       (ROOT / "docs" / "exports.md").read_text(encoding="utf-8"), re.DOTALL).group(1)
    course = make_course(tmp_path / "course")
    submission = tmp_path / "submission"
    submission.mkdir()
    shutil.copy(ROOT / "reference" / "tensors.py", submission / "tensors.py")
    env = dict(os.environ, SUBMISSION=str(submission), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("TORCHGRADE_ISOLATION", None)
    done = subprocess.run(["bash", "-e", "-c", recipe], cwd=course.parent, env=env, capture_output=True, text=True,
                          timeout=550, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(done.stdout[done.stdout.index("\n{") + 1:])
    assert results["score"] == results["extra_data"]["max_score"] > 0, results["output"]
