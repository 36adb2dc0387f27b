"""torchgrade.sandbox.ipc on its own: POSIX message queues listed and removed where /dev/mqueue shows them, and
nothing fails where the system lists nothing (macOS: no /proc/sysvipc, no /dev/mqueue, no /dev/shm).
The whole path (planted by one submission, gone for the next) is tests/test_hostile.py's shared_memory."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from mqueues import make_queue, queue_exists, unlink_queue

from torchgrade.sandbox import ipc


@pytest.fixture
def nothing_listed(tmp_path, monkeypatch):
    for name in ("SYSVIPC", "POSIX_SHM", "MQUEUE"):
        monkeypatch.setattr(ipc, name, str(tmp_path / "absent" / name))
    monkeypatch.setenv("PATH", str(tmp_path / "absent"))  # no ipcs either


#: What ``ipcs -m -s -q -c -p`` prints on macOS (and the BSDs), owners by name and by number.
IPCS = """IPC status from <running system> as of Fri Nov 27 01:30:00 UTC 2026
Message Queues:
T     ID     KEY        MODE       OWNER    GROUP  CREATOR   CGROUP  LSPID  LRPID
q  65536 0x00000000 --rw-r--r-- {name}    staff  {name}    staff      0      0
Shared Memory:
T     ID     KEY        MODE       OWNER    GROUP  CREATOR   CGROUP   CPID   LPID
m  65537 0x52004f09 --rw------- {uid}    wheel  {uid}    wheel    4242   4242
{more}Semaphores:
T     ID     KEY        MODE       OWNER    GROUP  CREATOR   CGROUP
s  65538 0x00000007 --ra-ra-ra- root     wheel  root     wheel
"""


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="owners by uid")
def test_where_ipcs_lists_system_v_objects_what_a_submission_left_is_removed(nothing_listed, tmp_path, monkeypatch):
    """macOS: no /proc/sysvipc, but ``ipcs`` lists the objects; what appeared while a submission ran, of the
    grader's user, is removed, and what was there before or is another user's is kept."""
    import pwd

    me = os.geteuid()
    listing, fake = tmp_path / "listing", tmp_path / "bin" / "ipcs"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexec {shutil.which('cat', path=os.defpath)} {listing}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    fields = {"name": pwd.getpwuid(me).pw_name, "uid": me}
    listing.write_text(IPCS.format(more="", **fields))
    assert [(o.kind, o.id, o.key, o.uid, o.cpid) for o in ipc.objects()] == [
        ("msg", 65536, 0, me, 0), ("shm", 65537, 0x52004F09, me, 4242), ("sem", 65538, 7, 0, 0)]
    removed = []
    monkeypatch.setattr(ipc, "remove", lambda obj: removed.append(obj.id) or True)
    leftovers = ipc.Leftovers()
    listing.write_text(IPCS.format(more=f"m  65539 0x00000000 --rw-rw-rw- {me} staff {me} staff 77 77\n"
                                        f"m  65540 0x00000000 --rw-rw-rw- 12345 staff 12345 staff 78 78\n", **fields))
    assert leftovers.remove() == 1 and removed == [65539]


def test_where_the_system_lists_nothing_nothing_is_removed_and_nothing_fails(nothing_listed):
    assert ipc.objects() == [] and ipc.queues() == []
    assert ipc.remove_owned(os.geteuid()) == 0
    leftovers = ipc.Leftovers()
    assert leftovers.remove() == 0


def test_a_queue_that_appeared_while_a_submission_ran_is_removed_and_an_older_one_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(ipc, "MQUEUE", str(tmp_path))  # (a folder standing in for the mqueue file system)
    (tmp_path / "older").write_text("")
    leftovers = ipc.Leftovers()
    (tmp_path / "left_by_the_submission").write_text("")
    assert leftovers.remove() == 1
    assert sorted(os.listdir(tmp_path)) == ["older"]
    assert ipc.remove_owned(os.geteuid()) == 1 and os.listdir(tmp_path) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX message queues by name: Linux")
def test_a_queue_is_found_and_unlinked_by_name():
    name = f"/torchgrade-test-{os.getpid()}"
    if not make_queue(name):
        pytest.skip("no POSIX message queues here")
    assert queue_exists(name)
    assert unlink_queue(name) and not queue_exists(name)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/maps: Linux")
def test_a_new_shared_memory_file_a_live_process_still_maps_is_kept_and_one_nobody_maps_is_removed(tmp_path, monkeypatch):
    """At level process, what appears in /dev/shm while a submission runs is removed once its processes
    are dead; a file some live process still maps is another program's (the grader's own pool of
    processes makes its semaphores there, a test session's other worker too: removing one broke that
    pool, BrokenProcessPool), and is kept."""
    import subprocess

    monkeypatch.setattr(ipc, "POSIX_SHM", str(tmp_path))  # (a folder standing in for /dev/shm)
    leftovers = ipc.Leftovers()
    in_use, left = tmp_path / "sem.mp-in-use", tmp_path / "psm_left_behind"
    in_use.write_bytes(b"\0" * 4096)
    left.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen([sys.executable, "-c", f"import mmap, sys; f = open({str(in_use)!r}, 'r+b'); "
                               "m = mmap.mmap(f.fileno(), 4096); print('mapped', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "mapped"
        assert leftovers.remove() == 1
        assert sorted(os.listdir(tmp_path)) == [in_use.name]
    finally:
        holder.stdin.close()
        holder.wait(10)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/dev/shm"),
                    reason="POSIX semaphores as files in /dev/shm: Linux")
def test_a_semaphore_the_grader_makes_while_a_submission_runs_is_kept():
    """A named POSIX semaphore (multiprocessing's locks outside the fork context: the grader's pool of
    processes) is a file glibc maps under a temporary name before giving it its own, so /proc/PID/maps
    does not show its path; removing it as a leftover broke another grader's pool (BrokenProcessPool)."""
    import multiprocessing

    leftovers = ipc.Leftovers()
    lock = multiprocessing.get_context("forkserver").Lock()
    path = os.path.join(ipc.POSIX_SHM, "sem." + lock._semlock.name.lstrip("/"))
    assert os.path.exists(path)
    leftovers.remove()
    assert os.path.exists(path)
