"""The sandbox's mechanisms, one by one: what a submission sees, its limits, what it leaves behind.

A tiny "spy" module stands in for a submission: its functions report, as plain data, what they
can see and do from inside a worker. Each test runs at every isolation level this machine has
(bubblewrap, an unprivileged user, plain processes); a level that is not available is skipped.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import tempfile
import time
import uuid
from pathlib import Path

import msgpack
import pytest
import torch
from conftest import ROOT

from torchgrade.engine.grading import grade_submission
from torchgrade.engine.results import results_document
from torchgrade.sandbox import host, inbox, isolation, wire
from torchgrade.sandbox.host import BadReply, Died, Limits, Sandbox, Timeout, checked

SPY = '''
import os, signal, socket, sys, time

def facts():
    def visible(path):
        try:
            return sorted(os.listdir(path))
        except OSError as e:
            return type(e).__name__
    try:
        os.kill(os.getppid(), 0)
        signal_parent = "allowed"
    except OSError as e:
        signal_parent = type(e).__name__
    return {"uid": os.getuid(), "cwd": os.getcwd(), "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR"),
            "env": sorted(os.environ), "file": os.path.abspath(__file__), "signal_parent": signal_parent,
            "reference": visible(REFERENCE), "checks": visible(CHECKS), "host_tmp": os.path.exists(HOST_FILE),
            "inbox": visible(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))}

def shout(megabytes):
    for _ in range(megabytes):
        print("x" * (1 << 20))
    return "done"

def hoard(chunk_mb):
    kept = []
    try:
        while len(kept) < 10_000:
            kept.append(bytearray(chunk_mb << 20))
    except MemoryError:
        pass
    return len(kept) * chunk_mb

def write_big(megabytes):
    try:
        with open("big.bin", "wb") as f:
            for _ in range(megabytes):
                f.write(b"\\0" * (1 << 20))
                f.flush()
    except OSError as e:
        return [type(e).__name__, os.path.getsize("big.bin")]
    return ["no error", os.path.getsize("big.bin")]

def fork_many(n):
    started = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
    return started

def collector():
    import gc
    return [gc.isenabled(), gc.get_freeze_count()]

def spin():
    while True:
        pass

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "done"

def daemon(name):
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            import ctypes
            ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)
            os.write(told, b"!")
            time.sleep(60)
        os._exit(0)
    os.waitpid(pid, 0)
    os.read(ready, 1)  # the daemon has its name
    return "started"

def ticker(path):
    import threading
    def tick():
        while True:
            with open(path, "a") as f:
                f.write(".")
            time.sleep(0.01)
    threading.Thread(target=tick, daemon=True).start()
    return _first_tick(path)

def detached_ticker(path):
    if os.fork() == 0:
        os.setsid()  # out of the worker's process group
        while True:
            with open(path, "a") as f:
                f.write(".")
            time.sleep(0.01)
    return _first_tick(path)

def _first_tick(path):
    deadline = time.monotonic() + 10  # on a busy machine the ticker may take a while to start
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    return "ticking"

def nothing():
    print("nothing to do")
    return None

POISONED = False

def poison():
    global POISONED
    POISONED = True
    print("poisoned")

def dies_if_poisoned():
    if POISONED:
        os._exit(3)
    print("alive")
'''


def available_levels() -> list[str]:
    found = []
    for level in isolation.LEVELS:
        try:
            host.zygote(level)
        except host.IsolationError:
            continue
        found.append(level)
    return found


LEVELS = available_levels()


@pytest.fixture(params=isolation.LEVELS)
def level(request):
    if request.param not in LEVELS:
        pytest.skip(f"isolation {request.param} is not available on this machine")
    return request.param


@pytest.fixture
def spy(tmp_path):
    """A submission folder holding spy.py, and a file in the host's /tmp it must not see."""
    host_file = Path(f"/tmp/torchgrade-test-{uuid.uuid4().hex}")
    host_file.write_text("host only")
    folder = tmp_path / "submission"
    folder.mkdir()
    constants = (f"REFERENCE = {str(ROOT / 'reference')!r}\nCHECKS = {str(ROOT / 'graders' / 'checks')!r}\n"
                 f"HOST_FILE = {str(host_file)!r}\n")
    (folder / "spy.py").write_text(constants + SPY)
    (folder / "bystander.py").write_text("print('bystander loaded')\n\ndef nothing():\n    return None\n")
    yield folder
    host_file.unlink()


def call(sandbox: Sandbox, name: str, *args, timeout: float = 30.0):
    reply = sandbox.run("spy", name, "call", args, {}, {}, timeout=timeout)
    return reply["value"]


def named(name: str) -> list[int]:
    """Running processes of that name (a zombie is dead: where init does not reap, one killed stays listed)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name \
                    and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(pid))
        except (OSError, IndexError):
            pass
    return found


def test_a_worker_sees_a_scrubbed_environment_and_a_private_working_folder(level, spy, monkeypatch):
    monkeypatch.setenv("TORCHGRADE_TEST_TOKEN", "secret")
    sb = Sandbox(spy, level=level)
    try:
        facts = call(sb, "facts")
    finally:
        sb.close()
    # (LC_CTYPE: Python sets it itself at start where no locale is set, PEP 538; not the host's)
    allowed = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PYTHONPATH",
               "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "HOME", "OMP_NUM_THREADS", "TMPDIR", "USER", "LOGNAME"}
    assert set(facts["env"]) <= allowed
    assert facts["home"] == facts["tmpdir"] == facts["cwd"]
    assert os.path.dirname(facts["file"]) != facts["cwd"]  # it runs a staged copy, from another folder
    assert sb.isolation == level


def test_under_bubblewrap_a_worker_sees_neither_the_reference_nor_the_checks_nor_the_hosts_tmp(spy):
    if "bwrap" not in LEVELS:
        pytest.skip("bubblewrap is not available on this machine")
    sb = Sandbox(spy, level="bwrap")
    try:
        facts = call(sb, "facts")
    finally:
        sb.close()
    assert facts["reference"] == "FileNotFoundError"
    assert facts["checks"] == "FileNotFoundError"  # nothing of the course but its probes is there
    assert facts["host_tmp"] is False
    assert facts["file"].startswith(isolation.INSIDE + "/")
    if facts["uid"] != 0:
        assert facts["inbox"] in ("PermissionError", [])  # other submissions' folders cannot be listed
    else:  # bubblewrap could not switch users here: root may list the inbox, which holds only the staged
        # folders of submissions this process has open (one at a time when a class is graded)
        assert isinstance(facts["inbox"], list) and all(name.startswith("s") for name in facts["inbox"])


def test_as_root_workers_run_as_a_user_of_their_own_that_cannot_signal_the_zygote(level, spy):
    if os.geteuid() != 0 or level == "process":
        pytest.skip("workers switch user only when the grader runs as root (bwrap or unprivileged-user)")
    sb = Sandbox(spy, level=level)
    try:
        facts = call(sb, "facts")
    finally:
        sb.close()
    if sb._zygote.plan.user is None:
        pytest.skip("this machine's bubblewrap could not switch users (see the stderr note)")
    assert facts["uid"] == isolation.sandbox_user()[0] != 0
    assert facts["signal_parent"] == "PermissionError"


def test_student_code_runs_with_the_cyclic_collector_on_over_a_frozen_torch(level, spy):
    """torch was imported with the collector off and frozen (warmup.importing: a fifth of its import
    time otherwise); a student's cyclic garbage is still collected."""
    sb = Sandbox(spy, level=level)
    try:
        enabled, frozen = call(sb, "collector")
    finally:
        sb.close()
    assert enabled is True
    assert frozen > 100_000  # torch's objects and the rest imported before any student code


def test_printed_output_is_cut_at_the_budget_and_the_report_keeps_its_tail(level, spy):
    sb = Sandbox(spy, Limits(output_bytes=100_000), level=level)
    try:
        assert call(sb, "shout", 20) == "done"  # 20 MB printed: the call itself succeeds
        workdir = sb.workers["spy"].workdir
        assert 100_000 <= (workdir / "shout.output.log").stat().st_size < 101_000
    finally:
        sb.close()
    kept = sb.output["spy.shout"]
    assert len(kept) < host.OUTPUT_KEEP_BYTES + 200
    assert "[output cut here" in kept and "earlier bytes cut" in kept


def test_memory_is_capped_per_worker(level, spy):
    sb = Sandbox(spy, Limits(memory_bytes=256 * 1024**2), level=level)
    try:
        got = call(sb, "hoard", 16)
    finally:
        sb.close()
    assert 0 < got <= 256


def test_files_are_capped_in_size(level, spy):
    sb = Sandbox(spy, Limits(file_bytes=2 * 1024**2), level=level)
    try:
        assert call(sb, "write_big", 5) == ["OSError", 2 * 1024**2]
    finally:
        sb.close()


def test_cpu_time_is_capped_and_the_message_says_so(level, spy):
    sb = Sandbox(spy, Limits(cpu_seconds=1), level=level)
    try:
        with pytest.raises(Died, match="CPU-time limit"):
            call(sb, "spin", timeout=30)
    finally:
        sb.close()


def test_each_check_has_the_whole_cpu_time_limit_though_a_worker_serves_many(level, spy):
    sb = Sandbox(spy, Limits(cpu_seconds=1), level=level)
    try:
        assert call(sb, "nothing") is None  # (what the worker's first request costs, such as starting the watch)
        worker = sb.workers["spy"]
        for _ in range(3):  # 1.8 s of CPU in all, 0.6 s a request
            assert call(sb, "burn", 0.6) == "done"
            assert sb.workers["spy"] is worker
    finally:
        sb.close()


def test_a_slow_call_times_out_and_the_next_one_gets_a_fresh_worker(level, spy):
    sb = Sandbox(spy, level=level)
    try:
        with pytest.raises(Timeout, match="timed out after 0.5 s"):
            call(sb, "spin", timeout=0.5)
        assert call(sb, "nothing") is None
    finally:
        sb.close()


def test_processes_are_capped_for_a_sandbox_user_of_its_own(level, spy):
    if os.geteuid() != 0 or level == "process":
        pytest.skip("the process cap applies to a sandbox user of its own (a grader running as root)")
    sb = Sandbox(spy, Limits(processes=40), level=level)
    try:
        if sb.isolation == "bwrap" and host.zygote("bwrap").plan.user is None:
            pytest.skip("this machine's bubblewrap could not switch users")
        assert call(sb, "fork_many", 200) < 40
    finally:
        sb.close()


def test_a_daemon_does_not_outlive_its_worker(level, spy):
    name = "tgd" + uuid.uuid4().hex[:12]
    sb = Sandbox(spy, level=level)
    try:
        assert call(sb, "daemon", name) == "started"
        assert named(name), "the daemon should be running while its worker lives"
        sb._retire("spy")  # the worker is killed: its orphan goes with it
        assert named(name) == []
    finally:
        sb.close()


def test_nothing_survives_the_submission(level, spy):
    name = "tgd" + uuid.uuid4().hex[:12]
    sb = Sandbox(spy, level=level)
    call(sb, "daemon", name)
    call(sb, "fork_many", 5)
    sb.close()
    assert named(name) == []
    assert not sb._home.exists()


@pytest.mark.parametrize("ticker", ["ticker", "detached_ticker"])
def test_a_worker_is_stopped_while_another_module_runs_so_what_it_left_running_cannot_compete(level, spy, ticker):
    sb = Sandbox(spy, level=level)
    try:
        call(sb, ticker, "ticks.txt")
        ticks = sb.workers["spy"].workdir / "ticks.txt"
        assert sb.run("bystander", "nothing", "call", (), {}, {}, timeout=30)["value"] is None
        time.sleep(0.05)  # a write under way when the stop came ends first
        size = ticks.stat().st_size
        time.sleep(0.3)
        assert ticks.stat().st_size == size  # stopped while the other module's worker ran, thread or process
    finally:
        sb.close()
    assert sb.output["bystander.py while importing"].strip() == "bystander loaded"


def test_a_module_whose_code_left_nothing_running_keeps_its_worker_while_another_module_runs(level, spy):
    """Paused, not ended: the module's next check needs no new worker (at level process, a new Python that
    imports torch again; its launcher's child, the worker itself, was once taken for a process left running)."""
    sb = Sandbox(spy, level=level)
    try:
        call(sb, "nothing")
        first = sb.workers["spy"]
        assert sb.run("bystander", "nothing", "call", (), {}, {}, timeout=30)["value"] is None
        assert sb.workers["spy"] is first and first.paused
        assert call(sb, "nothing") is None
        assert sb.workers["spy"] is first and not first.paused
    finally:
        sb.close()


def test_one_module_shares_a_worker_and_a_failure_after_another_target_is_tried_again_alone(level, spy):
    sb = Sandbox(spy, level=level)
    try:
        call(sb, "nothing")
        first = sb.workers["spy"]
        call(sb, "poison")
        assert sb.workers["spy"] is first  # every target of the module, one process
        assert call(sb, "dies_if_poisoned") is None  # died where poison ran before; alone it passes
        assert sb.workers["spy"] is not first
        assert call(sb, "dies_if_poisoned") is None  # the fresh worker is kept
    finally:
        sb.close()
    assert set(sb.output) >= {"spy.nothing", "spy.poison", "spy.dies_if_poisoned"}
    assert "poisoned" in sb.output["spy.poison"] and "poisoned" not in sb.output["spy.nothing"]


def test_a_killed_zygote_is_replaced_and_the_other_targets_go_on(level, spy):
    if level == "process":
        pytest.skip("the portable backend has no zygote (tests/test_portable.py: a killed spare is replaced)")
    sb = Sandbox(spy, level=level)
    try:
        call(sb, "nothing")
        host.zygote(level).process.kill()  # as if a submission had killed it
        assert call(sb, "nothing") is None
        assert call(sb, "facts")["cwd"]
    finally:
        sb.close()


def test_a_submission_graded_after_the_inbox_went_away_is_staged_in_a_new_one(level, spy):
    """Whatever removes a live grader's inbox (seen once in CI, a class's grade -j 2: cause not found), the
    next module and the next submission get a new inbox and a zygote bound to it, not a grader error
    saying their folder "is not in the inbox"."""
    first = Sandbox(spy, level=level)
    try:
        assert call(first, "nothing") is None
        inbox.remove(Path(inbox.path()))
        assert first.run("bystander", "nothing", "call", (), {}, {}, timeout=30)["value"] is None
    finally:
        first.close()
    second = Sandbox(spy, level=level)
    try:
        assert call(second, "facts")["cwd"]
    finally:
        second.close()


def test_the_zygote_signals_none_but_its_own_workers(spy):
    forking = [level for level in LEVELS if level != "process"]  # process: tests/test_portable.py says it of its own
    if not forking:
        pytest.skip("no zygote level is available on this machine")
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        zygote = host.zygote(forking[-1])
        for op in ("pause", "reap"):
            assert "error" in zygote._ask({"op": op, "pid": bystander.pid})
        for pid in (0, 1, -1):
            assert "error" in zygote._ask({"op": "pause", "pid": pid})
        state = Path(f"/proc/{bystander.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state != "T" and bystander.poll() is None  # neither stopped nor killed
    finally:
        bystander.kill()
        bystander.wait()


def test_staging_copies_regular_files_only(tmp_path, monkeypatch):
    source = tmp_path / "source"
    (source / "pkg" / "__pycache__").mkdir(parents=True)
    (source / "tensors.py").write_text("x = 1\n")
    (source / "pkg" / "helper.py").write_text("y = 2\n")
    (source / "pkg" / "__pycache__" / "helper.pyc").write_bytes(b"\0")
    (source / "big.bin").write_bytes(b"\0" * 5000)
    (source / "link.py").symlink_to(ROOT / "reference" / "tensors.py")
    (source / "linked_dir").symlink_to(ROOT / "reference")
    os.mkfifo(source / "pipe")
    monkeypatch.setattr(inbox, "MAX_STAGED_BYTES", 1000)
    inbox.stage(source, tmp_path / "staged")
    staged = sorted(str(p.relative_to(tmp_path / "staged")) for p in (tmp_path / "staged").rglob("*"))
    assert staged == ["pkg", "pkg/helper.py", "tensors.py"]


def test_an_unknown_isolation_level_is_refused(monkeypatch, spy):
    monkeypatch.setenv(isolation.ENV_VAR, "chroot")
    with pytest.raises(isolation.IsolationError, match="TORCHGRADE_ISOLATION='chroot'"):
        Sandbox(spy)


def test_the_grade_records_the_isolation_level(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="cpu", only=("conv.conv_output_size",))
    assert g.isolation == host.isolation_level(isolation.requested_level()) in isolation.LEVELS
    assert results_document(g, assignment)["extra_data"]["isolation"] == g.isolation


# --- what comes back ---------------------------------------------------------------------------------

def test_plain_data_crosses_the_boundary_as_it_was():
    base = torch.arange(24.0).reshape(4, 6)
    value = {"view": base[:, ::2], "transposed": base.t(), "empty": torch.zeros(0, 3), "scalar": torch.tensor(3),
             "leaf": torch.ones(2, requires_grad=True), "half": torch.ones(2, dtype=torch.bfloat16),
             "conj": torch.tensor([1 + 2j]).conj(), "flags": torch.tensor([True, False]),
             "tuple": (1, 2.5, None, "s", b"b", 1 - 1j), "list": [torch.Size([2, 3]), torch.int64, torch.device("cpu"), torch.device("meta")],
             7: {"nested": [[]]}}
    back = wire.decode(wire.encode(value))
    assert list(back) == list(value)
    for key in ("view", "transposed", "empty", "scalar", "leaf", "half", "conj", "flags"):
        got, want = back[key], value[key]
        assert type(got) is torch.Tensor and got.stride() == want.stride() and got.requires_grad == want.requires_grad
        torch.testing.assert_close(got, want.resolve_conj(), rtol=0, atol=0)
    # tensors that shared a storage share one again, at their offsets
    assert back["view"].untyped_storage().data_ptr() == back["transposed"].untyped_storage().data_ptr()
    assert back["tuple"] == value["tuple"] and type(back["tuple"]) is tuple
    assert back["list"] == value["list"] and type(back["list"][0]) is torch.Size and back[7] == {"nested": [[]]}


class Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class Subclass(torch.Tensor):
    pass


@pytest.mark.parametrize("value, why", [
    (Payload(), "not plain data"),
    (torch.ones(2).as_subclass(Subclass), "tensor subclass"),
    (torch.nn.Parameter(torch.ones(2)), "Parameter"),
    (torch.ones(3, 3).to_sparse(), "layout"),
    (2**70, "not plain data"),
], ids=["object", "tensor-subclass", "parameter", "sparse", "huge-int"])
def test_what_is_not_plain_data_is_not_sent(value, why):
    with pytest.raises(wire.WireError, match=why):
        wire.encode({"value": value})


def tensor_frame(dtype="float32", shape=(2,), stride=(1,), offset=0, storage=b"\0" * 8, device="cpu", grad=False):
    """A frame as a tampered worker could write it: a tensor that claims what it likes."""
    fields = msgpack.packb([dtype, list(shape), list(stride), offset, 0, device, grad])
    return msgpack.packb([[storage], msgpack.packb({"value": msgpack.ExtType(6, fields)})])


@pytest.mark.parametrize("frame, why", [
    (pickle.dumps(Payload()), "not plain data"),
    (tensor_frame(shape=(3,)), "out of bounds"),
    (tensor_frame(offset=1, shape=(2,)), "out of bounds"),
    (tensor_frame(shape=(2**20, 2**20), stride=(0, 0)), "elements"),
    (tensor_frame(dtype="object"), "unknown dtype"),
    (tensor_frame(device="meta"), "meta"),
    (tensor_frame(shape=(-1,)), "counts"),
    (tensor_frame(dtype="int64", grad=True), "not plain data"),
    (msgpack.packb([[], msgpack.packb({1.5: "x"})]), "dict key"),
    (msgpack.packb([[], msgpack.packb(msgpack.ExtType(99, b""))]), "unknown extension"),
    (msgpack.packb([[], msgpack.packb(functools.reduce(lambda x, _: [x], range(40), 0))]), "deeper"),
], ids=["a-pickle", "past-the-storage", "offset-past-the-storage", "enormous-by-strides", "unknown-dtype",
        "meta-device", "negative-size", "integer-grad", "float-key", "unknown-extension", "too-deep"])
def test_a_frame_that_is_not_plain_data_is_refused(frame, why):
    with pytest.raises(wire.WireError, match=why):
        wire.decode(frame)


@pytest.mark.parametrize("reply, why", [
    ([1, 2], "not an outcome"),
    ({"probe_error": torch.ones(1)}, "probe_error as a Tensor"),
    ({"probe_error": "x", "returned": torch.ones(1)}, "returned as a Tensor"),  # what came back, by type name
    ({"import_error": "boom"}, "not a description"),
    ({"calls": {"view": 3}}, "call's place as a int"),
    ({"value": {"__raised__": "RuntimeError", "message": 7}}, "message as a int"),
])
def test_a_reply_of_the_wrong_shape_is_refused(reply, why):
    with pytest.raises(BadReply, match=why):
        checked(reply)


def test_text_in_a_reply_is_cut_to_size():
    reply = checked({"probe_error": "x" * 10**6, "import_error": {"type": "E" * 1000, "traceback": "t" * 10**6}})
    assert len(reply["probe_error"]) < host.MAX_TEXT + 20
    assert len(reply["import_error"]["type"]) == 200 and len(reply["import_error"]["traceback"]) < host.MAX_TEXT + 20


def test_bubblewrap_makes_every_folder_above_a_bind_traversable(monkeypatch):
    """bwrap makes the folders above a bind 0700: the sandbox user could not reach Python in /root/.pyenv
    or a checkout in /tmp/ci (below the sandbox's own /tmp), so they are made 0755 first."""
    monkeypatch.setattr(isolation, "readable_dirs", lambda: ["/tmp/ci/main/graders", "/root/.pyenv/versions/3.11"])
    args = list(isolation._bwrap_plan("bwrap", "/tmp/inbox", (1, 1)).prefix)
    made = {args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--dir" and args[i - 1] == "0755"}
    assert {"/tmp/ci", "/tmp/ci/main", "/root", "/root/.pyenv", "/root/.pyenv/versions"} <= made
    assert "/tmp" not in made and "/" not in made


def test_a_sandbox_started_early_is_the_one_the_first_check_uses(spy):
    """`start_early` (the CLI, each pool worker) starts the zygote from a thread that then waits for good:
    bubblewrap's --die-with-parent would end the sandbox with the thread that started it."""
    script = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from torchgrade.sandbox import host
host.start_early()
deadline = time.monotonic() + 150
while None not in host._zygotes and time.monotonic() < deadline:
    time.sleep(0.05)
early = host._zygotes[None]
time.sleep(0.5)
sandbox = host.Sandbox(Path({str(spy)!r}))
assert sandbox.run("spy", "nothing", "call", (), {{}}, {{}}, timeout=30)["value"] is None
sandbox.close()
print("same" if host._zygotes[None] is early and early.alive() else "started again")
"""
    env = {k: v for k, v in os.environ.items() if k != isolation.ENV_VAR}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.stdout.strip() == "same", done.stdout + done.stderr


def test_setting_the_course_a_starting_sandbox_already_has_does_not_wait_for_it(tmp_path, monkeypatch):
    """The CLI starts the sandbox for the course (`start_early`), then configures and collects the checks,
    which names the course again: that must not wait seconds for the zygote that is starting (it holds
    the lock), but go on collecting meanwhile. Another course still waits, and closes the old zygotes."""
    import threading

    probes = tmp_path / "probes"
    probes.mkdir()
    monkeypatch.setenv(host.COURSE_ENV, str(probes.resolve()))
    with host._zygote_lock:  # as while a zygote starts
        done = threading.Event()
        same = threading.Thread(target=lambda: (host.use_course(probes), done.set()), daemon=True)
        same.start()
        assert done.wait(5), "setting the same course waited for the starting zygote"
        other = threading.Thread(target=host.use_course, args=(tmp_path,), daemon=True)
        other.start()
        other.join(0.5)
        assert other.is_alive()  # another course waits for the lock
    other.join(5)
    assert os.environ[host.COURSE_ENV] == str(tmp_path.resolve())


class _FakeZygote:
    def __init__(self, course: str, live: bool = True):
        self.course, self.live, self.closed = course, live, False

    def alive(self) -> bool:
        return self.live and not self.closed

    def close(self) -> None:
        self.closed = True


def test_the_zygotes_of_a_course_graded_before_are_taken_up_again_and_only_the_latest_two_are_kept(tmp_path,
                                                                                                   monkeypatch):
    """A process that turns from course to course (a cluster's worker) starts no zygote again for a course it
    graded lately (each start imports torch: seconds of CPU): those of the course before rest, and come back
    when that course is set again; a dead one is closed, not kept; past two resting courses, the oldest closes."""
    monkeypatch.setattr(host, "_zygotes", {})
    monkeypatch.setattr(host, "_resting", {})
    courses = {}
    for name in "abcd":
        (tmp_path / name).mkdir()
        courses[name] = str((tmp_path / name).resolve())
    monkeypatch.setenv(host.COURSE_ENV, courses["a"])
    a = host._zygotes[None] = host._zygotes["bwrap"] = _FakeZygote("a")
    host.use_course(tmp_path / "b")
    assert host._zygotes == {} and not a.closed
    b = host._zygotes[None] = _FakeZygote("b")
    dead = host._zygotes["process"] = _FakeZygote("b", live=False)
    host.use_course(tmp_path / "a")
    assert host._zygotes == {None: a, "bwrap": a} and dead.closed and not b.closed
    host.use_course(tmp_path / "c")
    host._zygotes[None] = _FakeZygote("c")
    host.use_course(tmp_path / "d")  # resting: b, a, c: b, the oldest, is closed
    assert b.closed and not a.closed and list(host._resting) == [courses["a"], courses["c"]]
    host.close_all()
    assert a.closed and host._resting == {}


def test_the_entry_table_built_before_the_costly_warm_up_is_the_one_built_after():
    """A zygote of a check of one module builds the recorder's table of torch's entry points before it
    imports torch._dynamo (warmup.LATER), which replaces torch.manual_seed: wrapped beforehand as that
    import would, the table (names, and the objects named) is the one a fully warmed zygote builds."""
    code = textwrap.dedent("""
        import torch
        from torchgrade.sandbox import worker  # noqa: F401
        from torchgrade.sandbox.warmup import warm_up, seed_as_dynamo_will, import_later
        from torchgrade.sandbox.entries import Entries, PUBLIC_NAMESPACES, BINDINGS, _members
        def table():
            e = Entries()
            named = {f"{ns}.{n}": o for ns in PUBLIC_NAMESPACES + BINDINGS for n, o in _members(ns)
                     if not n.startswith("__")}  # (dunder methods are made anew at each lookup)
            return (set(e.public.values()), set(e.private.values()), set(e.codes.values()), named)
        warm_up(later=False)
        seed_as_dynamo_will()
        import sys
        assert "torch._dynamo" not in sys.modules
        public, private, codes, named = table()
        import_later()
        assert "torch._dynamo" in sys.modules
        public2, private2, codes2, named2 = table()
        changed = sorted(k for k in named if named2.get(k) is not named[k])
        print(public == public2, private == private2, codes == codes2, set(named) == set(named2), changed)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True True True True []"


@pytest.mark.parametrize("isolation_level", ["auto", "process"])
def test_a_sandbox_for_one_module_leaves_the_costly_warm_up_until_told_more_is_coming(spy, isolation_level):
    """`torchgrade check tensors.view` starts a sandbox that does not import torch._dynamo before its
    first worker (0.5 s of a first check): that worker does not have it; after a "warm" (more modules, or
    a watch session's next round) the zygote has it, and so does every worker forked from then on (at
    level process: every worker process started from then on, a spare started before included)."""
    if isolation_level == "auto" and not sys.platform.startswith("linux"):
        pytest.skip("the zygote is Linux's (other systems: portable workers)")
    (spy / "spy.py").write_text((spy / "spy.py").read_text() + textwrap.dedent("""

        def dynamo_loaded():
            import sys
            return "torch._dynamo" in sys.modules
    """))
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from torchgrade.sandbox import host
host.start_early(one_module=True)
host.started()
def loaded(warm):
    sandbox = host.Sandbox(Path({str(spy)!r}), warm=warm)
    try:
        return sandbox.run("spy", "dynamo_loaded", "call", (), {{}}, {{}}, timeout=60)["value"]
    finally:
        sandbox.close()
print(loaded(False), loaded(False), end=" ")
host.warm_zygotes()  # a watch session, after its first round
print(loaded(False), end=" ")
host.close_all()
host.start_early(one_module=True)
host.started()
print(loaded(True), loaded(False))  # a session of several modules: its first spawn says so
"""
    env = {**{k: v for k, v in os.environ.items() if k != isolation.ENV_VAR}, isolation.ENV_VAR: isolation_level}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    # (the first worker of a session of several modules is forked before the import, the next after it)
    assert done.stdout.strip() == "False False True False True", done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize("isolation_level", ["auto", "process"])
def test_the_reference_keeps_full_marks_in_checks_of_one_module_from_a_sandbox_that_left_its_warm_up(isolation_level):
    """The modules whose code imports torch._dynamo (an optimizer, DDP) import it inside the student's
    windows when their worker comes from a sandbox of a check of one module: nothing that import runs
    may be taken for the student's calls, nor slow a check past its limit."""
    if isolation_level == "auto" and not sys.platform.startswith("linux"):
        pytest.skip("the zygote is Linux's (other systems: portable workers)")
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from torchgrade.engine.config import load_assignment
from torchgrade.sandbox import host
from torchgrade.engine.session import CheckSession
assignment = load_assignment(Path({str(ROOT / "assignment.yaml")!r}))
host.start_early(assignment.probes_dir, one_module=True)
with CheckSession(assignment, device="cpu", include_hidden=False, only=("training", "parallel")) as session:
    for module in ("training", "parallel"):
        grade = session.grade(Path({str(ROOT / "reference")!r}), {{module}})  # one module: no "warm"
        graded = [t for t in grade.tests if t.device != "cuda"]  # (--device cpu: the CUDA ones are set aside)
        print(module, sorted({{t.status for t in graded}}), [t.output[:300] for t in graded if t.status != "passed"][:2])
"""
    env = {**{k: v for k, v in os.environ.items() if k != isolation.ENV_VAR}, isolation.ENV_VAR: isolation_level}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert done.stdout.splitlines() == ["training ['passed'] []", "parallel ['passed'] []"], done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize("isolation_level", ["auto", "process"])
def test_a_switch_sought_after_a_lazy_import_in_a_sandbox_for_one_module_is_the_graders(tmp_path, isolation_level):
    """tests/hostile/switch_after_a_lazy_import.py, graded as `torchgrade check tensors.broadcast_to`
    grades it: from a sandbox that has not imported torch._dynamo, the attack imports it and looks for
    a real switch of the profiler in what that import brought; there is none, and its hidden expand
    costs the target its points."""
    if isolation_level == "auto" and not sys.platform.startswith("linux"):
        pytest.skip("the zygote is Linux's (other systems: portable workers)")
    submission = tmp_path / "submission"
    shutil.copytree(ROOT / "reference", submission, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    attack = (ROOT / "tests" / "hostile" / "switch_after_a_lazy_import.py").read_text()
    (submission / "tensors.py").write_text((submission / "tensors.py").read_text() + "\n\n" + attack)
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from torchgrade.engine.config import load_assignment
from torchgrade.sandbox import host
from torchgrade.engine.session import CheckSession
assignment = load_assignment(Path({str(ROOT / "assignment.yaml")!r}))
host.start_early(assignment.probes_dir, one_module=True)
with CheckSession(assignment, device="cpu", include_hidden=False, only=("tensors.broadcast_to",)) as session:
    grade = session.grade(Path({str(submission)!r}))
graded = [t for t in grade.tests if t.device != "cuda"]
print(sum(t.score for t in graded), any("expand" in t.output for t in graded), all(t.forbidden for t in graded))
"""
    env = {**{k: v for k, v in os.environ.items() if k != isolation.ENV_VAR}, isolation.ENV_VAR: isolation_level}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert done.stdout.strip() == "0.0 True True", done.stdout + done.stderr[-2000:]


def test_the_zygotes_warm_up_runs_no_autograd_and_asks_cuda_nothing():
    """On a machine with a GPU either leaves every worker forked afterwards unable to use CUDA or
    autograd (warmup.py): spies on the Python entry points of both see no call."""
    code = textwrap.dedent("""
        import torch, torch.autograd
        calls = []
        def spy(owner, name):
            real = getattr(owner, name)
            def wrapped(*args, **kwargs):
                calls.append(name)
                return real(*args, **kwargs)
            setattr(owner, name, wrapped)
        for owner, name in [(torch.autograd, "backward"), (torch.autograd, "grad"), (torch.cuda, "is_available"),
                            (torch.cuda, "device_count"), (torch.cuda, "init"), (torch._C, "_cuda_getDeviceCount")]:
            if hasattr(owner, name):  # a CPU build has no _cuda_getDeviceCount
                spy(owner, name)
        from torchgrade.sandbox.warmup import warm_up
        warm_up()
        print(calls, torch.cuda.is_initialized())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[] False"


@pytest.mark.parametrize("level", LEVELS)
def test_inputs_a_worker_cannot_make_are_the_graders_error_and_the_worker_serves_on(spy, level, monkeypatch):
    """A request whose tensor the sandbox cannot rebuild (here: one said to be on an XPU; a CUDA tensor on a
    machine without CUDA is rebuilt on the CUDA stand-in now, tests/test_standin.py) is answered with the
    reason, which the check reports as the grader's; the worker lives on. (It died with status 70 before,
    blaming the student: what CUDA did on an H100.)"""
    if torch.cuda.is_available():
        pytest.skip("this machine's sandbox can make CUDA tensors")
    sb = Sandbox(spy, level=level)
    try:
        assert call(sb, "shout", 0) == "done"
        pid = sb.workers["spy"].pid
        describe = wire._describe_tensor
        monkeypatch.setattr(wire, "_describe_tensor", lambda *a: describe(*a)[:5] + ["xpu", False])
        reply = sb.run("spy", "shout", "call", (torch.ones(2),), {}, {}, timeout=30)
        monkeypatch.undo()
        assert set(reply) == {"sandbox_error"} and reply["sandbox_error"].startswith("WireError: "), reply
        assert call(sb, "shout", 0) == "done" and sb.workers["spy"].pid == pid
    finally:
        sb.close()


def _inbox_of_a_pool_worker() -> str:
    return inbox.path()


def test_a_pool_workers_inbox_is_removed_when_the_worker_ends():
    """`grade -j N` runs its graders in a process pool, whose workers never run atexit's functions."""
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        folder = pool.submit(_inbox_of_a_pool_worker).result()
        assert os.path.isdir(folder)
    assert not os.path.exists(folder)


def test_the_inbox_of_a_grader_that_is_gone_is_removed_by_the_next(tmp_path, monkeypatch):
    import psutil

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = max(psutil.pids()) + 100000
    gone, alive, recent = (tmp_path / f"{inbox.PREFIX}{dead}-x", tmp_path / f"{inbox.PREFIX}{os.getpid()}-y",
                           tmp_path / f"{inbox.PREFIX}{dead}-z")
    for folder in (gone, alive, recent):
        (folder / "s1").mkdir(parents=True)
    old = time.time() - inbox.STALE_SECONDS - 10
    os.utime(gone, (old, old))
    os.utime(alive, (old, old))
    inbox.sweep()
    assert not gone.exists() and alive.exists() and recent.exists()
