"""The dispatcher watch's two engines (torchgrade/sandbox/observer.py): the compiled RecordFunction observer and,
where it is missing or broken, a Kineto session per request. Both must charge the same operators to the same
request: two requests, a student thread spanning both, a request that crashes mid-way."""

from __future__ import annotations

import os
import textwrap
import threading

import pytest
import torch
from conftest import make_submission, points_by_target

from torchgrade.forbidden import DISPATCHER, TAMPERED
from torchgrade.grading import grade_submission
from torchgrade.sandbox import host, observer
from torchgrade.sandbox.recorder import CallRecorder, DispatchWatch


def _built() -> str:
    path = os.environ.get(observer.ENV_VAR, "")
    if not path or path == "off":
        pytest.skip("the compiled observer cannot be built here (no C++ compiler or torch headers)")
    return path


@pytest.fixture(params=[observer.COMPILED, observer.PROFILER])
def engine(request):
    """The in-process watch runs on one engine, then the module's state is as it was."""
    saved, functions = observer.module, dict(observer.functions)
    if request.param == observer.COMPILED:
        assert observer.load(_built()) is not None, "the canary failed on the built observer"
    else:
        observer.module = None
        observer.functions.clear()
    yield request.param
    observer.module = saved
    observer.functions.clear()
    observer.functions.update(functions)


STUDENT = """
    import threading
    import torch

    def hidden(x, name):  # an operator the mode does not see
        with torch._C.DisableTorchFunction():
            return getattr(x, name)(-1) if name == "view" else getattr(torch, name)(x)

    def crash(x):
        class Boom(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                hidden(g, "neg")
                raise ValueError("boom")
        Boom.apply(x).sum().backward()

    def hooked(x, nested):  # hooks of the student's, which autograd runs inside a backward the mode saw
        def outer(g):
            torch.exp(g)
            if nested:  # a seen call inside the hook, which runs another hook of the student's
                with torch.enable_grad():
                    v = torch.ones(2, requires_grad=True) * 3
                    v.register_hook(lambda h: torch.sin(h))
                    v.sum().backward()
            return g
        y = x * 2
        y.register_hook(outer)
        return y

    def spanning(x, go, done):
        def run():  # one operator per request, each when that request says so
            for name, event in zip(("sin", "cos"), go):
                event.wait(30)
                getattr(torch, name)(x)
                done.set()
        thread = threading.Thread(target=run)
        thread.start()
        return thread
"""


def _student(tmp_path):
    import importlib.util

    path = tmp_path / "student.py"
    path.write_text(textwrap.dedent(STUDENT))
    spec = importlib.util.spec_from_file_location(f"student_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _request(watch: DispatchWatch, *runs) -> dict:
    """One armed request, each of `runs` in a window of its own; what it recorded."""
    watch.mode.reset()
    with watch.armed():
        for run in runs:
            with watch.window():
                run()
    return dict(watch.mode.calls)


def test_each_request_is_charged_with_its_own_operators_only(tmp_path, engine):
    student, x = _student(tmp_path), torch.arange(6.0)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    assert (watch.compiled is not None) == (engine == observer.COMPILED)
    first = _request(watch, lambda: student.hidden(x, "view"), lambda: x + 1)
    second = _request(watch, lambda: student.hidden(x, "exp"))
    assert first.get("view") == DISPATCHER and "exp" not in first
    assert second.get("exp") == DISPATCHER and "view" not in second
    assert TAMPERED not in first and TAMPERED not in second


def test_a_student_thread_spanning_two_requests_is_charged_to_each_for_what_it_ran_then(tmp_path, engine):
    student, x = _student(tmp_path), torch.ones(3)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    go, done = (threading.Event(), threading.Event()), threading.Event()
    threads = []

    def first_window():
        threads.append(student.spanning(x, go, done))
        go[0].set()
        assert done.wait(30)

    first = _request(watch, first_window)
    done.clear()
    second = _request(watch, lambda: (go[1].set(), done.wait(30)))
    threads[0].join(30)
    assert first.get("sin") == DISPATCHER and "cos" not in first
    assert second.get("cos") == DISPATCHER and "sin" not in second
    assert TAMPERED not in first and TAMPERED not in second


def test_a_callback_torch_runs_inside_a_seen_call_is_watched_as_the_target_even_nested(tmp_path, engine):
    """The profile hook inside a seen call (filtered in C by the compiled observer where it is loaded) hands
    a callback of the student's, and one run inside a seen call of that callback, to the mode, and is
    itself again afterwards: nothing said tampered, no hook left behind."""
    import sys

    student, x = _student(tmp_path), torch.ones(3, requires_grad=True)
    y = student.hooked(x, nested=True)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    calls = _request(watch, lambda: y.sum().backward())
    assert calls.get("exp", "").startswith("student.py:") and calls.get("sin", "").startswith("student.py:"), calls
    assert TAMPERED not in calls and sys.getprofile() is None


def test_a_request_that_crashes_mid_way_leaves_the_next_one_clean(tmp_path, engine):
    student, x = _student(tmp_path), torch.ones(3, requires_grad=True)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    watch.mode.reset()
    with pytest.raises(ValueError, match="boom"), watch.armed(), watch.window():
        student.crash(x)  # raises inside a custom backward, inside the recorder's marker, inside autograd's engine
    crashed = dict(watch.mode.calls)
    after = _request(watch, lambda: student.hidden(x.detach(), "exp"))
    assert crashed.get("neg") == DISPATCHER and TAMPERED not in crashed
    assert after.get("exp") == DISPATCHER and "neg" not in after and TAMPERED not in after


def test_the_canary_refuses_an_observer_that_reports_nothing():
    class Deaf:  # loads, arms, and never sees an operator (a torch that runs no global callbacks)
        def arm(self, *args):
            pass

        def enter(self, name):
            return None

        def leave(self, token):
            pass

        def collect(self):
            return [], 0, 0, 0, True

    assert not observer.canary(Deaf())


def test_a_library_that_does_not_load_leaves_the_profiler(tmp_path):
    broken = tmp_path / "broken.so"
    broken.write_bytes(b"\x7fELF not a library")
    saved, functions = observer.module, dict(observer.functions)
    try:
        assert observer.load(str(broken)) is None and observer.name() == observer.PROFILER
        assert observer.load(str(tmp_path / "missing.so")) is None
    finally:
        observer.module = saved
        observer.functions.update(functions)


@pytest.mark.parametrize("library", ["built", "broken"])
def test_grading_names_its_watch_and_catches_a_hidden_call_with_either(assignment, tmp_path, monkeypatch, library):
    """A submission whose view hides from the mode loses view's points with the compiled observer and,
    when the library is broken, with the profiler the sandbox falls back to; the grade says which."""
    if library == "built":
        _built()
    else:
        broken = tmp_path / "broken.so"
        broken.write_bytes(b"not a library")
        monkeypatch.setenv(observer.ENV_VAR, str(broken))
    source = ("\n\ndef view(x, *shape):\n    with torch._C.DisableTorchFunction():\n"
              "        return getattr(x, 'vi' + 'ew')(*shape)\n")
    folder = make_submission(tmp_path / "mine")
    with open(folder / "tensors.py", "a") as f:
        f.write("\nimport torch\n" + source)
    host.close_all()  # (a zygote of this process started before holds the other watch)
    try:
        graded = grade_submission(folder, assignment, device="cpu", only=("tensors",))
    finally:
        host.close_all()
    points = points_by_target(graded)
    assert graded.watch == (observer.COMPILED if library == "built" else observer.PROFILER)
    assert points["tensors.view"][0] == 0
    assert all(score == top for target, (score, top) in points.items() if target != "tensors.view")


def test_a_run_at_level_process_leaves_no_cached_build_behind(tmp_path, monkeypatch):
    """Its code runs as the grader's user there and could replace the library: a later run must build anew."""
    monkeypatch.setenv("TORCHGRADE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(observer.ENV_VAR, raising=False)
    library = observer.folder() / "_torchgrade_observer.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"written by a submission")
    observer.forget()
    assert not library.exists()
    chosen = tmp_path / "operators-own.so"  # one the operator names is theirs to keep
    chosen.write_bytes(b"x")
    monkeypatch.setenv(observer.ENV_VAR, str(chosen))
    observer.forget()
    assert chosen.exists()


def test_the_build_command_says_where_the_observer_is_or_why_there_is_none(monkeypatch):
    from click.testing import CliRunner

    from torchgrade.cli import main

    path = _built()
    done = CliRunner().invoke(main, ["observer", "build"])
    assert done.exit_code == 0 and done.output.strip() == f"built: {path}", done.output
    monkeypatch.setenv(observer.ENV_VAR, "off")
    monkeypatch.setenv("CXX", "no-such-compiler")
    done = CliRunner().invoke(main, ["observer", "build"])
    assert done.exit_code == 2 and "no C++ compiler (no-such-compiler)" in done.output, done.output
