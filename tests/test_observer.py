"""The dispatcher watch's engines (torchgrade/sandbox/observer.py): the compiled RecordFunction observer and,
where it is missing or broken, Kineto: a session per request, or one session kept across a module's requests
whose findings are read afterwards (recorder.DispatchWatch.armed with a token). Each must charge the same
operators to the same request: two requests, a student thread spanning both, a request that crashes mid-way."""

from __future__ import annotations

import os
import secrets
import textwrap
import threading

import pytest
import torch
from conftest import make_submission, points_by_target

from torchgrade.sandbox.forbidden import CHANGED, DISPATCHER, PRIVATE, TAMPERED
from torchgrade.engine.grading import grade_submission
from torchgrade.engine import plugin
from torchgrade.sandbox import host, observer, provenance, recorder
from torchgrade.sandbox.recorder import CallRecorder, DispatchWatch, joined

#: Kineto with one session for many requests, read when asked (a module's requests have ended).
KEPT = "one profiler session"


def _built() -> str:
    path = os.environ.get(observer.ENV_VAR, "")
    if not path or path == "off":
        pytest.skip("the compiled observer cannot be built here (no C++ compiler or torch headers)")
    return path


@pytest.fixture(params=[observer.COMPILED, observer.PROFILER, KEPT])
def engine(request):
    """The in-process watch runs on one engine, then the module's state is as it was."""
    saved, functions = observer.module, dict(observer.functions)
    if request.param == observer.COMPILED:
        assert observer.load(_built()) is not None, "the canary failed on the built observer"
    else:
        observer.module = None
        observer.functions.clear()
    yield request.param
    assert recorder._kept is None, "a profiler session was left open"
    observer.module = saved
    observer.functions.clear()
    observer.functions.update(functions)


STUDENT = """
    import threading
    import torch

    def put_back(module):  # a callback that changes installed state and puts it back while torch's code runs
        import functools

        def predicate(line):
            module.limit = functools.partial(len)
            module.limit = 3
            return True
        return predicate

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

    def engine_steps(x):  # autograd's own work beside torch's derivative formulas: broadcast, casts, accumulation
        w = torch.ones(3, 1, dtype=torch.float64, requires_grad=True)
        w.grad = torch.zeros(3, 1, dtype=torch.float64)
        y = (w.float() * x).sum(0)
        y.retain_grad()
        (y * 2 + y).sum().backward()

    def unseen_backward(x):  # autograd's engine run where the mode does not see it: the student's whole
        y = x.detach().requires_grad_().exp()
        with torch._C.DisableTorchFunction():
            y.sum().backward()

    def c_hooks(x):  # hooks built of C builtins: a node's pre-hook, a tensor's hook dictionary, after accumulation
        import collections, functools
        out = []
        leaf = torch.ones(3, requires_grad=True)
        y = leaf * 2
        y.grad_fn.register_prehook(functools.partial(next, filter(None, map(out.append, map(torch.exp, [x])))))
        z = y * 3
        z._backward_hooks = collections.OrderedDict({0: functools.partial(next, filter(None, map(out.append, map(torch.sin, [x]))))})
        z.grad_fn._register_hook_dict(z)
        leaf._post_accumulate_grad_hooks = collections.OrderedDict({0: functools.partial(next, map(out.append, map(torch.cos, [x])))})
        z.sum().backward()
        return out

    def saved_hooks(x, how):  # torch's own saved-tensor hooks; one binding its own arguments to torch's; torch's
        import functools  # own with a captured variable set to something else
        import types
        from torch.utils.checkpoint import checkpoint
        w = x.detach().requires_grad_()
        with torch.autograd.graph.save_on_cpu():
            y = (w * w).sum()
        y = y + checkpoint(torch.sin, w, use_reentrant=False).sum()
        if how == "bound":
            with torch.autograd.graph.saved_tensors_hooks(functools.partial(torch.ops.aten.neg.default), lambda t: t):
                y = y + (w * w).sum()
        elif how == "cells":
            hooks = torch.autograd.graph.save_on_cpu(pin_memory=True, device_type="cpu")
            hooks.pack_hook.__closure__[0].cell_contents = types.SimpleNamespace(is_available=functools.partial(bool))
            with hooks:
                y = y + (w * w).sum()
        y.backward()

    def named_as_torchs(x, when):  # a custom Function's node named as one of torch's, before or as the engine runs
        class Twice(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        y = Twice.apply(x.detach().requires_grad_()) * 3
        if when == "before":
            Twice._backward_cls.__name__ = "MulBackward0"
        elif when == "while":
            y.grad_fn.register_prehook(lambda g: setattr(Twice._backward_cls, "__name__", "MulBackward0"))
        y.sum().backward()
        return Twice

    def applied(function, x):
        (function.apply(x.detach().requires_grad_()) * 3).sum().backward()

    def node_hooks(x, how):  # hooks given to an autograd node: the student's own, torch's own, C builtins
        import functools
        y = x.detach().requires_grad_() * 2
        ran = []
        if how == "students":
            handle = y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: ran.append(1))
            assert handle.hooks_dict_ref() is None  # (the dictionary autograd keeps is not handed out)
            y.grad_fn.register_prehook(lambda grad_outputs: ran.append(2))
        elif how == "torchs":  # a module's full backward hook: torch's closures on the nodes
            layer = torch.nn.Linear(3, 3)
            layer.register_full_backward_hook(lambda module, grad_input, grad_output: ran.append(3))
            y = layer(y)
        elif how == "builtin":
            y.grad_fn.register_prehook(functools.partial(next, iter(())))
        elif how == "removed":
            y.grad_fn.register_prehook(functools.partial(next, iter(()))).remove()
        elif how == "replaced":  # (and left so: the test takes it away)
            torch.autograd.Function._register_hook = staticmethod(lambda hooks, hook: (hooks, None))
        y.sum().backward()
        return ran

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


class Requests:
    """Armed requests on one watch, each of its runs in a window of its own; what each recorded. With the kept
    session, what the profiler saw joins each request's record when `read` asks for it (as the host's
    settle does: recorder.joined)."""

    def __init__(self, watch: DispatchWatch, engine: str):
        self.watch, self.engine = watch, engine
        self.waiting: dict[str, dict] = {}

    def __call__(self, *runs) -> dict:
        with self.armed():
            for run in runs:
                with self.watch.window():
                    run()
        return self.recorded()

    def armed(self):
        self.watch.mode.reset()
        self.token = secrets.token_hex(4) if self.engine == KEPT else None
        return self.watch.armed(self.token)

    def recorded(self) -> dict:
        calls = dict(self.watch.mode.calls)
        if self.token is not None:
            assert recorder._kept is self.watch, "the session was not kept open"
            self.waiting[self.token] = calls
        return calls

    def read(self) -> None:
        found = self.watch.findings()
        assert set(found) == set(self.waiting)
        for token, calls in self.waiting.items():
            together = joined(calls, found[token])
            calls.clear()
            calls.update(together)
        self.waiting.clear()


def test_each_request_is_charged_with_its_own_operators_only(tmp_path, engine):
    student, x = _student(tmp_path), torch.arange(6.0)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    assert (watch.compiled is not None) == (engine == observer.COMPILED)
    request = Requests(watch, engine)
    first = request(lambda: student.hidden(x, "view"), lambda: x + 1)
    second = request(lambda: student.hidden(x, "exp"))
    request.read()
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

    request = Requests(watch, engine)
    first = request(first_window)
    done.clear()
    second = request(lambda: (go[1].set(), done.wait(30)))
    threads[0].join(30)
    request.read()
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
    request = Requests(watch, engine)
    calls = request(lambda: y.sum().backward())
    request.read()
    assert calls.get("exp", "").startswith("student.py:") and calls.get("sin", "").startswith("student.py:"), calls
    assert TAMPERED not in calls and sys.getprofile() is None


def test_in_the_evaluation_of_torchs_own_node_only_the_engines_own_steps_are_torchs(tmp_path, engine):
    """Autograd's sums, views, casts, additions and clones beside a derivative formula are not the student's; an
    operator a hook of C builtins runs there (no frame, no call the mode sees) is, however the hook was set; and
    an engine run the mode did not see is the student's whole, derivative formulas included (`mul` of exp's)."""
    student, x = _student(tmp_path), torch.arange(3.0)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    request = Requests(watch, engine)
    honest = request(lambda: student.engine_steps(x))
    hooked = request(lambda: student.c_hooks(x))
    unseen = request(lambda: student.unseen_backward(x))
    request.read()
    assert [name for name, where in honest.items() if where == DISPATCHER] == [], honest
    assert {"backward", "grad", "mul"} <= {name for name, where in unseen.items() if where == DISPATCHER}, unseen
    assert {"exp", "sin", "cos"} <= {name for name, where in hooked.items() if where == DISPATCHER}, hooked
    assert TAMPERED not in honest and TAMPERED not in hooked


def test_a_saved_tensor_hook_binding_arguments_to_torchs_code_is_refused_and_torchs_own_hooks_are_not(tmp_path,
                                                                                                         engine, monkeypatch):
    for name in ("_push_saved_tensors_default_hooks", "_pop_saved_tensors_default_hooks"):  # (as the sandbox does)
        monkeypatch.setattr(torch._C._autograd, name, recorder._SavedTensorHooks(getattr(torch._C._autograd, name)))
    student, x = _student(tmp_path), torch.arange(3.0)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    request = Requests(watch, engine)
    honest, bound, cells = (request(lambda: student.saved_hooks(x, how)) for how in ("honest", "bound", "cells"))
    request.read()
    assert not [name for name in honest if name.startswith((PRIVATE, CHANGED))], honest
    assert [name for name in bound if name.startswith(PRIVATE) and "torch's own code" in name], bound
    assert [name for name in cells if name.startswith(CHANGED) and "pack_to_cpu's captured variables" in name], cells


def test_a_custom_functions_node_named_as_torchs_own_before_or_while_the_engine_runs_is_refused(tmp_path, engine):
    provenance.watch(str(tmp_path) + os.sep, [])  # (the sandbox's audit hook: once per process)
    student, x = _student(tmp_path), torch.arange(3.0)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    request = Requests(watch, engine)
    made = []
    try:
        found = {when: request(lambda: made.append(student.named_as_torchs(x, when))) for when in ("never", "while")}
        made.append(student.named_as_torchs(x, "before"))  # (named so before the request, in no request)
        found["earlier"] = request(lambda: student.applied(made[-1], x))
        request.read()
    finally:
        for function in made:  # (left alive and named so, it would be found by every later request here)
            function._backward_cls.__name__ = "TwiceBackward"
    refused = {when: [name for name in calls if name.startswith(PRIVATE) and "custom Function's node" in name]
               for when, calls in found.items()}
    assert refused["never"] == [] and refused["while"] and refused["earlier"], refused


def test_a_hook_given_to_an_autograd_node_that_is_not_the_students_python_is_refused_when_it_runs(tmp_path, engine,
                                                                                                   monkeypatch):
    provenance.watch(str(tmp_path) + os.sep, [])  # (the sandbox's audit hook: once per process)
    # (as the sandbox's guard_switches does, but for the class's immutability: tested below, the test takes it away)
    monkeypatch.setattr(torch.autograd.Function, "_register_hook", recorder._REGISTER_NODE_HOOK)
    monkeypatch.setattr(recorder, "_registry_set", True)
    student, x = _student(tmp_path), torch.arange(3.0)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    request = Requests(watch, engine)
    ran = {}
    found = {how: request(lambda: ran.setdefault(how, student.node_hooks(x, how)))
             for how in ("students", "torchs", "builtin", "removed", "replaced")}
    request.read()
    refused = {how: [name for name in calls if name.startswith(PRIVATE)] for how, calls in found.items()}
    assert ran["students"] == [2, 1] and ran["torchs"] == [3], ran
    assert refused["students"] == refused["torchs"] == refused["removed"] == [], refused
    assert any("given to an autograd node" in name for name in refused["builtin"]), refused
    assert any("registry of node hooks" in name for name in refused["replaced"]), refused


def test_a_class_made_immutable_refuses_every_change_of_what_its_attributes_resolve_to():
    """Autograd's C++ looks `torch.autograd.Function._register_hook` up at each node hook's registration: the sandbox
    sets it and makes the class and its metaclass immutable, since a registry set and taken away between two of the
    watch's looks is not seen (tests/hostile/node_hook_registry.py). Here on classes of the test's own."""
    meta = type("Meta", (type,), {})
    base = type("Base", (), {"hook": "mixin's"})
    kind = meta("Kind", (base,), {"hook": "grader's"})
    assert all(recorder._make_immutable(k) for k in (kind, meta))
    changes = [lambda: setattr(kind, "hook", 1), lambda: type.__setattr__(kind, "hook", 1),
               lambda: delattr(kind, "hook"), lambda: setattr(meta, "hook", property(lambda k: 1)),
               lambda: setattr(kind, "__class__", type("Other", (meta,), {})), lambda: setattr(kind, "__bases__", (object,))]
    for change in changes:
        with pytest.raises(TypeError, match="immutable"):
            change()
    base.hook = "replaced"  # (a base's attribute may change: the class's own wins)
    assert kind.hook == "grader's" and meta("Sub", (kind,), {}).hook == "grader's"


def test_installed_state_changed_and_put_back_by_a_callback_while_torchs_python_code_runs_is_charged(tmp_path, engine,
                                                                                                     monkeypatch):
    """Torch's Python code for a seen call may call back into the student's (a function given as an argument): what
    the callback sets and puts back of installed state was there while torch's code ran (installed_state's look
    after the call, made where a callback ran). Here torch's code is textwrap.indent, calling its predicate."""
    import sys
    import sysconfig
    import types
    from torchgrade.sandbox import installed_state
    module = types.ModuleType("fake_installed")
    module.__file__ = os.path.join(sysconfig.get_paths()["purelib"], "fake_installed.py")
    module.limit = 3
    monkeypatch.setitem(sys.modules, "fake_installed", module)
    for name, empty in (("_kept", []), ("_clean", []), ("_spaces", set()), ("_PACKAGES", set()), ("_read", None),
                        ("_cells", []), ("_clean_cells", []), ("_read_cells", None), ("_functions", set())):
        monkeypatch.setattr(installed_state, name, empty)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    installed_state.take()
    student = _student(tmp_path)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    request = Requests(watch, engine)
    found = {how: request(lambda: watch.mode.__torch_function__(textwrap.indent, (), ("a\n", " ", predicate)))
             for how, predicate in (("honest", lambda line: True), ("put back", student.put_back(module)))}
    request.read()
    changed = {how: [name for name in calls if name.startswith(CHANGED)] for how, calls in found.items()}
    assert changed == {"honest": [], "put back": [f"{CHANGED}fake_installed (a value set and put back)"]}, changed


def test_a_request_that_crashes_mid_way_leaves_the_next_one_clean(tmp_path, engine):
    student, x = _student(tmp_path), torch.ones(3, requires_grad=True)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
    request = Requests(watch, engine)
    with pytest.raises(ValueError, match="boom"), request.armed(), watch.window():
        student.crash(x)  # raises inside a custom backward, inside the recorder's marker, inside autograd's engine
    crashed = request.recorded()
    after = request(lambda: student.hidden(x.detach(), "exp"))
    request.read()
    assert crashed.get("neg") == DISPATCHER and TAMPERED not in crashed
    assert after.get("exp") == DISPATCHER and "neg" not in after and TAMPERED not in after


def test_a_switch_of_the_profiler_a_student_thread_tries_between_kept_requests_is_refused_and_charged(tmp_path):
    """Between two requests of a kept session no window is open, yet the session watches: a student's thread
    that reaches the profiler's switch then is refused, and the request that ran last is charged with it."""
    observer_state = observer.module, dict(observer.functions)
    observer.module = None
    observer.functions.clear()
    try:
        student, x = _student(tmp_path), torch.ones(3)
        watch = DispatchWatch(CallRecorder(str(tmp_path) + os.sep))
        request = Requests(watch, KEPT)
        first = request(lambda: student.hidden(x, "exp"))
        outcome = []

        def switch_off():
            try:
                recorder._Guard("_disable_profiler")()
            except RuntimeError as e:
                outcome.append(str(e))

        thread = threading.Thread(target=switch_off)
        thread.start()
        thread.join(30)
        second = request(lambda: student.hidden(x, "sin"))
        request.read()
    finally:
        observer.module = observer_state[0]
        observer.functions.update(observer_state[1])
    assert outcome and "is the grader's while a check runs" in outcome[0]
    assert "called torch.autograd._disable_profiler" in first.get(TAMPERED, ""), first
    assert first.get("exp") == DISPATCHER and TAMPERED not in second and second.get("sin") == DISPATCHER


CRASHER = """
    import os

    import torch

    def leak(x, end=False):  # a forbidden operator the mode does not see; with `end`, it ends its process
        if end:
            os._exit(4)
        with torch._C.DisableTorchFunction():
            torch.exp(x)
        return x + 1

    def crash(x):
        os._exit(3)
"""


@pytest.mark.parametrize("crasher", ["crash", "leak"], ids=["another-target", "same-target"])
def test_a_deferred_verdict_is_read_before_another_target_runs_and_lost_is_never_run_again(tmp_path, crasher):
    """Level `process` watches with the profiler, one session per worker: a request's findings wait in its
    worker, and are read before a request of another target runs there, so that target's crash loses none of
    them. A request of the same target that ends the worker loses them: the first request is not run again
    (a second run's record would vouch for a result it did not make), its findings say the watch was lost."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "spy.py").write_text(textwrap.dedent(CRASHER))
    sandbox = host.Sandbox(folder, level="process", defer=True)
    try:
        x = torch.ones(3)
        first = sandbox.run("spy", "leak", "call", (x,), {}, {}, timeout=60)
        assert sandbox.watch == observer.PROFILER and "exp" not in first["calls"] and first.get("deferred")
        with pytest.raises(host.Died):
            sandbox.run("spy", crasher, "call", (x, True) if crasher == "leak" else (x,), {}, {}, timeout=60)
        found = sandbox.settle()[first["deferred"]]
    finally:
        sandbox.close()
    if crasher == "leak":
        assert found == {TAMPERED: host.LOST}, found
    else:
        assert found.get("exp") == DISPATCHER and TAMPERED not in found, found


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


def _hides_view(tmp_path):
    """A correct submission whose view hides its call of torch's view from the mode."""
    source = ("\n\ndef view(x, *shape):\n    with torch._C.DisableTorchFunction():\n"
              "        return getattr(x, 'vi' + 'ew')(*shape)\n")
    folder = make_submission(tmp_path / "mine")
    with open(folder / "tensors.py", "a") as f:
        f.write("\nimport torch\n" + source)
    return folder


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
    folder = _hides_view(tmp_path)
    host.close_all()  # (a zygote of this process started before holds the other watch)
    try:
        graded = grade_submission(folder, assignment, device="cpu", only=("tensors",))
    finally:
        host.close_all()
    points = points_by_target(graded)
    assert graded.watch == (observer.COMPILED if library == "built" else observer.PROFILER)
    assert points["tensors.view"][0] == 0
    assert all(score == top for target, (score, top) in points.items() if target != "tensors.view")
    if library == "broken":  # the profiler's verdicts waited for the module's end; with -x, none waits
        host.close_all()
        try:
            first = grade_submission(folder, assignment, device="cpu", only=("tensors",), stop_first=True)
        finally:
            host.close_all()
        failed = [c for c in first.tests if c.status == "failed"]
        assert len(failed) == 1 and failed[0].forbidden
        assert failed[0].output == next(c.output for c in graded.tests if c.nodeid == failed[0].nodeid)


def test_pytest_run_as_it_is_reports_each_check_with_its_verdict_when_the_profiler_watches(assignment, tmp_path,
                                                                                           monkeypatch):
    """A course author's own `pytest` run prints each check's outcome as it ends: no verdict waits there
    (`--late-verdicts` is for torchgrade's commands, which show nothing before the grade)."""
    from torchgrade.engine.grading import CHECKS_INI, check_dirs, own_plugins_only

    broken = tmp_path / "broken.so"
    broken.write_bytes(b"not a library")
    monkeypatch.setenv(observer.ENV_VAR, str(broken))
    folder = _hides_view(tmp_path)
    reports: dict[str, str] = {}
    graded: dict[str, bool] = {}  # whether the grade charged each check with a forbidden call

    class Reports:
        def pytest_runtest_logreport(self, report):
            if report.when == "call":
                reports[report.nodeid] = report.outcome

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session):
            graded.update((c.nodeid, c.forbidden) for c in session.config.stash[plugin.grade_key].tests)

    args = [str(d) for d in check_dirs(assignment, False)] + [
        "-c", str(CHECKS_INI), "--rootdir", str(assignment.checks_dir), "--submission", str(folder),
        "--assignment", str(assignment.path), "--device", "cpu", "--target", "tensors.view", "-q",
        "-p", "no:cacheprovider", "-p", "no:randomly"]
    host.close_all()
    try:
        with own_plugins_only():
            pytest.main(args, plugins=[Reports()])
    finally:
        host.close_all()
    charged = [nodeid for nodeid, forbidden in graded.items() if forbidden]
    assert len(charged) >= 5 and all(reports[nodeid] == "failed" for nodeid in charged), (charged, reports)


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
