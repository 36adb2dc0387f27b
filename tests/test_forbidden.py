"""Forbidden calls: the static scan follows aliases and helpers; run-time names count only from student files."""

import textwrap

import pytest

from torchgrade.forbidden import runtime_violations, static_violations


def scan(tmp_path, source, target, patterns):
    path = tmp_path / "conv.py"
    path.write_text(textwrap.dedent(source))
    return [(c.name, c.pattern, c.where) for c in static_violations(path, target, tuple(patterns))]


def test_finds_an_aliased_functional_call_with_its_line(tmp_path):
    found = scan(tmp_path, """
        import torch.nn.functional as F
        def corr2d(X, K):
            return F.conv2d(X[None, None], K[None, None])[0, 0]
    """, "corr2d", ["conv2d"])
    assert found == [("torch.nn.functional.conv2d", "conv2d", "conv.py line 4")]


def test_follows_module_level_helpers_but_not_unrelated_functions(tmp_path):
    source = """
        import torch
        from torch.nn.functional import max_pool2d as mp
        def helper(x):
            return mp(x, 2)
        def pool2d(X, size):
            return helper(X)
        def unrelated(X):
            return X.unfold(0, 2, 1)
    """
    assert [f[0] for f in scan(tmp_path, source, "pool2d", ["*pool*", "unfold"])] == ["torch.nn.functional.max_pool2d"]


def test_a_students_own_function_with_a_forbidden_name_is_allowed(tmp_path):
    source = """
        def scatter_(target, dim, index, src):
            target[index] = src
            return target
        def scatter_add_(target, dim, index, src):
            return scatter_(target, dim, index, src)
    """
    assert scan(tmp_path, source, "scatter_add_", ["scatter_", "scatter"]) == []


def test_getattr_with_a_constant_name_is_seen(tmp_path):
    found = scan(tmp_path, """
        def view(x, *shape):
            return getattr(x, "view")(*shape)
    """, "view", ["view"])
    assert found and found[0][0] == "getattr(..., 'view')"


def test_dotted_patterns_match_imported_modules(tmp_path):
    found = scan(tmp_path, """
        from torch import optim
        def sgd_step_(params, lr):
            optim.SGD(params, lr).step()
    """, "sgd_step_", ["torch.optim.*"])
    assert found[0][0] == "torch.optim.SGD"


def test_runtime_calls_without_a_student_line_are_the_harness_own():
    calls = {"backward": "", "view": "tensors.py:12", "convolution.default": "conv.py:3"}
    found = runtime_violations(calls, ("view", "backward", "convolution"))
    assert [(c.name, c.where) for c in found] == [
        ("view", "tensors.py line 12 (seen while it ran)"),
        ("convolution.default", "conv.py line 3 (seen while it ran)")]


def test_a_call_seen_only_at_the_dispatcher_counts_and_says_where():
    from torchgrade.forbidden import DISPATCHER

    found = runtime_violations({"conv2d": DISPATCHER, "mul": DISPATCHER}, ("conv2d",))
    assert [c.name for c in found] == ["conv2d"]
    assert "torch's dispatcher" in found[0].message("corr2d")


def test_a_recorder_switched_off_fails_a_target_with_forbidden_calls_only():
    from torchgrade.forbidden import TAMPERED

    calls = {TAMPERED: "stopped the profiler"}
    found = runtime_violations(calls, ("view",))
    assert len(found) == 1 and "may not switch off the grader's call recorder" in found[0].message("view")
    assert "stopped the profiler" in found[0].message("view")
    assert runtime_violations(calls, ()) == []


# --- the recorder itself, in this process (the sandbox runs the same code) ---------------------------

def recorded(tmp_path, source, call):
    """What the recorder keeps of `call(module)`: {name: where}, for a module made of `source`."""
    return watched(tmp_path, source, call).mode.calls


def student_module(tmp_path, source):
    """A module made of `source`, imported from tmp_path/student.py (the recorder's student file)."""
    import importlib.util

    path = tmp_path / "student.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"student_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def watched(tmp_path, source, call):
    """The dispatcher watch after `call(module)` ran in one window of a request, for a module made of `source`."""
    from torchgrade.sandbox.recorder import CallRecorder, DispatchWatch

    module = student_module(tmp_path, source)
    watch = DispatchWatch(CallRecorder(str(tmp_path) + "/"))
    with watch.armed():
        with watch.window():
            call(module)
    return watch


HIDDEN = {
    "DisableTorchFunction": """
        import torch
        def f(x):
            with torch._C.DisableTorchFunction():
                return getattr(x, "vi" + "ew")(-1)
    """,
    "the mode popped off the stack": """
        import torch
        def f(x):
            mode = torch._C._pop_torch_function_stack()
            try:
                return getattr(x, "vi" + "ew")(-1)
            finally:
                torch._C._push_on_torch_function_stack(mode)
    """,
    "another thread": """
        import threading
        def f(x):
            out = []
            t = threading.Thread(target=lambda: out.append(getattr(x, "vi" + "ew")(-1)))
            t.start()
            t.join()
            return out[0]
    """,
}


@pytest.mark.parametrize("how", HIDDEN)
def test_a_call_hidden_from_the_mode_is_seen_at_the_dispatcher(tmp_path, how):
    import torch

    from torchgrade.forbidden import DISPATCHER

    calls = recorded(tmp_path, HIDDEN[how], lambda m: m.f(torch.zeros(2, 2)))
    assert calls.get("view") == DISPATCHER, calls


def test_autograd_run_by_the_engine_inside_a_backward_is_seen(tmp_path):
    import torch

    source = """
        import torch
        from torch.autograd import Variable

        class Exp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.exp()

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                with torch.enable_grad():
                    x = x.detach().requires_grad_(True)
                    y = x.exp()
                    return Variable._execution_engine.run_backward((y,), (g,), False, False, (x,), False, False)[0]
    """

    def call(m):
        x = torch.ones(3, requires_grad=True)
        m.Exp.apply(x).sum().backward()

    calls = recorded(tmp_path, source, call)
    assert {"backward", "grad"} <= set(calls), calls


@pytest.mark.parametrize("run_backward", ["y.sum().backward()", "torch.autograd.grad(y.sum(), x)"])
def test_a_custom_backward_run_by_the_students_own_backward_pass_is_watched(tmp_path, run_backward):
    """Calls the mode saw run unrecorded, except those that may run autograd's engine: a custom Function's
    backward run there is the student's code, and a call hidden in it is seen at the dispatcher."""
    import torch

    from torchgrade.forbidden import DISPATCHER

    source = f"""
        import torch

        class Twice(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                with torch._C.DisableTorchFunction():
                    return getattr(g, "vi" + "ew")(-1) * 2

        def f(x):
            y = Twice.apply(x)
            return {run_backward}
    """
    calls = recorded(tmp_path, source, lambda m: m.f(torch.ones(3, requires_grad=True)))
    assert calls.get("view") == DISPATCHER, calls


def test_the_operators_of_a_call_the_mode_saw_are_not_recorded(tmp_path):
    """The profiler's cost is per recorded event: honest code making hundreds of torch calls (each running
    several operators: linear is t and addmm, reshape a view) leaves only the request's own markers."""
    import torch

    source = """
        import torch
        def f(x, w):
            for _ in range(100):
                x = torch.nn.functional.linear(x, w).reshape(2, 3).relu()
            return x
    """
    watch = watched(tmp_path, source, lambda m: m.f(torch.ones(2, 3), torch.eye(3)))
    assert watch.mode.calls.keys() >= {"linear", "reshape", "relu"}
    assert 0 < watch.events < 10, watch.events


def test_the_probes_own_operators_around_the_students_windows_are_not_recorded_and_each_window_is(tmp_path):
    """In the probe's thread only the student's windows count: its own work around them (hundreds of
    operators here) costs no profiler event, and recording starts again in every window."""
    import torch

    from torchgrade.forbidden import DISPATCHER
    from torchgrade.sandbox.recorder import CallRecorder, DispatchWatch

    module = student_module(tmp_path, HIDDEN["DisableTorchFunction"])
    watch = DispatchWatch(CallRecorder(str(tmp_path) + "/"))
    x = torch.ones(2, 3)
    with watch.armed():
        for _ in range(100):
            x = (x + 1).relu()  # the probe's own work, before the first window and between windows
        with watch.window():
            pass
        for _ in range(100):
            x = (x + 1).relu()
        with watch.window():
            module.f(torch.arange(6.0))  # a view hidden from the mode, in the second window
        x = x + 1
    assert watch.mode.calls.get("view") == DISPATCHER
    assert 0 < watch.events < 20, watch.events


def test_honest_code_leaves_only_what_the_mode_saw(tmp_path):
    """Printing, reshape (a view inside), a Parameter, a backward pass (expand inside): nothing at the dispatcher."""
    import torch

    from torchgrade.forbidden import DISPATCHER

    source = """
        import torch
        def f(x):
            w = torch.nn.Parameter(torch.ones(4))
            y = (x.reshape(4) * w).sum()
            print(y)
            y.backward()
            return w.grad
    """
    calls = recorded(tmp_path, source, lambda m: m.f(torch.ones(2, 2)))
    hidden = {name for name, where in calls.items() if where == DISPATCHER}
    assert not hidden & {"view", "expand", "reshape", "backward", "grad"}, calls
    assert "reshape" in calls and "backward" in calls


def test_the_dispatcher_is_watched_for_targets_with_forbidden_calls_only(tmp_path):
    """The profiler doubles a request's cost: the trusted side asks for it where a call may be forbidden
    (differential: `watch_dispatcher=bool(patterns)`), and the sandbox arms it exactly then."""
    import torch

    from torchgrade.forbidden import DISPATCHER
    from torchgrade.sandbox.host import Sandbox

    (tmp_path / "student.py").write_text(textwrap.dedent(HIDDEN["DisableTorchFunction"]))
    sandbox = Sandbox(tmp_path)
    try:
        args = (torch.zeros(2, 2),)
        watched = sandbox.run("student", "f", "call", args, {}, {}, timeout=60, watch_dispatcher=True)
        plain = sandbox.run("student", "f", "call", args, {}, {}, timeout=60, watch_dispatcher=False)
    finally:
        sandbox.close()
    assert watched["calls"].get("view") == DISPATCHER, watched["calls"]
    assert "view" not in plain["calls"], plain["calls"]
