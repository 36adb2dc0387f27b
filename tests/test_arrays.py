"""torchgrade.sandbox.arrays: numpy's work seen while a target with forbidden calls runs (any thread), and
only then; the probe's own numpy between the student's windows is not the student's."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from torchgrade.forbidden import ARRAYS, runtime_violations
from torchgrade.sandbox import arrays


class _Watch:
    def __init__(self, depth: int):
        self.depth = depth
        self.mode = type("Mode", (), {"calls": {}})()


@pytest.fixture
def watched():
    assert arrays.watch_numpy_allocator()
    yield
    arrays.disarm()


def test_an_array_numpy_makes_for_the_students_code_is_recorded_with_its_line(watched):
    watch = _Watch(depth=1)
    arrays.arm(watch, __file__.rsplit("/", 1)[0] + "/")
    np.eye(3)[np.array([2, 0])]  # the fancy indexing calls nothing of numpy's
    arrays.disarm()
    lines = {name: where for name, where in watch.mode.calls.items() if name.startswith(ARRAYS)}
    assert any("eye" in name for name in lines) and all(w.startswith("test_arrays.py:") for w in lines.values())
    found = runtime_violations(watch.mode.calls, ("one_hot",))
    assert found and "may not use numpy" in found[0].message("one_hot")


def test_a_thread_of_the_students_is_watched_and_the_probes_own_numpy_is_not(watched):
    watch = _Watch(depth=0)  # between windows: the probe's own code
    arrays.arm(watch, "/nowhere/")
    np.zeros(4)
    assert watch.mode.calls == {}
    thread = threading.Thread(target=lambda: np.add([1], [2]))
    thread.start()
    thread.join()
    arrays.disarm()
    assert list(watch.mode.calls) == [f"{ARRAYS}numpy"]
    np.ones(4)  # disarmed: nothing recorded, nothing broken
    assert len(watch.mode.calls) == 1


def test_the_profile_hook_sees_numpy_views_that_make_no_array(watched):
    watch = _Watch(depth=1)
    buffer = bytearray(24)
    arrays.arm(watch, "/nowhere/")
    sys.setprofile(arrays.profile)
    try:
        np.frombuffer(buffer, dtype=np.int64).reshape(3, 1)
    finally:
        sys.setprofile(None)
        arrays.disarm()
    assert f"{ARRAYS}numpy.frombuffer" in watch.mode.calls
