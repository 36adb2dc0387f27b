"""torchgrade.sandbox.arrays: numpy's work seen while a target with forbidden calls runs (any thread), and
only then; the probe's own numpy between the student's windows is not the student's."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from torchgrade.sandbox.forbidden import ARRAYS, runtime_violations
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


@pytest.fixture
def every_array():
    assert arrays.watch_numpy_arrays() and arrays.watch_numpy_allocator()
    yield
    arrays.disarm()


def test_a_view_numpy_decides_without_allocating_is_recorded_with_its_line(every_array):
    memory = bytearray(6)
    laid_out = np.ndarray(shape=(2, 3), dtype=np.uint8, buffer=memory)  # before the watch: not the student's
    watch = _Watch(depth=1)
    arrays.arm(watch, __file__.rsplit("/", 1)[0] + "/")
    laid_out.shape = (3, 2)  # numpy decides the view: no call, no data of its own
    arrays.disarm()
    assert laid_out.strides == (2, 1)
    assert list(watch.mode.calls) == [f"{ARRAYS}numpy"]
    assert watch.mode.calls[f"{ARRAYS}numpy"].startswith("test_arrays.py:")


def test_an_array_over_foreign_memory_and_a_subclass_made_later_are_recorded(every_array):
    class Mine(np.ndarray):  # made after the wrapper, before the request (at import, say)
        pass

    inner = np.ndarray(shape=(2, 2), dtype=np.uint8, buffer=bytearray(4))
    for make in (lambda: np.ndarray(shape=(4,), dtype=np.uint8, buffer=bytearray(4)),
                 lambda: inner.view(Mine),
                 lambda: inner.view(np.matrix)):  # numpy's own subclass, made before the wrapper
        watch = _Watch(depth=1)
        arrays.arm(watch, "/nowhere/")
        make()
        arrays.disarm()
        assert f"{ARRAYS}numpy" in watch.mode.calls
    watch = _Watch(depth=1)
    np.ndarray(shape=(4,), dtype=np.uint8, buffer=bytearray(4))  # disarmed: nothing recorded
    assert watch.mode.calls == {}


def test_a_thread_started_before_the_watch_has_the_profile_hook_for_libraries_that_make_no_array(every_array):
    import _thread

    import sympy

    arrays.watch_threads()
    asks, done = threading.Event(), threading.Event()

    def serve():  # started before the request is armed, like a thread a module starts at import
        asks.wait(10)
        sympy.Matrix([[1, 2], [3, 4]]).reshape(4, 1)
        done.set()

    _thread.start_new_thread(serve, ())
    watch = _Watch(depth=0)
    arrays.arm(watch, "/nowhere/")
    asks.set()
    assert done.wait(20)
    arrays.disarm()
    assert any(name.startswith(f"{ARRAYS}sympy.") for name in watch.mode.calls), watch.mode.calls


def test_a_subclass_of_ndarray_made_while_a_request_runs_is_recorded(every_array):
    watch = _Watch(depth=1)
    arrays.arm(watch, "/nowhere/")
    kind = type("Made", (np.ndarray,), {})  # a type's call: no event, and CPython's own allocator
    kind(shape=(2,), dtype=np.uint8, buffer=bytearray(2)).shape = (1, 2)
    arrays.disarm()
    assert f"{ARRAYS}numpy.ndarray subclass Made" in watch.mode.calls
