"""torchgrade.sandbox.ipc on its own: POSIX message queues listed and removed where /dev/mqueue shows them, and
nothing fails where the system lists nothing (macOS: no /proc/sysvipc, no /dev/mqueue, no /dev/shm).
The whole path (planted by one submission, gone for the next) is tests/test_hostile.py's shared_memory."""

from __future__ import annotations

import os
import sys

import pytest
from mqueues import make_queue, queue_exists, unlink_queue

from torchgrade.sandbox import ipc


@pytest.fixture
def nothing_listed(tmp_path, monkeypatch):
    for name in ("SYSVIPC", "POSIX_SHM", "MQUEUE"):
        monkeypatch.setattr(ipc, name, str(tmp_path / "absent" / name))


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
