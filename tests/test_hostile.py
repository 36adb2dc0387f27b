"""The hostile-submission corpus (tests/hostile/): each attack scores zero where it attacks, and nothing else moves.

For every attack: the attacked targets score zero, the untouched ones keep full marks, the grade
records the isolation level, nothing appears in the grader's folders (nor in the host's /tmp
under bubblewrap), the report escapes what the student wrote, and no process the attack started
is left. Attacks that only an isolation level stops are also run without it, where they must
succeed: that shows they are real. A last test grades a class of them with the command line.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import levels
import pytest
import yaml
from conftest import ROOT, kept_grade, make_submission, points_by_target
from hostile import ATTACKS, CORPUS, Attack
from mqueues import queue_exists, unlink_queue

from torchgrade.engine.config import load_assignment
from torchgrade.engine.grading import grade_submission
from torchgrade.outputs.report import render_report
from torchgrade.engine.results import results_document
from torchgrade.sandbox import host, ipc, isolation, observer, portable
from torchgrade.sandbox.host import Sandbox, isolation_level

SECRET_NAME = "TORCHGRADE_TEST_SECRET"
LEVELS = isolation.LEVELS


def fast_assignment_text(checks: Path, only: tuple[str, ...] = ()) -> str:
    """assignment.yaml with absolute folders and a time limit of 2 s per check (and only these exercises)."""
    text = (ROOT / "assignment.yaml").read_text()
    if only:
        data = yaml.safe_load(text)
        data["exercises"] = {name: entry for name, entry in data["exercises"].items() if name in only}
        text = yaml.safe_dump(data, sort_keys=False)
    for key, value in (("reference", ROOT / "reference"), ("checks", checks), ("stubs", ROOT / "exercises"),
                       ("probes", ROOT / "graders" / "probes"), ("hints", ROOT / "graders" / "hints.yaml"),
                       ("time_limit", 2)):
        text, n = re.subn(rf"(?m)^{key}:.*$", f"{key}: {value}", text)
        assert n == 1, f"assignment.yaml has no top-level {key}"
    return text


@pytest.fixture(scope="session")
def fast(tmp_path_factory):
    path = tmp_path_factory.mktemp("assignment") / "assignment.yaml"
    path.write_text(fast_assignment_text(ROOT / "graders" / "checks"))
    return load_assignment(path)


@pytest.fixture(scope="session")
def best_level():
    """The level under test: the one TORCHGRADE_ISOLATION demands, else the best this machine has."""
    level = isolation_level(isolation.requested_level())
    if level not in LEVELS:
        pytest.skip(f"{isolation.ENV_VAR} asks for a level this machine does not have")
    return level


class Arena:
    """What one attack is graded in: a nonce, the grader's folders, a port to reach, a process with a secret."""

    def __init__(self, tmp_path: Path):
        self.nonce = uuid.uuid4().hex
        self.mark = "tgh" + self.nonce[:12]
        self.out = tmp_path / "out"
        self.private = tmp_path / "private"  # a folder of the grader's own (0700)
        self.private.mkdir(mode=0o700)
        self.canary = self.private / f"unpickled-{self.nonce}"
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.secret_holder = subprocess.Popen(["sleep", "120"], env={**os.environ, SECRET_NAME: self.nonce})

    def config(self) -> dict:
        return {"nonce": self.nonce, "canary": str(self.canary), "port": self.listener.getsockname()[1],
                "secret_name": SECRET_NAME, "folders": [str(self.out), str(self.private), str(ROOT),
                                                         str(ROOT / "reports"), tempfile.gettempdir()]}

    def close(self) -> None:
        self.listener.close()
        self.secret_holder.kill()
        self.secret_holder.wait()


@pytest.fixture
def arena(tmp_path):
    a = Arena(tmp_path)
    yield a
    a.close()


def hostile_submission(attack: Attack, arena: Arena, folder: Path) -> Path:
    files = {"hostile_kit.py": (CORPUS / "kit.py").read_text(), "attack.json": json.dumps(arena.config()),
             **dict(attack.files)}
    make_submission(folder, append={attack.module: attack.code}, files=files)
    for name, target in attack.symlinks:
        (folder / name).symlink_to(ROOT / target)
    return folder


def grade_at(level: str, attack: Attack, arena: Arena, assignment, tmp_path: Path, monkeypatch,
             only: tuple[str, ...] | None = None):
    monkeypatch.setenv(isolation.ENV_VAR, level)
    folder = hostile_submission(attack, arena, tmp_path / attack.name)
    return kept_grade(folder, assignment, only=attack.only if only is None else only)


def split(grade, attack: Attack) -> tuple[dict, dict]:
    """(attacked, others): {"exercise.target": (score, max_score)} of each kind."""
    points = points_by_target(grade)
    hit = {t: p for t, p in points.items() if t in attack.attacked or t.split(".")[0] in attack.attacked}
    return hit, {t: p for t, p in points.items() if t not in hit}


def forged(grade, attack: Attack, hit: dict) -> list[str]:
    """The checks of the attacked targets that kept points, less those the attack answers honestly."""
    return [t.name for t in grade.tests if f"{t.exercise}.{t.target}" in hit and t.score > 0
            and not any(word in t.name.lower() for word in attack.honest)]


def survivors(mark: str) -> list[int]:
    """Live processes named `mark` (every process an attack starts renames itself so). A zombie is dead:
    one the portable backend killed is re-parented to init, and where init does not reap it stays listed."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == mark \
                    and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(pid))
        except (OSError, IndexError):
            pass
    return found


def strays(nonce: str, *folders: Path) -> list[str]:
    """Files named after the nonce anywhere under `folders` (the project tree without its venv)."""
    found = []
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d not in (".venv", ".git", "node_modules")]
            found += [os.path.join(root, f) for f in files + dirs if nonce in f]
    return found


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_an_attack_scores_zero_where_it_attacks_and_nowhere_else(attack, fast, best_level, arena, tmp_path,
                                                                 monkeypatch):
    if LEVELS.index(best_level) > LEVELS.index(attack.level):
        pytest.skip(f"needs isolation {attack.level}; this machine has {best_level} (see SECURITY.md)")
    g = grade_at(best_level, attack, arena, fast, tmp_path, monkeypatch)
    hit, others = split(g, attack)

    assert g.isolation == best_level
    assert hit and all(maximum > 0 for _, maximum in hit.values()) and forged(g, attack, hit) == [], hit
    assert others and all(score == maximum > 0 for score, maximum in others.values()), \
        [(t.name, t.output[:3000]) for t in g.tests if t.status not in ("passed", "skipped") and f"{t.exercise}.{t.target}" in others]
    if attack.message:
        failures = [t.output for t in g.tests if f"{t.exercise}.{t.target}" in hit and t.status in ("failed", "error")]
        assert any(attack.message in m for m in failures), failures[:2]

    # What the trusted side writes is the trusted grade, and the report escapes everything.
    document = results_document(g, fast)
    assert document["score"] == g.score < g.max_score and document["extra_data"]["isolation"] == best_level
    html = render_report(g, fast)
    assert "<script>alert" not in html and "<img src=x" not in html
    if attack.name == "html_injection":
        assert "&lt;script&gt;alert(" in html
    if attack.secret:  # what only hidden checks saw is in the instructor's copy, never in the student's
        secret, shown = attack.secret + arena.nonce, attack.shown + arena.nonce
        student = json.dumps(document) + html
        instructor = json.dumps(results_document(g, fast, instructor=True)) + render_report(g, fast, instructor=True)
        assert secret not in student and shown in student
        assert secret in instructor
        if attack.secret_lines:  # nor the line numbers of the hidden checks' forbidden calls
            assert attack.line_mark(arena.nonce) not in student and attack.line_mark(arena.nonce) in instructor
    # Every message is bounded (torchgrade/engine/bounds.py), whatever the submission sent.
    assert max(len(t.output) for t in g.tests) < 5000

    # Nothing appears where it should not, nothing unpickles, nothing survives.
    assert not arena.canary.exists()
    assert strays(arena.nonce, ROOT, arena.out, arena.private) == []
    if best_level == "bwrap":  # only the bubblewrap sandbox has a /tmp of its own
        assert not [p for p in os.listdir(tempfile.gettempdir()) if arena.nonce in p]
    deadline = time.monotonic() + 5
    while survivors(arena.mark) and time.monotonic() < deadline:  # SIGKILLed, maybe not yet reaped
        time.sleep(0.05)
    assert survivors(arena.mark) == []
    assert ipc_leftovers(arena) == []


def ipc_leftovers(arena: Arena) -> list:
    """What the shared_memory attack's keys name in the host's System V IPC, its file in /dev/shm, and its
    POSIX message queue (by name: the host may have no /dev/mqueue to list)."""
    key = int(arena.nonce[:7], 16)
    found: list = [o for o in ipc.objects() if key <= o.key <= key + 3]
    found += [p for p in (f"/dev/shm/{arena.mark}",) if os.path.exists(p)]
    return found + [queue for queue in (f"/{arena.mark}",) if queue_exists(queue)]


@functools.cache
def available_levels() -> tuple[str, ...]:
    """The levels whose sandbox starts here (a level can be offered and still fail to start)."""
    found = []
    for level in LEVELS:
        try:
            host.zygote(level)
        except host.IsolationError:
            continue
        found.append(level)
    return tuple(found)


#: The attacks that no isolation level is needed for (they target the recorder or the process cap):
#: also graded at every other level this machine offers.
EVERY_LEVEL = ("hidden_calls_conv", "hidden_calls_tensors", "autograd_in_backward", "switch_off_recorder",
               "fork_bomb_spills", "fill_after_watch", "redispatch", "other_overloads", "other_overloads_conv",
               "private_aliases", "private_aliases_tensors", "numpy_does_it", "numpy_through_a_copy",
               "builtin_target", "compiled_elsewhere", "inside_a_seen_call", "forged_set_aside", "clear_callbacks",
               *"lost_verdict frameless_callbacks thread_autograd saved_tensor_hooks hook_attributes".split(),
               "node_hook_registry", "installed_state", "saved_tensor_hooks_torch_closure")


#: Attacks whose point is another module (what one module leaves behind): graded with every untouched target.
ACROSS_MODULES = ("fork_bomb_spills",)


def beside_its_own_module(attack: Attack) -> tuple[str, ...]:
    """The attacked targets and the untouched ones of the attacked module (else one untouched target): at a
    level other than the best, each more module is one more worker, a Python and torch at level `process`.
    What an attack costs other modules is graded at the best level (the test above), and at every level for
    the attacks whose point it is (ACROSS_MODULES)."""
    if attack.name in ACROSS_MODULES:
        return attack.only
    own = tuple(t for t in attack.untouched if t.split(".")[0] == attack.module and t not in attack.attacked)
    return attack.attacked + (own or attack.untouched[:1])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.name in EVERY_LEVEL], ids=lambda a: a.name)
def test_an_attack_on_the_recorder_or_the_process_cap_holds_at_every_level(attack, level, fast, best_level, arena,
                                                                          tmp_path, monkeypatch):
    if level == best_level:
        pytest.skip("graded at this level by the test above")
    if level not in available_levels():
        pytest.skip(f"this machine has no isolation {level}")
    g = grade_at(level, attack, arena, fast, tmp_path, monkeypatch, only=beside_its_own_module(attack))
    hit, others = split(g, attack)
    assert g.isolation == level
    compiled = os.environ.get(observer.ENV_VAR) != "off" and level != "process"  # (none at process: observer.py)
    assert g.watch == (observer.COMPILED if compiled else observer.PROFILER)
    assert hit and all(maximum > 0 for _, maximum in hit.values()) and forged(g, attack, hit) == [], hit
    assert others and all(score == maximum > 0 for score, maximum in others.values()), \
        [(t.name, t.output[:300]) for t in g.tests if t.status in ("failed", "error") and f"{t.exercise}.{t.target}" in others]
    deadline = time.monotonic() + 5
    while survivors(arena.mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert survivors(arena.mark) == []


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.works_unisolated], ids=lambda a: a.name)
def test_without_isolation_the_attack_would_have_worked(attack, fast, arena, tmp_path, monkeypatch):
    g = grade_at("process", attack, arena, fast, tmp_path, monkeypatch)
    hit, _ = split(g, attack)
    assert g.isolation == "process"
    assert hit and all(score == maximum > 0 for score, maximum in hit.values()), \
        [(t.name, t.output[:300]) for t in g.tests if t.status != "passed"]


def test_a_module_that_left_processes_behind_is_ended_before_another_module_runs(best_level, arena, tmp_path,
                                                                                monkeypatch):
    """What one module started (a fork bomb at the process cap) is gone before another module's worker
    runs, so it cannot starve that module's ranks or workers; the module itself gets a fresh worker."""
    monkeypatch.setenv(isolation.ENV_VAR, best_level)
    attack = next(a for a in ATTACKS if a.name == "fork_bomb_spills")
    sandbox = Sandbox(hostile_submission(attack, arena, tmp_path / attack.name))
    try:
        sandbox.run("data", "make_loader", "call", (list(range(4)), 2, False), {}, {}, timeout=20)
        assert len(survivors(arena.mark)) > 100
        reply = sandbox.run("tensors", "broadcast_shape", "call", ((2, 1), (1, 3)), {}, {}, timeout=20)
        assert reply["value"] == (2, 3)
        assert survivors(arena.mark) == []
        assert "data" not in sandbox.workers
    finally:
        sandbox.close()


CLASS = ("exit_at_import", "import_hang", "kill_parent", "kill_everything", "fork_bomb", "lingering_processes",
         "output_flood", "write_results", "read_secrets", "steal_reference", "html_injection", "print_hidden_inputs")
#: The folder (so the name in every report) of a submission can hold markup too.
FOLDER = {"html_injection": "<img src=x onerror=alert(1)>"}


@pytest.mark.heavy
def test_a_class_of_hostile_submissions_is_graded_to_the_end(best_level, arena, tmp_path):
    """`torchgrade grade` over a class: every submission gets its results, the honest one full marks, each
    attack zero where it attacks; the grader's own secret (in its environment) stays out of reach."""
    checks = tmp_path / "checks"
    for name in ("visible/test_tensors.py", "hidden/test_tensors.py"):
        (checks / name).parent.mkdir(parents=True, exist_ok=True)
        (checks / name).write_text((ROOT / "graders" / "checks" / name).read_text())
    yaml = tmp_path / "assignment.yaml"
    yaml.write_text(fast_assignment_text(checks, only=("tensors",)))
    attacks = [a for a in ATTACKS if a.name in CLASS and LEVELS.index(best_level) <= LEVELS.index(a.level)]
    roster = tmp_path / "class"
    make_submission(roster / "honest")
    for attack in attacks:
        hostile_submission(attack, arena, roster / FOLDER.get(attack.name, attack.name))
    env = {**os.environ, isolation.ENV_VAR: best_level, SECRET_NAME: arena.nonce}
    done = subprocess.run([sys.executable, "-m", "torchgrade.cli", "grade", str(roster), "--out", str(arena.out),
                           "-j", "2", "--device", "cpu", "--assignment", str(yaml)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]

    def points(name: str) -> dict[str, tuple[float, float]]:
        document = json.loads((arena.out / name / "results.json").read_text())
        assert document["extra_data"]["isolation"] == best_level
        totals: dict[str, list[float]] = {}
        for t in document["tests"]:
            total = totals.setdefault(f"{t['extra_data']['exercise']}.{t['extra_data']['target']}", [0.0, 0.0])
            total[0] += t["score"]
            total[1] += t["max_score"]
        return {k: (round(s, 6), round(m, 6)) for k, (s, m) in totals.items()}

    honest = points("honest")
    assert honest and all(score == maximum > 0 for score, maximum in honest.values())
    for attack in attacks:
        got = points(FOLDER.get(attack.name, attack.name))
        assert set(got) == set(honest), attack.name
        for target, (score, maximum) in got.items():
            hit = target in attack.attacked or target.split(".")[0] in attack.attacked
            assert (score == 0 < maximum) if hit else (score == maximum), (attack.name, target, score, maximum)
    for page in [arena.out / "index.html", *arena.out.glob("*/report.html")]:
        html = page.read_text()
        assert "<img src=x" not in html and "<script>alert" not in html, page
    assert "&lt;img src=x" in (arena.out / "index.html").read_text()  # the name is there, as text
    # The student's copy (results.json, report.html) has no hidden check's inputs; the instructor's
    # copy, in a folder of the grader's own, has them.
    secret = "HIDDEN-INPUT-" + arena.nonce
    student = [p.read_text() for p in arena.out.glob("print_hidden_inputs/*.*")]
    instructor = [p.read_text() for p in arena.out.glob("print_hidden_inputs/instructor/*.*")]
    assert len(student) == len(instructor) == 2 and not any(secret in text for text in student)
    assert all(secret in text for text in instructor)
    assert (arena.out / "print_hidden_inputs" / "instructor").stat().st_mode & 0o077 == 0
    assert strays(arena.nonce, ROOT, arena.private) == []
    assert not [p for p in os.listdir(arena.out) if arena.nonce in p]
    assert survivors(arena.mark) == []


@pytest.fixture
def level_here(request, monkeypatch):
    """The level a test asks for (indirect parameter). unprivileged-user, where its user cannot start
    here (a Python the sandbox user cannot read), is simulated: its zygote without bubblewrap and without
    the user switch (what the level adds to that is tested where the level exists)."""
    level = request.param
    simulated = level == "unprivileged-user" and level not in available_levels()
    if simulated:
        monkeypatch.setattr(isolation, "plans", levels.simulated_plans(isolation.plans))
    elif level not in available_levels():
        pytest.skip(f"this machine has no isolation {level}")
    yield level
    if simulated:  # no other test may take this zygote for the real level
        with host._zygote_lock:
            zygote = host._zygotes.pop(level, None)
            host._chosen.pop(level, None)
        if zygote is not None:
            zygote.close()


def _two_copies(level: str, arena: Arena, fast, tmp_path: Path, monkeypatch, name: str = "shared_memory") -> list:
    """Grade two copies of an attack that leaves a message, one after the other, in one grader (one sandbox)."""
    monkeypatch.setenv(isolation.ENV_VAR, level)
    attack = next(a for a in ATTACKS if a.name == name)
    grades = []
    for copy in ("first", "second"):
        folder = hostile_submission(attack, arena, tmp_path / copy)
        grades.append(kept_grade(folder, fast, only=attack.only))
    return [split(g, attack) for g in grades]


@pytest.mark.parametrize("level_here", LEVELS, indirect=True)
def test_what_a_submission_leaves_in_shared_memory_is_gone_before_the_next(level_here, fast, arena, tmp_path,
                                                                         monkeypatch):
    """A System V segment, semaphore set and message queue, and a file in /dev/shm, planted by one
    submission: the next submission graded by the same grader finds none of them, and none is left on
    the host after the run (nor the 1 GiB segment)."""
    try:
        for hit, others in _two_copies(level_here, arena, fast, tmp_path, monkeypatch):
            assert hit and all(score == 0 < maximum for score, maximum in hit.values()), hit
            assert others and all(score == maximum > 0 for score, maximum in others.values()), others
        assert ipc_leftovers(arena) == []
    finally:
        _remove_leftovers(arena)


def test_without_the_ipc_defences_shared_memory_carries_a_message_to_the_next_submission(fast, arena, tmp_path,
                                                                                        monkeypatch):
    """The attack is real: at level process, with neither the worker's IPC namespace nor the removal of
    what a submission left, the second copy finds the first one's message and gets gather's points."""
    monkeypatch.setattr(portable, "OWN_IPC", False)
    monkeypatch.setattr(ipc.Leftovers, "remove", lambda self: 0)
    if "process" in host._zygotes:  # a spare started before the patch has the namespace
        with host._zygote_lock:
            host._zygotes.pop("process").close()
    try:
        (first, _), (second, _) = _two_copies("process", arena, fast, tmp_path, monkeypatch)
        assert all(score == 0 for score, _ in first.values()), first
        assert second and all(score == maximum > 0 for score, maximum in second.values()), second
        assert ipc_leftovers(arena)
    finally:
        _remove_leftovers(arena)
        with host._zygote_lock:  # its spare has no namespace: no later test gets it
            zygote = host._zygotes.pop("process", None)
        if zygote is not None:
            zygote.close()


@pytest.mark.parametrize("level_here", LEVELS, indirect=True)
def test_what_a_submission_leaves_in_a_kernel_keyring_is_gone_before_the_next(level_here, fast, arena, tmp_path,
                                                                             monkeypatch):
    """A key added to the user keyring of whoever the code runs as: the next submission does not find it."""
    from torchgrade.sandbox import keyrings

    mine = keyrings.Keys()
    for hit, others in _two_copies(level_here, arena, fast, tmp_path, monkeypatch, "keyring_message"):
        assert hit and all(score == 0 < maximum for score, maximum in hit.values()), hit
        assert others and all(score == maximum > 0 for score, maximum in others.values()), others
    assert mine.remove() == 0  # nothing of the attack's is left in the grader's own keyrings either


@pytest.mark.heavy
def test_without_the_keyring_defence_a_key_carries_a_message_to_the_next_submission(fast, arena, tmp_path,
                                                                                   monkeypatch):
    """The attack is real: at level process, with the keys a submission added left in place, the second
    copy finds the first one's message and gets gather's points."""
    from torchgrade.sandbox import keyrings

    mine, remove = keyrings.Keys(), keyrings.Keys.remove
    monkeypatch.setattr(keyrings.Keys, "remove", lambda self: 0)
    try:
        # (up to three tries: another test's sandbox running as this same user, on the other xdist worker,
        # empties this user's keyrings at its start, and can take the first copy's key in between)
        for attempt in range(3):
            remove(mine)  # (what an earlier try left)
            (first, _), (second, _) = _two_copies("process", arena, fast, tmp_path / str(attempt), monkeypatch,
                                                  "keyring_message")
            assert all(score == 0 for score, _ in first.values()), first
            if second and all(score == maximum > 0 for score, maximum in second.values()):
                break
        assert second and all(score == maximum > 0 for score, maximum in second.values()), second
    finally:
        monkeypatch.undo()
        remove(mine)


def _remove_leftovers(arena: Arena) -> None:
    for found in ipc_leftovers(arena):
        if isinstance(found, str) and not found.startswith("/dev/"):
            unlink_queue(found)
        elif isinstance(found, str):
            os.unlink(found)
        else:
            ipc.remove(found)


def test_a_builtin_forbidden_by_its_dotted_name_is_caught_when_fetched_at_run_time(best_level, arena, tmp_path,
                                                                                   monkeypatch):
    """tests/hostile/dotted_builtin.py, with the tiny course's one_hot forbidden as
    `torch.nn.functional.one_hot` (a C builtin): zero for one_hot, full marks for broadcast_shape."""
    from tiny_course import make_course, student

    path = make_course(tmp_path / "course")
    path.write_text(path.read_text().replace("one_hot: 3", "one_hot: {points: 3, forbidden: [torch.nn.functional.one_hot]}"))
    monkeypatch.setenv(isolation.ENV_VAR, best_level)
    folder = student(tmp_path / "student", extra=(CORPUS / "dotted_builtin.py").read_text())
    g = grade_submission(folder, load_assignment(path), device="cpu")
    points = points_by_target(g)
    assert points["tensors.one_hot"][0] == 0 < points["tensors.one_hot"][1], points
    assert points["tensors.broadcast_shape"][0] == points["tensors.broadcast_shape"][1] > 0, points
    assert any("torch.nn.functional.one_hot" in t.output for t in g.tests if t.target == "one_hot")


@pytest.mark.parametrize("level", ["process", "best"])
def test_code_compiled_under_torchs_file_names_costs_each_call_its_points_and_no_later_request_its_time(
        level, best_level, arena, tmp_path, monkeypatch):
    """tests/hostile/compiled_elsewhere.py makes torch/nn/functional.py's code count as not installed: the
    recorder once pushed its mode for F.pad's own frame, which dispatched to it again, to the recursion limit,
    and left its worker a stack of modes that made each later request hang until its time limit. Now every
    request of one worker is answered at once, each names the forbidden call, and none names the recorder."""
    import torch

    attack = next(a for a in ATTACKS if a.name == "compiled_elsewhere")
    folder = hostile_submission(attack, arena, tmp_path / attack.name)
    sandbox = Sandbox(folder, level=best_level if level == "best" else level)
    x = torch.randint(-9, 10, (2, 5, 6))
    try:
        for target, args, kwargs, name in [("pad2d", (x.float(), 1), {}, "pad"),
                                           ("pool2d", (x, 3, "max"), {"stride": 2, "padding": 1}, "max_pool2d"),
                                           ("pool2d", (x, 3, "avg"), {"stride": 2, "padding": 1}, "avg_pool2d"),
                                           ("pad2d", (x.float(), 1), {}, "pad")]:
            reply = sandbox.run("conv", target, "call", args, kwargs, {}, timeout=60, watch_dispatcher=True)
            assert "value" in reply and any(c.endswith(name) for c in reply["calls"]), reply.get("calls")
            assert not [c for c in reply["calls"] if "CallRecorder" in c], reply["calls"]
    finally:
        sandbox.close()


# --- notebooks the trusted process reads (tests/hostile/notebooks.py) ---

@pytest.mark.parametrize("level_here", LEVELS, indirect=True)
def test_a_hostile_notebook_costs_its_own_module_only_and_the_trusted_process_little(level_here, fast, tmp_path,
                                                                                   monkeypatch):
    """A 5 MB literal in a cell, 340,000 outputs, JSON nested 50,000 deep: each, read by the trusted process
    with bounded memory and time, is its own module's error row saying why; the `.py` modules keep their
    marks and the grade its true level."""
    import tracemalloc

    from hostile import notebooks as hostile_notebooks

    from torchgrade.classroom import batch
    from torchgrade.classroom.submissions import Submission
    from torchgrade.engine import notebooks

    monkeypatch.setenv(isolation.ENV_VAR, level_here)
    folder = hostile_notebooks.write(make_submission(tmp_path / "notebooks"))
    tracemalloc.start()
    try:  # the reading alone, as `prepare` does it in the grading process (its peak: a few times the file)
        notes = notebooks.prepare(make_submission(tmp_path / "read", files={
            f"{m}.ipynb": (folder / f"{m}.ipynb").read_text() for m in hostile_notebooks.NOTEBOOKS.values()}),
            fast)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(notes) == 3 and peak < 160 * 1024**2, (notes, peak)

    attacked = ("tensors.broadcast_shape", "autograd.vjp", "functions.Exp")
    grade = batch.grade_one(Submission("notebooks", folder), fast, "cpu", attacked + ("conv.conv_output_size",))
    points = points_by_target(grade)
    assert grade.isolation == level_here
    assert points["conv.conv_output_size"][0] == points["conv.conv_output_size"][1] > 0, grade.output
    for target in attacked:
        assert points[target][0] == 0 < points[target][1], target
    rows = [t for t in grade.tests if t.exercise != "conv" and t.status != "skipped"]
    why = {t.exercise: t.output for t in rows}
    assert "nested more than" in why["tensors"] and "code cells hold" in why["autograd"] \
        and "values" in why["functions"], why
    assert rows and all(t.status == "error" for t in rows)


#: Round five (issue 47): the attacks on an excuse the watch made, also graded at `bwrap` with the profiler
#: as the watch (a grader without a compiler has it; elsewhere at `bwrap` the compiled observer watches).
ROUND_FIVE = ("lost_verdict", "frameless_callbacks", "thread_autograd", "saved_tensor_hooks",
              "saved_tensor_hooks_torch_python", "node_prehook", "hook_attributes", "named_as_torchs_node",
              "node_hook_registry", "installed_state")


def test_round_five_holds_at_bwrap_with_the_profiler_as_the_watch(fast, arena, tmp_path, monkeypatch):
    """One zygote watched by the profiler grades each attack beside its module's untouched targets."""
    if "bwrap" not in available_levels():
        pytest.skip("this machine has no isolation bwrap")

    def drop_zygote() -> None:
        with host._zygote_lock:
            zygote = host._zygotes.pop("bwrap", None)
            host._chosen.pop("bwrap", None)
        if zygote is not None:
            zygote.close()

    monkeypatch.setenv(observer.ENV_VAR, "off")
    drop_zygote()  # (one watched by the compiled observer: the next test starts its own again)
    try:
        for attack in [a for a in ATTACKS if a.name in ROUND_FIVE]:
            g = grade_at("bwrap", attack, arena, fast, tmp_path, monkeypatch, only=beside_its_own_module(attack))
            hit, others = split(g, attack)
            assert g.isolation == "bwrap" and g.watch == observer.PROFILER, attack.name
            assert hit and all(maximum > 0 for _, maximum in hit.values()) and forged(g, attack, hit) == [], \
                (attack.name, hit)
            assert others and all(score == maximum > 0 for score, maximum in others.values()), (attack.name, others)
    finally:
        drop_zygote()


@pytest.mark.parametrize("watch", ["compiled", "profiler"])
def test_autograd_in_a_thread_of_the_students_costs_the_cuda_checks_too(watch, fast, best_level, arena, tmp_path,
                                                                        monkeypatch):
    """On CUDA autograd runs a graph in device threads of its own; the watch once excused any evaluation at the top
    of another thread there, so on the CUDA stand-in (and a GPU) the `thread_autograd` attack kept its points. A
    watched request now runs autograd in the thread that asked (torch.autograd.set_multithreading_enabled), so no
    thread's evaluation is autograd's own: the CUDA checks of the attacked Functions lose as their CPU checks do."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU the CUDA checks are not the stand-in's (the same rule: SECURITY.md)")
    if watch == "compiled" and (os.environ.get(observer.ENV_VAR) == "off" or best_level == "process"):
        pytest.skip("no compiled observer here")
    if watch == "profiler":
        monkeypatch.setenv(observer.ENV_VAR, "off")
        monkeypatch.setenv(isolation.ENV_VAR, "process")  # (the profiler watches there; no zygote to restart)
    else:
        monkeypatch.setenv(isolation.ENV_VAR, best_level)
    attack = next(a for a in ATTACKS if a.name == "thread_autograd")
    folder = hostile_submission(attack, arena, tmp_path / attack.name)
    g = kept_grade(folder, fast, device="cuda", only=("functions.Exp", "functions.LinearFn", "functions.Conv2dFn"))
    assert g.watch == (observer.PROFILER if watch == "profiler" else g.watch) and g.standin
    on_cuda = [t for t in g.tests if t.device == "cuda" and t.status != "skipped"]
    attacked = [t for t in on_cuda if t.target in ("Exp", "LinearFn") and t.max_score > 0]
    assert attacked and all(t.score == 0 for t in attacked if not any(w in t.name.lower() for w in attack.honest)), \
        [(t.name, t.score) for t in attacked]
    assert any("forbidden call" in t.output for t in attacked)
    untouched = [t for t in on_cuda if t.target == "Conv2dFn"]
    assert untouched and all(t.score == t.max_score for t in untouched), [(t.name, t.output[:500]) for t in untouched]


HANGS_ON_EMPTY_LABELS = """

_one_hot_as_written = one_hot


def one_hot(labels, num_classes=-1):  # an honest mistake: a loop that never ends on empty labels
    if labels.numel() == 0:
        while True:
            pass
    return _one_hot_as_written(labels, num_classes)
"""


def test_an_honest_check_that_never_ends_where_verdicts_wait_costs_no_forbidden_call(fast, tmp_path, monkeypatch):
    """At level `process` the profiler's verdicts wait in the worker; a check that runs past its time limit
    ends the worker before the verdicts of its target's earlier checks are read. Those checks fail, saying
    why; the target is not scored zero for a forbidden call, and its checks after the loop keep their points."""
    monkeypatch.setenv(isolation.ENV_VAR, "process")
    folder = make_submission(tmp_path / "hangs", append={"tensors": HANGS_ON_EMPTY_LABELS})
    g = kept_grade(folder, fast, only=("tensors.one_hot",))
    checks = [t for t in g.tests if t.status != "skipped"]
    assert not any("forbidden" in t.output or t.forbidden for t in checks), [t.output for t in checks]
    lost = [t for t in checks if "could not read what this call ran" in t.output]
    assert lost and all(t.status == "failed" and t.score == 0 for t in lost)
    assert 0 < g.score < g.max_score and any(t.status == "passed" for t in checks)
