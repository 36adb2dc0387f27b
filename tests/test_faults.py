"""Faults a class run meets: a killed parent, an --out that cannot be written, a damaged ledger, Ctrl-C twice.

Each ends cleanly (no process left, one line and exit 2, nothing half-written), and the re-run
grades every student exactly once.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import levels
import psutil
import pytest
from click.testing import CliRunner

from torchgrade.classroom import batch
from torchgrade.cli import main
from torchgrade.cli.classroom import PROCESS_WARNING
from torchgrade.engine.config import load_assignment
from torchgrade.classroom.ledger import Ledger, Record, parse_record
from torchgrade.sandbox import isolation

from tiny_course import FULL_MARKS, ROOT, copy_class, make_course, slow_one_hot, student

NAMES = ["alice", "bob", "carol"]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return load_assignment(make_course(tmp_path_factory.mktemp("course")))


def grade_args(course, cls: Path, out: Path, *more: str) -> list[str]:
    return ["grade", str(cls), "--out", str(out), "--device", "cpu", "--assignment", str(course.path),
            "--no-progress", *more]


def ledger_names(out: Path) -> list[str]:
    return sorted(r.name for r in (parse_record(line) for line in (out / "ledger.jsonl").read_bytes().split(b"\n"))
                  if r is not None)


def assert_each_graded_once(out: Path, names: list[str], score: float = FULL_MARKS) -> None:
    assert ledger_names(out) == sorted(names)  # exactly one record each
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(names)  # nothing half-written
    for name in names:
        assert json.loads((out / name / "results.json").read_text())["score"] == score
        assert (out / name / "report.html").is_file()


def assert_one_line_exit_2(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    # stdout has the students graded before, if any; at isolation process (asked for) its warning comes first
    lines = [line for line in result.stderr.strip().splitlines() if line != PROCESS_WARNING]
    assert len(lines) == 1 and lines[0].startswith("torchgrade: error: "), result.output
    for word in words:
        assert word in lines[0], lines[0]


# --- --out ---

def test_an_out_under_a_file_is_one_line_and_exit_2(course, tmp_path):
    cls = copy_class({"alice": "reference"}, tmp_path / "class")
    (tmp_path / "file.txt").write_text("x")
    for out in (tmp_path / "file.txt", tmp_path / "file.txt" / "out", tmp_path / "file.txt" / "a" / "b"):
        result = CliRunner().invoke(main, grade_args(course, cls, out))
        assert_one_line_exit_2(result, "is not a folder")
    assert (tmp_path / "file.txt").read_text() == "x"


def test_an_unwritable_out_is_one_line_and_exit_2(course, tmp_path, monkeypatch):
    cls = copy_class({"alice": "reference"}, tmp_path / "class")
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o500)
    if os.geteuid() == 0:  # root writes anywhere: the file system's refusal is simulated
        real_open = os.open

        def refusing_open(path, *args, **kwargs):
            if str(path).startswith(str(out)):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", refusing_open)
    try:
        result = CliRunner().invoke(main, grade_args(course, cls, out))
    finally:
        out.chmod(0o755)
    assert_one_line_exit_2(result, "Permission denied", str(out))
    assert list(out.iterdir()) == []


def _full_disk_after(count: int):
    """A write_report that fails with ENOSPC once `count` reports are written (two per submission: the
    student's and the instructor's)."""
    real = batch.write_report
    written = []

    def write_report(grade, assignment, path, **kwargs):
        if len(written) >= count:
            with open(path, "w") as f:
                f.write("<html>half a rep")  # the disk filled in the middle of the file
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        written.append(grade.submission)
        return real(grade, assignment, path, **kwargs)

    return write_report


def test_a_full_disk_is_one_line_exit_2_nothing_half_written_and_the_rerun_grades_the_rest(course, tmp_path,
                                                                                           monkeypatch):
    cls = copy_class({n: "reference" for n in NAMES}, tmp_path / "class")
    out = tmp_path / "out"
    monkeypatch.setattr(batch, "write_report", _full_disk_after(2))
    result = CliRunner().invoke(main, grade_args(course, cls, out))
    assert_one_line_exit_2(result, "No space left on device", "run the same command")
    assert_each_graded_once(out, ["alice"])  # bob's half-written report is nowhere
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".torchgrade.lock"]

    monkeypatch.undo()
    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0, rerun.output
    assert "graded 2, skipped 1 already graded" in rerun.output
    assert_each_graded_once(out, NAMES)


def test_a_full_disk_while_recording_leaves_a_torn_line_and_the_rerun_grades_each_once(course, tmp_path,
                                                                                       monkeypatch):
    cls = copy_class({n: "reference" for n in NAMES}, tmp_path / "class")
    out = tmp_path / "out"
    real_append = Ledger.append

    def append(self, record):
        if record.name == "bob":
            with open(self.path, "ab") as f:
                f.write(b'{"content": "dir:')  # the disk filled in the middle of the line
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        real_append(self, record)

    monkeypatch.setattr(Ledger, "append", append)
    result = CliRunner().invoke(main, grade_args(course, cls, out))
    assert_one_line_exit_2(result, "No space left on device")
    monkeypatch.undo()
    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0, rerun.output
    assert "graded 2, skipped 1 already graded" in rerun.output  # bob (not recorded) and carol
    assert_each_graded_once(out, NAMES)
    assert len((out / "ledger.jsonl").read_text().splitlines()) == 3


def test_a_full_disk_while_writing_the_class_pages_is_one_line_and_leaves_no_temporary_file(course, tmp_path,
                                                                                           monkeypatch):
    cls = copy_class({n: "reference" for n in NAMES}, tmp_path / "class")
    out = tmp_path / "out"
    real = batch.write_atomic

    def write_atomic(path, text):
        if path.name == "grades.csv":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(batch, "write_atomic", write_atomic)
    result = CliRunner().invoke(main, grade_args(course, cls, out))
    assert_one_line_exit_2(result, "No space left on device")
    assert not list(out.glob(".*.tmp"))
    monkeypatch.undo()
    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0 and "graded 0, skipped 3 already graded" in rerun.output, rerun.output
    assert (out / "grades.csv").is_file()


# --- the ledger ---

GOOD = {"name": "bob", "content": "dir:2", "grader": "g", "score": 5.0, "max_score": 5.0, "errors": 0,
        "seconds": 1.0, "exercise_seconds": {"tensors": 0.5}}

DAMAGE = {
    "not UTF-8": b'{"name": "bob\xff\xfe", "content": "dir:2"}',
    "binary": bytes(range(256)),
    "torn": json.dumps(GOOD).encode()[:40],
    "score is a string": json.dumps({**GOOD, "score": "5"}).encode(),
    "score is a boolean": json.dumps({**GOOD, "score": True}).encode(),
    "name is a list": json.dumps({**GOOD, "name": ["bob"]}).encode(),
    "name leads out": json.dumps({**GOOD, "name": "../bob"}).encode(),
    "name is hidden": json.dumps({**GOOD, "name": ".bob"}).encode(),
    "grader is null": json.dumps({**GOOD, "grader": None}).encode(),
    "errors is a float": json.dumps({**GOOD, "errors": 1.5}).encode(),
    "exercise_seconds is a list": json.dumps({**GOOD, "exercise_seconds": [1, 2]}).encode(),
    "exercise_seconds holds text": json.dumps({**GOOD, "exercise_seconds": {"tensors": "slow"}}).encode(),
    "a field too many": json.dumps({**GOOD, "extra": 1}).encode(),
    "no score": json.dumps({k: v for k, v in GOOD.items() if k != "score"}).encode(),
    "a list": b"[1, 2, 3]",
    "a number": b"42",
    "nested deep": b"[" * 100000 + b"]" * 100000,
    "NUL bytes": b"\0" * 50,
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_ledger_line_is_ignored_and_the_others_are_kept(tmp_path, kind):
    ledger = Ledger(tmp_path)
    ledger.append(Record("alice", "dir:1", "g", 5.0, 5.0))
    with open(ledger.path, "ab") as f:
        f.write(DAMAGE[kind] + b"\n")
    ledger.append(Record("carol", "dir:3", "g", 1.0, 5.0))
    assert sorted(ledger.load()) == ["alice", "carol"]
    assert parse_record(json.dumps(GOOD).encode()) == Record(**GOOD)


def test_no_damage_to_a_line_makes_the_ledger_fail(tmp_path):
    """Random bytes, and a sound line with random bytes flipped, cut or doubled: load never raises."""
    import random

    rng = random.Random(13)
    sound = json.dumps(GOOD).encode()
    lines = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) for _ in range(300)]
    for _ in range(700):
        line = bytearray(sound)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(line))
            line[at] = rng.choice(b'{}[]":,0123456789.-etnrufals\\xff\x00 ' + bytes([rng.randrange(256)]))
        lines.append(bytes(line[: rng.randrange(len(line) + 1)] if rng.random() < 0.3 else line))
    Ledger(tmp_path).path.write_bytes(b"\n".join(lines))
    for record in Ledger(tmp_path).load().values():  # whatever survives is a sound record
        assert parse_record(json.dumps(record.__dict__).encode()) == record


@pytest.mark.parametrize("kind", ["not UTF-8", "score is a string", "name is a list", "nested deep"])
def test_a_rerun_over_a_damaged_ledger_grades_that_student_again_and_each_once(course, tmp_path, kind):
    cls = copy_class({n: "reference" for n in NAMES}, tmp_path / "class")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, grade_args(course, cls, out)).exit_code == 0
    lines = (out / "ledger.jsonl").read_bytes().splitlines()
    bob = json.loads(lines[1])
    assert bob["name"] == "bob"
    lines[1] = json.dumps({**bob, "score": "5"}).encode() if kind == "score is a string" else DAMAGE[kind]
    (out / "ledger.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0, rerun.output
    assert "graded 1, skipped 2 already graded" in rerun.output
    assert_each_graded_once(out, NAMES)


def test_a_damaged_results_file_is_graded_again(course, tmp_path):
    cls = copy_class({n: "reference" for n in NAMES}, tmp_path / "class")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, grade_args(course, cls, out)).exit_code == 0
    (out / "bob" / "results.json").write_bytes(b'{"tests": [{"score": "lots"}], "\xff')
    (out / "carol" / "results.json").write_text('{"tests": 7}')
    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0 and "graded 2, skipped 1 already graded" in rerun.output, rerun.output
    assert_each_graded_once(out, NAMES)


# --- the parent dies ---

def _living(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _command(process: psutil.Process) -> str:
    """A living process's command line ('' once it is gone)."""
    try:
        return " ".join(process.cmdline()) if _living(process) else ""
    except psutil.Error:
        return ""


def _start_slow_class(course, tmp_path: Path, jobs: int = 2, **popen) -> tuple[subprocess.Popen, Path, Path, list[str]]:
    names = [f"student{i}" for i in range(6)]
    cls = tmp_path / "class"
    for name in names:
        student(cls / name, extra=slow_one_hot(1.0))
    out = tmp_path / "out"
    command = [sys.executable, "-c", "from torchgrade.cli import main; main()",
               *grade_args(course, cls, out, "-j", str(jobs))]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen), cls, out, names


def _wait_for_grading(grader: subprocess.Popen, jobs: int = 2) -> list[psutil.Process]:
    """The grader's descendants, once each grading process runs a sandbox (grading is under way)."""
    parent = psutil.Process(grader.pid)
    deadline = time.monotonic() + 180
    while True:
        assert grader.poll() is None, grader.communicate()[1].decode()[-3000:]
        assert time.monotonic() < deadline, "the pool did not start grading in three minutes"
        descendants = parent.children(recursive=True)
        lines = [line for line in map(_command, descendants) if line and os.path.basename(line.split()[0]) != "bwrap"]
        # a sandbox worker: forked by the zygote (bubblewrap), or started by the portable backend (level process)
        zygotes = [line for line in lines if "torchgrade.sandbox.zygote" in line or "torchgrade.sandbox.portable" in line]
        pool = jobs == 1 or any("forkserver" in line for line in lines)  # (-j 1: no pool; the parent's own sandbox)
        if len(zygotes) >= jobs and pool:
            time.sleep(1.0)  # let the workers be in the middle of a submission
            return parent.children(recursive=True)
        time.sleep(0.1)


@pytest.mark.parametrize("sig, jobs", [(signal.SIGKILL, 2), (signal.SIGTERM, 2), (signal.SIGKILL, 1)],
                         ids=["SIGKILL-j2", "SIGTERM-j2", "SIGKILL-j1"])
def test_every_process_the_grader_started_dies_with_it_and_the_rerun_grades_each_once(course, tmp_path, sig, jobs):
    grader, cls, out, names = _start_slow_class(course, tmp_path, jobs)
    try:
        descendants = _wait_for_grading(grader, jobs)
        # -j 2: the fork server, two workers, their sandboxes; -j 1: this process's sandbox
        assert len(descendants) >= (5 if jobs > 1 else 1)
        os.kill(grader.pid, sig)
        killed_at = time.monotonic()
        alive = descendants
        while alive and time.monotonic() - killed_at < 5.0:
            alive = [p for p in alive if _living(p)]
            time.sleep(0.05)
        assert not alive, [(p.pid, p.name(), p.cmdline()[:4]) for p in alive]
    finally:
        grader.kill()
        _, stderr = grader.communicate()
    if sig == signal.SIGTERM:
        assert grader.returncode == 143 and b"Traceback" not in stderr, stderr.decode()[-3000:]

    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0, rerun.output
    assert_each_graded_once(out, names)


#: A submission whose one_hot starts 60 processes that leave its session, renamed {mark}, then waits.
FORK_AND_WAIT = """
    import ctypes as _ctypes, os as _os, time as _time

    def one_hot(*args, **kwargs):
        for _ in range(60):
            try:
                pid = _os.fork()
            except OSError:
                break
            if pid == 0:
                try:
                    _os.setsid()
                    _ctypes.CDLL(None).prctl(15, b"{mark}", 0, 0, 0)
                    _time.sleep(600)
                finally:
                    _os._exit(0)
        _time.sleep(600)
"""


def _marked(mark: str) -> list[int]:
    """Live processes whose name (/proc/PID/comm) is `mark`."""
    found = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] == mark and _living(process):
            found.append(process.pid)
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("level", isolation.LEVELS)
def test_a_killed_grader_takes_its_sandbox_and_all_a_submission_started_with_it(course, tmp_path, level, sig):
    """The grader ended by a signal it cannot clean up after (a CI job's `timeout`, the OOM killer): its
    sandbox and every process the submission started die with it, at every level. (At level process the
    launcher, its worker and 160 processes of a submission once lived on for 77 minutes, re-parented to init.)"""
    simulate = level == levels.LEVEL and level not in _levels_here()  # (see tests/levels.py)
    if level not in _levels_here() and not simulate:
        pytest.skip(f"this machine has no isolation {level}")
    mark = "tgk" + os.urandom(6).hex()
    student(tmp_path / "class" / "mallory", extra=FORK_AND_WAIT.replace("{mark}", mark))
    command = [sys.executable, "-c", (levels.IN_CHILD if simulate else "") + "from torchgrade.cli import main; main()",
               *grade_args(course, tmp_path / "class", tmp_path / "out", "-j", "1")]
    tests = str(Path(__file__).parent)
    grader = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, isolation.ENV_VAR: level,
                                   "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])})
    try:
        deadline = time.monotonic() + 180
        while len(_marked(mark)) < 60:
            assert grader.poll() is None, grader.communicate()[1].decode()[-3000:]
            assert time.monotonic() < deadline, "the submission's processes did not start in three minutes"
            time.sleep(0.1)
        descendants = psutil.Process(grader.pid).children(recursive=True)
        assert len(descendants) > 1
        os.kill(grader.pid, sig)
        killed_at = time.monotonic()
        alive = [*descendants, *_processes(_marked(mark))]
        while alive and time.monotonic() - killed_at < 5.0:
            alive = [p for p in alive if _living(p)]
            time.sleep(0.05)
        assert not alive, [(p.pid, _command(p)[:120]) for p in alive]
    finally:
        grader.kill()
        grader.communicate()
        for pid in _marked(mark):  # (what a failure left)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _processes(pids: list[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):  # (gone since it was listed)
            found.append(psutil.Process(pid))
    return found


@functools.cache
def _levels_here() -> tuple[str, ...]:
    from torchgrade.sandbox import host

    found = []
    for level in isolation.LEVELS:
        try:
            host.choose_level(level)
        except host.IsolationError:
            continue
        found.append(level)
    return tuple(found)


def test_ctrl_c_twice_ends_the_run_with_one_message_and_no_traceback(course, tmp_path):
    # its own process group, as a shell's job: Ctrl-C sends SIGINT to every process of the group
    grader, cls, out, names = _start_slow_class(course, tmp_path, start_new_session=True)
    try:
        _wait_for_grading(grader)
        os.killpg(grader.pid, signal.SIGINT)
        time.sleep(0.3)
        with contextlib.suppress(ProcessLookupError):  # the group may be gone already
            os.killpg(grader.pid, signal.SIGINT)
        _, stderr = grader.communicate(timeout=60)
    finally:
        grader.kill()
        grader.wait()
    text = stderr.decode()
    assert grader.returncode == 130, text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert "interrupted; every submission graded so far is recorded" in text



def test_pool_workers_leave_ctrl_c_to_the_parent_and_watch_it():
    """A Ctrl-C reaches every process of the terminal's group: a worker ignores it (the parent ends the
    pool), so no worker prints a KeyboardInterrupt of its own, idle or busy."""
    from torchgrade.classroom.executors.local import Pool

    pool = Pool(1)._pool(1)
    try:
        handler = pool.submit(signal.getsignal, signal.SIGINT).result(timeout=120)
        threads = pool.submit(_thread_names).result(timeout=60)
    finally:
        pool.shutdown()
    assert handler == signal.SIG_IGN
    assert "torchgrade-parent-watch" in threads


def _thread_names() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate()]


def test_a_regrade_that_cannot_be_written_keeps_the_previous_results(course, tmp_path, monkeypatch):
    cls = copy_class({n: "reference" for n in NAMES}, tmp_path / "class")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, grade_args(course, cls, out)).exit_code == 0
    student(cls / "bob", "stub")  # bob hands in again; the disk is full when his new results go in
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name == ".bob.partial":
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    result = CliRunner().invoke(main, grade_args(course, cls, out))
    assert_one_line_exit_2(result, "No space left on device")
    monkeypatch.undo()
    assert json.loads((out / "bob" / "results.json").read_text())["score"] == FULL_MARKS  # the old ones, whole
    rerun = CliRunner().invoke(main, grade_args(course, cls, out))
    assert rerun.exit_code == 0 and "graded 1, skipped 2 already graded" in rerun.output, rerun.output
    assert json.loads((out / "bob" / "results.json").read_text())["score"] == 0.0
    assert ledger_names(out) == NAMES
