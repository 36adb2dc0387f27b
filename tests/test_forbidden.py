"""Forbidden calls: the static scan follows aliases and helpers; run-time names count only from student files."""

import textwrap

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
