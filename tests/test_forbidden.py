"""Forbidden calls: the static scan follows aliases and helpers; run-time names count only from student files."""

import fnmatch
import textwrap

import pytest

from torchgrade.sandbox.forbidden import runtime_violations, static_violations


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
    from torchgrade.sandbox.forbidden import DISPATCHER

    found = runtime_violations({"conv2d": DISPATCHER, "mul": DISPATCHER}, ("conv2d",))
    assert [c.name for c in found] == ["conv2d"]
    assert "torch's dispatcher" in found[0].message("corr2d")


def test_a_recorder_switched_off_fails_a_target_with_forbidden_calls_only():
    from torchgrade.sandbox.forbidden import TAMPERED

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

    from torchgrade.sandbox.forbidden import DISPATCHER

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

    from torchgrade.sandbox.forbidden import DISPATCHER

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

    from torchgrade.sandbox.forbidden import DISPATCHER
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

    from torchgrade.sandbox.forbidden import DISPATCHER

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

    from torchgrade.sandbox.forbidden import DISPATCHER
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


# --- forbidden means the operation, not its spelling ----------------------------------------------------

SPELLINGS = {
    # an overload other than .default, through torch.ops
    "gather.out": ("gather", "torch.ops.aten.gather.out(x.detach(), 1, idx, out=torch.empty(2, 3))"),
    "scatter_.src": ("scatter_", "torch.ops.aten.scatter_.src(torch.zeros(2, 3), 1, idx, x.detach())"),
    "conv2d.padding": ("conv2d", "torch.ops.aten.conv2d.padding(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2), "
                                 "None, [1, 1], 'valid')"),
    # direct entries into a kernel, which neither the mode nor the profiler sees
    "redispatch": ("gather", "torch.ops.aten.gather.default.redispatch(CPU, x, 1, idx)"),
    "redispatch_boxed": ("gather", "torch.ops.aten.gather.default._handle.redispatch_boxed(CPU, x, 1, idx)"),
    "a kernel's call_boxed": ("gather", "torch._C._dispatch_get_computed_kernel_for_dispatch_key('aten::gather', "
                                        "torch._C.DispatchKey.CPU).call_boxed(CPU, x, 1, idx)"),
    # private aliases and torch's Python implementations
    "thnn_conv2d": ("conv2d", "torch._C._nn.thnn_conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2), [2, 2])"),
    "mkldnn_convolution": ("convolution", "torch.mkldnn_convolution(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2), "
                                          "None, [0, 0], [1, 1], [1, 1], 1)"),
    "_pad_enum": ("pad", "torch._C._nn._pad_enum(torch.ones(2, 2), [1, 1], 0, 0.0)"),
    "torch._refs.view": ("view", "torch._refs.view(x, 3, 2)"),
    "torch.ops.prims.view_of": ("view", "torch.ops.prims.view_of(x)"),
    "_reshape_alias": ("view", "torch.ops.aten._reshape_alias(x, [3, 2], [2, 1])"),
    # numpy doing the work on the student's tensors
    "Tensor.numpy": ("view", "np.reshape(x.detach().numpy(), (3, 2))"),
    "np.asarray": ("gather", "np.take_along_axis(np.asarray(x.detach()), np.asarray(idx), 1)"),
    "torch.tensor(ndarray)": ("gather", "torch.tensor(np.take_along_axis(np.ones((2, 3)), np.zeros((2, 1), int), 1))"),
    # dotted names of builtins and of torch's Python code, fetched at run time
    "a builtin by its dotted name": ("torch.nn.functional.one_hot",
                                     "getattr(torch.nn.functional, 'one' + '_hot')(torch.tensor([0, 1]), 2)"),
    "torch.optim by getattr": ("torch.optim.*", "getattr(torch, 'op' + 'tim').SGD([torch.ones(1, requires_grad=True)], "
                                                "lr=0.1).step()"),
}

SPELLED = """
    import numpy as np
    import torch
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    idx = torch.tensor([[0, 1, 2], [2, 1, 0]])
    CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)

    def f():
        try:
            return {call}
        except RuntimeError:
            return None
"""


@pytest.fixture(scope="module")
def guarded():
    """This process prepared as a sandbox is: the direct entries into kernels refuse while watched."""
    from torchgrade.sandbox.recorder import guard_kernel_entries

    guard_kernel_entries()


#: Spellings that only some torch releases have, by the attribute of torch._C they need.
NEEDS = {"a kernel's call_boxed": "_dispatch_get_computed_kernel_for_dispatch_key"}


def spelled(spelling: str) -> tuple[str, str]:
    """(pattern, call) of a spelling; skipped where this torch has no such entry (nothing to spell it with)."""
    import torch

    need = NEEDS.get(spelling)
    if need and not hasattr(torch._C, need):
        pytest.skip(f"torch {torch.__version__} has no torch._C.{need}")
    return SPELLINGS[spelling]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_forbidden_operation_is_caught_however_it_is_spelled(tmp_path, guarded, spelling):
    pattern, call = spelled(spelling)
    calls = recorded(tmp_path, SPELLED.format(call=call), lambda m: m.f())
    found = runtime_violations(calls, (pattern,))
    assert found, calls
    assert all("forbidden call" in c.message("target") for c in found)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_same_calls_are_allowed_where_nothing_is_forbidden(tmp_path, guarded, spelling):
    """Private entries and bridges are refused only for targets that forbid something."""
    calls = recorded(tmp_path, SPELLED.format(call=spelled(spelling)[1]), lambda m: m.f())
    assert runtime_violations(calls, ()) == []


def test_redispatch_works_where_nothing_is_watched(guarded):
    """The refusal is for a watched request only: a target without forbidden calls (or the grader) may use it."""
    import torch

    x, idx = torch.arange(6.0).reshape(2, 3), torch.tensor([[2], [0]])
    cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    assert torch.ops.aten.gather.default.redispatch(cpu, x, 1, idx).tolist() == [[2.0], [3.0]]


def test_the_refused_entry_is_named_in_the_message(tmp_path, guarded):
    calls = recorded(tmp_path, SPELLED.format(call=SPELLINGS["thnn_conv2d"][1]), lambda m: m.f())
    (found,) = runtime_violations(calls, ("conv2d",))
    assert "torch._C._nn.thnn_conv2d" in found.message("corr2d") and "private" in found.message("corr2d")
    calls = recorded(tmp_path, SPELLED.format(call=SPELLINGS["np.asarray"][1]), lambda m: m.f())
    assert any("numpy" in c.message("gather") and "__array__" in c.name for c in runtime_violations(calls, ("x",)))


HONEST = """
    import torch
    def f(x):
        w = torch.nn.Parameter(torch.ones(3))
        layer = torch.nn.Linear(3, 2)
        y = layer(x * w).sum() + x.as_strided((3, 2), (1, 3)).sum()
        assert x.is_contiguous() and not x._base is x
        y.backward()
        print(x.tolist(), torch.tensordot(x, x, dims=([1], [1])))
        return torch.tensor([1.0, 2.0]), torch.as_tensor([3]), x.new_zeros(2)
"""


def test_honest_code_is_not_refused(tmp_path, guarded):
    """Public, documented torch (modules, parameters, printing, a backward pass, tensors made from lists) is
    no private entry and no bridge, and names like is_contiguous are not the operation contiguous."""
    import torch

    calls = recorded(tmp_path, HONEST, lambda m: m.f(torch.ones(2, 3, requires_grad=True)))
    patterns = ("view", "reshape", "contiguous", "clone", "expand", "scatter", "gather", "conv2d", "pad", "*pool*")
    assert runtime_violations(calls, patterns) == [], calls


def bundled_bare_patterns() -> dict[str, set[str]]:
    """{target: its bare forbidden patterns} of the bundled course's assignment.yaml."""
    from conftest import ROOT

    from torchgrade.engine.config import load_assignment

    found = {}
    for exercise in load_assignment(ROOT / "assignment.yaml").exercises:
        for target in exercise.targets:
            bare = {p for p in target.forbidden if "." not in p}
            if bare:
                found[target.qualname] = bare
    return found


def test_the_alias_sets_are_complete_for_every_forbidden_name_of_the_bundled_course():
    """For every bare forbidden name of the course, every spelling torch itself has of a matching operator is
    caught: each overload of each matching aten operator (by torch.ops), each Python implementation of it in
    torch's decomposition table and references, each binding of an operator named after it (`thnn_conv2d`,
    `_pad_enum`) when private or undocumented, and each such operator at the dispatcher."""
    import torch
    import torch._decomp
    import torch._prims.context

    from torchgrade.sandbox.forbidden import DISPATCHER
    from torchgrade.sandbox.entries import BINDINGS, entries

    table = entries()
    patterns = set().union(*bundled_bare_patterns().values())
    assert {"gather", "scatter_", "conv2d", "pad", "*pool*", "view"} <= patterns
    ops = {name.split("::", 1)[1].split(".")[0] for name in torch._C._dispatch_get_all_op_names()
           if name.startswith("aten::")}
    implementations = {**{op.name(): f for op, f in torch._decomp.decomposition_table.items()}}
    checked, public = 0, set()
    for pattern in sorted(patterns):
        matching = {op for op in ops if fnmatch.fnmatchcase(op, pattern)}
        for op in matching:  # every overload, through torch.ops
            packet = getattr(torch.ops.aten, op)
            for overload in packet.overloads():
                names = table.names(getattr(packet, overload), ())
                assert runtime_violations(dict.fromkeys(names, "student.py:1"), (pattern,)), (pattern, names)
                checked += 1
                implementation = implementations.get(f"aten::{op}" + ("" if overload == "default" else f".{overload}"))
                if callable(implementation) and not isinstance(implementation, torch._ops.OpOverload):
                    assert implementation.__module__.startswith(table.implementations), implementation
        named = {op for op in ops if _words_match(op, pattern)}
        for op in named:  # an operator named after it, seen at the dispatcher
            assert runtime_violations({op: DISPATCHER}, (pattern,)), (pattern, op)
        for namespace in BINDINGS:  # a private binding named after it, called by the student
            holder = eval(namespace, {"torch": torch})
            for name in dir(holder):
                if _words_match(name, pattern) and not name.startswith("__"):
                    names = table.names(getattr(holder, name), ())
                    if runtime_violations(dict.fromkeys(names, "student.py:1"), (pattern,)):
                        checked += 1
                    else:  # allowed only as a documented public operation of its own (view_as_real, is_contiguous)
                        public.add(name)
                        assert name in table.public_names, (namespace, name, names)
                        assert not fnmatch.fnmatchcase(table.copies.get(name, ""), pattern), (namespace, name, names)
    for function, ref in torch._prims.context.torch_to_refs_map().items():  # torch's references of the course's ops
        if any(fnmatch.fnmatchcase(getattr(function, "__name__", ""), p) for p in patterns):
            assert ref.__module__.startswith(table.implementations), ref
    assert checked > 100
    assert {"view_copy", "expand_copy", "thnn_conv2d", "_pad_enum"}.isdisjoint(public)


def _words_match(name: str, pattern: str) -> bool:
    words = [w for w in name.split("_") if w]
    return any(fnmatch.fnmatchcase("_".join(words[i:j]), pattern)
               for i in range(len(words)) for j in range(i + 1, len(words) + 1))


def test_a_public_function_without_a_docstring_in_this_torch_is_public_when_another_namespace_documents_it():
    """torch.relu has no docstring in torch 2.11 (F.relu has): there, a check's own relu, called by the
    reference's second_derivative, counted as a private entry and the reference lost its points."""
    from torchgrade.sandbox.entries import _public

    def undocumented():
        pass

    operators = frozenset({"relu", "mkldnn_convolution", "_private"})
    assert _public("relu", undocumented, {"relu"}, operators)
    assert not _public("mkldnn_convolution", undocumented, {"relu"}, operators)
    assert not _public("_private", undocumented, {"_private"}, operators)


def test_an_undocumented_public_method_that_is_no_operator_is_public():
    """`x.new(x)` (an alias of x, in public gradient-reversal layers) is not a private entry point; an operator
    torch does not document (`torch.mkldnn_convolution`, `torch.constant_pad_nd`) stays private."""
    import torch

    from torchgrade.sandbox.entries import PRIVATE, entries

    assert entries().names(torch.Tensor.new, ()) == ("torch.Tensor.new",)
    for op in (torch.mkldnn_convolution, torch.constant_pad_nd):
        assert any(name.startswith(PRIVATE) for name in entries().names(op, ())), op
