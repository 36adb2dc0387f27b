"""The portable sandbox backend, and the student path as macOS and Windows Pythons present it.

Neither system is here, so each is simulated in a subprocess by a ``sitecustomize`` that takes away
what that system lacks (and is handed on to the sandbox processes that Python starts):

- macOS: AF_UNIX ``SOCK_SEQPACKET`` sockets fail with EPROTONOSUPPORT, ``setrlimit(RLIMIT_AS)`` is
  refused with ValueError (as macOS refuses it);
- Windows: no ``os.fork``, ``os.register_at_fork``, ``os.setsid``, ``os.killpg``, ``os.geteuid``, no
  ``SOCK_SEQPACKET`` or descriptor passing, and no ``resource`` or ``fcntl`` modules.

What cannot be simulated here (a real macOS or Windows kernel, NTFS, Windows consoles) is left to the
project's own CI workflow (.github/workflows/student-path.yml), which the last tests here read.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import ROOT

from torchgrade.sandbox import host, isolation, portable
from torchgrade.sandbox.host import Died, Sandbox, Timeout

WORKFLOW = ROOT / ".github" / "workflows" / "student-path.yml"
#: The simulations take Linux's mechanisms away; on macOS and Windows (the CI workflow) the real thing runs.
on_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="simulates macOS and Windows on Linux")

_HANDS_ON = '''
# The sandbox processes this Python starts are simulated too: they find this folder first.
import subprocess as _subprocess
_popen_init = _subprocess.Popen.__init__
def _init(self, args, *rest, env=None, **kwargs):
    if env is not None and "PYTHONPATH" in env:
        env = dict(env, PYTHONPATH=_HERE + _os.pathsep + env["PYTHONPATH"])
    _popen_init(self, args, *rest, env=env, **kwargs)
_subprocess.Popen.__init__ = _init
'''

MACOS = '''
import errno, os as _os, socket, resource
_HERE = _os.path.dirname(_os.path.abspath(__file__))
_socketpair = socket.socketpair
def socketpair(family=socket.AF_UNIX, type=socket.SOCK_STREAM, proto=0):
    if type == socket.SOCK_SEQPACKET:
        raise OSError(errno.EPROTONOSUPPORT, "Protocol not supported")
    return _socketpair(family, type, proto)
socket.socketpair = socketpair
_setrlimit = resource.setrlimit
def setrlimit(kind, limits):
    if kind == resource.RLIMIT_AS:
        raise ValueError("current limit exceeds maximum limit")
    return _setrlimit(kind, limits)
resource.setrlimit = setrlimit
''' + _HANDS_ON

WINDOWS = '''
import os as _os, socket, sys
# Linux's torch registers at-fork hooks as it loads, Linux's psutil reads os functions Windows lacks
# (their Windows builds do neither): loaded first
import psutil, torch
_HERE = _os.path.dirname(_os.path.abspath(__file__))
for _name in ("fork", "forkpty", "register_at_fork", "setsid", "killpg", "getuid", "geteuid", "setresuid",
              "setresgid", "getpgid"):
    if hasattr(_os, _name):
        delattr(_os, _name)
for _name in ("SOCK_SEQPACKET", "send_fds", "recv_fds"):
    if hasattr(socket, _name):
        delattr(socket, _name)
sys.modules["resource"] = None
sys.modules["fcntl"] = None
''' + _HANDS_ON


def simulated(tmp_path: Path, system: str) -> dict[str, str]:
    """The environment of a Python that presents itself as `system` (see the module's docstring)."""
    folder = tmp_path / f"as-{system}"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text({"macos": MACOS, "windows": WINDOWS}[system])
    env = {k: v for k, v in os.environ.items() if k not in (isolation.ENV_VAR, "TORCHGRADE_LANG")}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)])
    env.setdefault("USERNAME", "student")  # every Windows session has it (getpass.getuser reads it)
    return env


def run_python(script: str, env: dict[str, str], timeout: float = 540) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout, stdin=subprocess.DEVNULL)


def torchgrade(*args: str, env: dict[str, str], timeout: float = 540) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchgrade.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def spy(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "spy.py").write_text(textwrap.dedent('''
        import os, time

        def nothing():
            print("nothing to do")
            return None

        def spin():
            while True:
                pass

        def hoard(chunk_mb):
            kept = []
            while len(kept) < 10_000:
                kept.append(bytearray(chunk_mb << 20))
                kept[-1][::4096] = b"x" * len(kept[-1][::4096])  # touched: resident, not only mapped
            return len(kept)

        def where():
            return {"cwd": os.getcwd(), "pid": os.getpid(), "ppid": os.getppid()}
    '''))
    return folder


def call(sandbox: Sandbox, name: str, *args, timeout: float = 60.0):
    return sandbox.run("spy", name, "call", args, {}, {}, timeout=timeout)["value"]


# --- one code path: TORCHGRADE_ISOLATION=process is the portable backend --------------------------

def test_level_process_is_the_portable_backend_with_a_process_per_worker(spy):
    sb = Sandbox(spy, level="process")
    try:
        assert isinstance(host.zygote("process"), portable.Spawner)
        facts = call(sb, "where")
        assert sb.isolation == "process"
        # Started by the grader (no fork server), through a launcher: killing its parent spares the grader.
        assert facts["ppid"] == sb.workers["spy"].pid != os.getpid()
        assert psutil.Process(facts["ppid"]).ppid() == os.getpid()
        assert Path(facts["cwd"]) == sb.workers["spy"].workdir
    finally:
        sb.close()


def test_a_process_is_started_ahead_only_while_a_module_is_yet_to_come(spy):
    """A sandbox told which modules it grades starts no process ahead after the last one's first worker (it
    would import torch for nothing, beside that module's checks); a worker started again after that (a crash,
    a timeout) is started when it is needed. One that does not know its modules always keeps one ahead."""
    sb = Sandbox(spy, level="process", modules={"spy"})
    try:
        call(sb, "nothing")
        assert host.zygote("process")._spare is None
        first = sb.workers["spy"].pid
        sb._retire("spy")
        assert call(sb, "where")["ppid"] != first and host.zygote("process")._spare is None
    finally:
        sb.close()
    sb = Sandbox(spy, level="process", modules={"spy", "another"})
    try:
        call(sb, "nothing")
        assert host.zygote("process")._spare is not None
    finally:
        sb.close()


def test_a_check_of_one_module_leaves_no_process_started_ahead(monkeypatch):
    """`torchgrade check conv` at level process (macOS, Windows): the one module's worker is the process
    started first, and no second one imports torch beside its checks."""
    from torchgrade.engine.config import load_assignment
    from torchgrade.engine.grading import grade_submission

    monkeypatch.setenv(isolation.ENV_VAR, "process")
    grade = grade_submission(ROOT / "reference", load_assignment(ROOT / "assignment.yaml"), device="cpu",
                             only=("conv.conv_output_size",))
    assert grade.isolation == "process" and grade.score == grade.max_score > 0
    assert host.zygote("process")._spare is None


def test_a_slow_check_is_killed_with_its_tree_and_the_next_gets_a_fresh_worker(spy):
    sb = Sandbox(spy, level="process")
    try:
        with pytest.raises(Timeout, match="timed out after 0.5 s"):
            call(sb, "spin", timeout=0.5)
        assert call(sb, "nothing") is None
    finally:
        sb.close()
    assert "nothing to do" in sb.output["spy.nothing"]


def test_a_killed_spare_is_replaced(spy):
    sb = Sandbox(spy, level="process")
    try:
        call(sb, "nothing")
        spawner = host.zygote("process")
        spare = spawner._spare
        assert spare is not None
        spare.process.kill()  # as if something had killed the process started ahead
        sb._retire("spy")
        assert call(sb, "where")["pid"] != spare.pid
    finally:
        sb.close()


def test_a_worker_that_kills_its_parent_process_costs_only_its_own_check(spy):
    (spy / "spy.py").write_text((spy / "spy.py").read_text() + textwrap.dedent('''
        import signal

        def kill_parent():
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(5)
    '''))
    sb = Sandbox(spy, level="process")
    try:
        with pytest.raises(Died):
            call(sb, "kill_parent")
        assert call(sb, "nothing") is None  # the grader (this process) lives on, and so does grading
    finally:
        sb.close()


def test_the_spawner_signals_and_reaps_none_but_its_own_workers(spy):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        spawner = host.zygote("process")
        assert spawner.signal_group(bystander.pid, "pause") == {"ok": False}
        assert spawner.reap(bystander.pid) is None
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_frames_over_the_limit_are_refused_not_buffered():
    read, write = os.pipe()
    with os.fdopen(write, "wb") as w:
        w.write(portable._HEADER.pack(1 << 40))
    with os.fdopen(read, "rb") as r, pytest.raises(OSError, match="bad message length"):
        portable.read_frame(r, 1024)


# --- macOS and Windows, simulated --------------------------------------------------------------

@pytest.mark.heavy
@on_linux
def test_macos_reference_scores_full_marks_with_seqpacket_and_rlimit_as_refused(tmp_path):
    env = simulated(tmp_path, "macos")
    probe = run_python("""
        import socket, resource
        from torchgrade.sandbox import isolation
        try:
            socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            print("seqpacket works")
        except OSError as e:
            print("seqpacket refused", e.errno)
        print([p.level for p in isolation.plans(None)])
    """, env)
    assert "seqpacket refused" in probe.stdout and "['process']" in probe.stdout, probe.stdout + probe.stderr
    report = tmp_path / "report"
    done = torchgrade("check", "--path", "reference", "--device", "cpu", "--report", str(report), env=env)
    results = json.loads((report / "results.json").read_text())
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["score"] == results["extra_data"]["max_score"] > 0, done.stdout
    assert results["extra_data"]["isolation"] == "process"
    assert "grading with isolation" not in done.stderr  # no fallback notice: process is the only level there


@on_linux
def test_macos_the_memory_limit_holds_by_the_watch_when_rlimit_as_is_refused(tmp_path, spy):
    done = run_python(f"""
        from pathlib import Path
        from torchgrade.sandbox.host import Died, Limits, Sandbox
        sb = Sandbox(Path({str(spy)!r}), Limits(memory_bytes=200 * 1024**2))
        try:
            sb.run("spy", "hoard", "call", (16,), {{}}, {{}}, timeout=120)
            print("not stopped")
        except Died as e:
            print("stopped:", e)
        finally:
            sb.close()
        print(sb.isolation)
    """, simulated(tmp_path, "macos"))
    assert "stopped: the sandbox process was killed by SIGKILL" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().endswith("process")


@pytest.mark.heavy
@on_linux
def test_windows_every_engine_module_and_every_command_imports(tmp_path):
    env = simulated(tmp_path, "windows")
    # One Python for all of it (each start imports torch, as the simulation must): every module imported, then
    # every command's --help through click's own runner, as `torchgrade COMMAND --help` runs it.
    done = run_python("""
        import importlib, os, pkgutil
        assert not hasattr(os, "fork") and not hasattr(os, "register_at_fork")
        import torchgrade
        failed = []
        for info in pkgutil.walk_packages(torchgrade.__path__, "torchgrade."):
            if info.name.endswith(".dask"):
                continue  # the optional cluster extra
            try:
                importlib.import_module(info.name)
            except Exception as e:
                failed.append(f"{info.name}: {type(e).__name__}: {e}")
        from click.testing import CliRunner
        from torchgrade.cli import main
        for command in [[], *[[name] for name in main.commands]]:
            helped = CliRunner().invoke(main, [*command, "--help"], prog_name="torchgrade")
            if helped.exit_code != 0 or "Usage: torchgrade" not in helped.output:
                failed.append(f"torchgrade {' '.join(command)} --help: {helped.exit_code} {helped.output[-500:]}")
        print(len(main.commands), "commands")
        print("\\n".join(failed) or "all imported")
    """, env)
    from torchgrade.cli import main

    assert done.stdout.split() == [str(len(main.commands)), "commands", "all", "imported"], done.stdout + done.stderr


@pytest.mark.heavy
@on_linux
def test_windows_the_student_path_grades_through_the_portable_backend(tmp_path, spy):
    env = simulated(tmp_path, "windows")
    done = run_python(f"""
        from pathlib import Path
        from torchgrade.sandbox import host, isolation
        from torchgrade.sandbox.host import Sandbox, Timeout
        print([p.level for p in isolation.plans(None)])
        sb = Sandbox(Path({str(spy)!r}))
        try:
            print(sb.run("spy", "where", "call", (), {{}}, {{}}, timeout=60)["value"]["cwd"] != "")
            try:
                sb.run("spy", "spin", "call", (), {{}}, {{}}, timeout=0.5)
            except Timeout as e:
                print("timeout:", e)
            print(sb.run("spy", "nothing", "call", (), {{}}, {{}}, timeout=60)["value"])
        finally:
            sb.close()
        print(sb.isolation)
    """, env)
    lines = done.stdout.strip().splitlines()
    assert lines == ["['process']", "True", "timeout: timed out after 0.5 s (the time limit of one check)", "None",
                     "process"], done.stdout + done.stderr
    report = tmp_path / "report"
    checked = torchgrade("check", "tensors", "parallel", "--path", "reference", "--device", "cpu", "--report",
                         str(report), env=env)
    results = json.loads((report / "results.json").read_text())
    assert checked.returncode == 0 and results["score"] == results["extra_data"]["max_score"] > 0, checked.stdout + checked.stderr


# --- bad input: not even the portable backend can start ----------------------------------------

@pytest.mark.parametrize("breakage, missing", [
    ("import sys; sys.modules['_multiprocessing'] = None", "_multiprocessing"),
    ("import sys; sys.modules['psutil'] = None", "psutil"),
], ids=["no-multiprocessing", "no-psutil"])
def test_a_python_that_lacks_what_the_sandbox_needs_gets_one_line_and_exit_2(tmp_path, breakage, missing):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(breakage + "\n")
    env = {k: v for k, v in os.environ.items() if k != isolation.ENV_VAR}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)])
    done = torchgrade("check", "--path", "reference", "--device", "cpu", "--report", str(tmp_path / "r"), env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    line, = done.stderr.strip().splitlines()
    assert line.startswith("torchgrade: error: the sandbox cannot start on this computer:") and missing in line


def test_a_sandbox_process_that_cannot_start_gets_one_line_and_exit_2(tmp_path):
    """Python can start no process here (as on a platform without fork or spawn)."""
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent("""
        import errno, subprocess
        def _refuse(self, *args, **kwargs):
            raise OSError(errno.ENOSYS, "Function not implemented")
        subprocess.Popen._execute_child = _refuse
    """))
    env = {k: v for k, v in os.environ.items() if k != isolation.ENV_VAR}
    env.update(PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]), **{isolation.ENV_VAR: "process"})
    done = torchgrade("check", "--path", "reference", "--device", "cpu", "--report", str(tmp_path / "r"), env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    line, = done.stderr.strip().splitlines()
    assert "the sandbox cannot start on this computer" in line and "Function not implemented" in line, line


# --- the project's own CI runs the student path on all three systems ---------------------------

def test_the_workflow_runs_the_student_path_on_linux_macos_and_windows():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    job = jobs["student-path"]
    matrix = job["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest", "windows-latest"}
    assert job["runs-on"] == "${{ matrix.os }}"
    assert job["strategy"]["fail-fast"] is False  # one system's failure must not hide another's
    runs = [step.get("run", "") for step in job["steps"]]
    uses = [step.get("uses", "") for step in job["steps"]]
    assert any(u.startswith("actions/checkout@") for u in uses) and any(u.startswith("actions/setup-python@") for u in uses)
    install = next(r for r in runs if "pip install" in r and "torch" in r)
    assert "--index-url" in install and "/whl/cpu" in install  # the CPU build: not gigabytes of CUDA
    assert any("torchgrade check --path reference" in r for r in runs)
    stubs = next(r for r in runs if "torchgrade check --path exercises" in r)
    assert "1" in stubs  # the stubs must fail their checks: exit status 1 is the expected one
    assert any("tests/test_portable.py" in r for r in runs)
    bundle = next(r for r in runs if "torchgrade bundle" in r)  # one command into a fresh environment
    assert "-m venv" in bundle and "pip install -e dist/student --extra-index-url" in bundle and "/whl/cpu" in bundle
    assert 'test "$status" -eq 1' in bundle
    env = job.get("env", {})
    assert env.get("TORCHGRADE_ISOLATION") in (None, "process")
    for step in job["steps"]:  # bash on every runner (Windows' default shell is PowerShell)
        if "run" in step:
            assert step.get("shell", workflow.get("defaults", {}).get("run", {}).get("shell")) == "bash", step


def test_the_existing_grade_class_workflow_is_left_alone():
    assert yaml.safe_load((ROOT / ".github" / "workflows" / "grade-class.yml").read_text())["jobs"]


@on_linux
def test_a_tree_that_forks_while_it_is_being_stopped_is_killed_whole(monkeypatch):
    """A stop takes hold after kill() returns: under load a fork bomb forked in that gap, and children
    that had left its session outlived the kill. Here every stop is made late on purpose."""
    code = ("import os, time\nwhile True:\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n"
            "        os._exit(0)\n    time.sleep(0.005)\n")
    bomb = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(0.3)
    real = psutil.Process.suspend

    def late(process):
        def stop():
            with contextlib.suppress(psutil.Error):
                real(process)
        threading.Timer(0.1, stop).start()

    monkeypatch.setattr(psutil.Process, "suspend", late)
    try:
        portable.kill_tree(bomb.pid)
        time.sleep(0.3)  # what the kill missed would still be running now
        left = [p for p in psutil.process_iter(["cmdline", "status"])
                if p.info["cmdline"] == [sys.executable, "-c", code] and p.info["status"] != psutil.STATUS_ZOMBIE]
    finally:
        monkeypatch.undo()
        for p in psutil.process_iter(["cmdline"]):
            if p.info["cmdline"] == [sys.executable, "-c", code]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        bomb.wait()
    assert left == []


def test_the_host_reads_frames_up_to_the_wire_formats_limit():
    """The portable host keeps its own copy of the limit (importing wire would import torch into a
    process that only starts workers); the two must not drift."""
    from torchgrade.sandbox import portable, wire

    assert portable.MAX_FRAME_BYTES == wire.MAX_FRAME_BYTES
