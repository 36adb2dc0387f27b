"""The conv checks: fair to every correct style, and each realistic mistake costs exactly its own target."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from torchgrade.engine.differential import load_reference
from torchgrade.engine.grading import grade_submission
from torchgrade.sandbox.probes import Target, load_course, run_probe

from conftest import ROOT, failures, lost_targets, make_submission, points_by_target

with warnings.catch_warnings():  # the checks' `target` mark is registered by the grading plugin, not here
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    from graders.checks.hidden.test_conv import VERTICAL_RATE, VERTICAL_STEPS, vertical_edges
    from graders.checks.visible.test_conv import LEARNING_RATE, LEARNING_STEPS, horizontal_edges


@pytest.fixture
def grade_conv(assignment, tmp_path):
    """grade_conv(**make_submission_kwargs) -> (Grade of the whole conv exercise on CPU, conv.py's path)."""
    counter = iter(range(1000))

    def run(**changes) -> tuple:
        folder = make_submission(tmp_path / f"submission{next(counter)}", **changes)
        return grade_submission(folder, assignment, device="cpu", only=("conv",)), folder / "conv.py"

    return run


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the only line of `path` that contains `text`."""
    lines = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, lines
    return lines[0]


def failed_checks(grade, target: str) -> list[str]:
    return [t.name for t in grade.tests if f"{t.exercise}.{t.target}" == target and t.status in ("failed", "error")]


# --- the learning checks' premise ---------------------------------------------------------------

@pytest.mark.parametrize("scenario", ["horizontal", "vertical"])
def test_the_reference_learns_the_edge_kernel_in_the_training_checks(scenario):
    if scenario == "horizontal":
        (x, y, state), kernel_size, kernel = horizontal_edges("cpu"), (1, 2), [[1.0, -1.0]]
        steps, lr = LEARNING_STEPS, LEARNING_RATE
    else:
        noise = torch.randn(8, 6, generator=torch.Generator().manual_seed(603), dtype=torch.float64)
        (x, y, state), kernel_size, kernel = vertical_edges(noise, "cpu"), (2, 1), [[1.0], [-1.0]]
        steps, lr = VERTICAL_STEPS, VERTICAL_RATE
    conv2d = load_reference(ROOT / "reference" / "conv.py").Conv2D
    load_course(ROOT / "graders" / "probes")  # the course's probes, also when this test runs first
    outcome = run_probe("module_sgd_on_device", Target(conv2d, "Conv2D"), (kernel_size,), {},
                        {"inputs": (x,), "labels": y, "state": state, "steps": steps, "lr": lr})["value"]
    torch.testing.assert_close(outcome["state"]["weight"], torch.tensor(kernel), atol=0.02, rtol=0)
    torch.testing.assert_close(outcome["state"]["bias"], torch.zeros(1), atol=0.01, rtol=0)
    assert outcome["losses"][-1] < 0.02 * outcome["losses"][0]


# --- fairness: other correct styles get full marks ----------------------------------------------

LOOPS = """
    import math


    def corr2d(X, K):
        if X.dim() != 2 or K.dim() != 2:
            raise RuntimeError("corr2d needs a 2-D X and a 2-D K")
        h, w = K.shape
        if h < 1 or w < 1 or h > X.shape[0] or w > X.shape[1]:
            raise RuntimeError("the kernel must fit inside X")
        Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1), dtype=torch.result_type(X, K), device=X.device)
        for i in range(Y.shape[0]):
            for j in range(Y.shape[1]):
                Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
        return Y


    def corr2d_multi_in(X, K):
        if X.dim() != 3 or K.dim() != 3 or X.shape[0] != K.shape[0]:
            raise RuntimeError("X and K need the same number of channels")
        return sum(corr2d(x, k) for x, k in zip(X, K))


    def corr2d_multi_in_out(X, K):
        if K.dim() != 4:
            raise RuntimeError("K must be (C_out, C, h, w)")
        return torch.stack([corr2d_multi_in(X, k) for k in K], 0)


    def conv_output_size(n, kernel, padding=0, stride=1):
        if any(type(v) is not int for v in (n, kernel, padding, stride)):
            raise ValueError("the arguments must be ints")
        if n < 1 or kernel < 1 or padding < 0 or stride < 1:
            raise ValueError("invalid size")
        out = math.floor((n - kernel + 2 * padding) / stride) + 1
        if out < 1:
            raise ValueError("the kernel does not fit")
        return out


    def pad2d(X, padding):
        ph, pw = (padding, padding) if isinstance(padding, int) else padding
        if X.dim() < 2 or ph < 0 or pw < 0:
            raise ValueError("bad padding")
        H, W = X.shape[-2:]
        out = X.new_zeros(X.shape[:-2] + (H + 2 * ph, W + 2 * pw))
        out[..., ph:ph + H, pw:pw + W] = X
        return out


    def pool2d(X, pool_size, mode="max", stride=1, padding=0):
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)
        if mode not in ("max", "avg"):
            raise ValueError("mode must be max or avg")
        (kh, kw), (sh, sw), (ph, pw) = pair(pool_size), pair(stride), pair(padding)
        if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0 or ph > kh // 2 or pw > kw // 2 or X.dim() < 2:
            raise ValueError("bad pooling arguments")
        H, W = X.shape[-2:]
        Ho, Wo = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
        if Ho < 1 or Wo < 1:
            raise ValueError("the window does not fit")
        fill = 0
        if mode == "max":
            fill = float("-inf") if X.is_floating_point() else torch.iinfo(X.dtype).min
        P = X.new_full(X.shape[:-2] + (H + 2 * ph, W + 2 * pw), fill)
        P[..., ph:ph + H, pw:pw + W] = X
        Y = X.new_zeros(X.shape[:-2] + (Ho, Wo))
        for i in range(Ho):
            for j in range(Wo):
                window = P[..., i * sh:i * sh + kh, j * sw:j * sw + kw]
                if mode == "max":
                    Y[..., i, j] = window.flatten(-2).max(-1).values  # the first maximum gets the gradient
                elif X.is_floating_point():
                    Y[..., i, j] = window.sum(dim=(-2, -1)) / (kh * kw)
                else:
                    Y[..., i, j] = torch.div(window.sum(dim=(-2, -1)), kh * kw, rounding_mode="trunc")
        return Y


    class Conv2D(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            size = kernel_size if isinstance(kernel_size, tuple) else (kernel_size, kernel_size)
            self.weight = nn.Parameter(torch.rand(size))
            self.bias = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return corr2d(x, self.weight) + self.bias
"""

STACKED = """
    def corr2d(X, K):
        if X.dim() != 2 or K.dim() != 2 or min(K.shape) < 1 or K.shape[0] > X.shape[0] or K.shape[1] > X.shape[1]:
            raise RuntimeError("X and K must be 2-D and K must fit inside X")
        (H, W), (h, w) = X.shape, K.shape
        dtype = torch.promote_types(X.dtype, K.dtype)
        shifted = torch.stack([X[a:a + H - h + 1, b:b + W - w + 1] for a in range(h) for b in range(w)])
        return torch.einsum("k,kij->ij", K.reshape(-1).to(dtype), shifted.to(dtype))


    def pool2d(X, pool_size, mode="max", stride=1, padding=0):
        if mode not in ("max", "avg"):
            raise ValueError(f"unknown mode {mode!r}")
        kh, kw = _pair(pool_size, "pool_size", 1)
        sh, sw = _pair(stride, "stride", 1)
        ph, pw = _pair(padding, "padding", 0)
        if ph > kh // 2 or pw > kw // 2 or X.dim() < 2:
            raise ValueError("padding larger than half the window, or X below 2-D")
        H, W = X.shape[-2:]
        Ho, Wo = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
        if Ho < 1 or Wo < 1:
            raise ValueError("the window does not fit")
        P = _pad(X, ph, pw, _lowest(X.dtype) if mode == "max" else 0)
        windows = torch.stack([P[..., a:a + sh * (Ho - 1) + 1:sh, b:b + sw * (Wo - 1) + 1:sw]
                               for a in range(kh) for b in range(kw)])
        if mode == "max":
            return windows.max(0).values  # the first maximum (row by row) gets the gradient, as F.max_pool2d
        total = windows.sum(0)
        return total / (kh * kw) if X.is_floating_point() else torch.div(total, kh * kw, rounding_mode="trunc")
"""


@pytest.mark.parametrize("style", ["loops-over-output-pixels", "stacked-shifts"])
def test_other_correct_styles_get_full_marks(grade_conv, style):
    g, _ = grade_conv(append={"conv": LOOPS if style == "loops-over-output-pixels" else STACKED})
    assert g.score == g.max_score == 18, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]


# --- realistic mistakes cost exactly their own target -------------------------------------------

def test_an_output_built_with_torch_zeros_on_the_cpu_fails_on_float64(grade_conv):
    g, _ = grade_conv(append={"conv": """
        def corr2d(X, K):  # the notes' version: Y is float32 on the CPU whatever X is
            h, w = K.shape
            Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
            for i in range(Y.shape[0]):
                for j in range(Y.shape[1]):
                    Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
            return Y
    """})
    assert lost_targets(g) == {"conv.corr2d"}
    dtype_messages = [m for m in failures(g, "conv.corr2d") if "dtype" in m]
    assert dtype_messages and "expected torch.float64, got torch.float32" in dtype_messages[0]
    assert "conv.corr2d: keeps float64 inputs in float64 [cpu]" in failed_checks(g, "conv.corr2d")


def test_a_kernel_cut_off_from_autograd_loses_its_gradient(grade_conv):
    term = "X[a:a + Ho, b:b + Wo] * K[a, b]"
    g, _ = grade_conv(replace={"conv": [(term, term + ".item()")]})  # a number: no gradient reaches K
    # Conv2D's forward is corr2d(x, weight) + bias, so its weight gets no gradient either.
    assert lost_targets(g) == {"conv.corr2d", "conv.Conv2D"}
    assert "conv.corr2d: passes gradients back to x and k [cpu]" in failed_checks(g, "conv.corr2d")
    assert any("['grads'][1]" in m for m in failures(g, "conv.corr2d"))


def test_output_channels_stacked_on_the_wrong_dim_fail_on_shape(grade_conv):
    g, _ = grade_conv(append={"conv": """
        def corr2d_multi_in_out(X, K):
            return torch.stack([corr2d_multi_in(X, k) for k in K], -1)
    """})
    assert lost_targets(g) == {"conv.corr2d_multi_in_out"}
    message = failures(g, "conv.corr2d_multi_in_out")[0]
    assert "shape" in message and "(3, 2, 2)" in message and "(2, 2, 3)" in message


def test_an_output_size_rounded_instead_of_floored_is_caught(grade_conv):
    g, _ = grade_conv(append={"conv": """
        _floored = conv_output_size

        def conv_output_size(n, kernel, padding=0, stride=1):
            _floored(n, kernel, padding, stride)  # keeps the reference's ValueErrors
            return round((n - kernel + 2 * padding) / stride) + 1
    """})
    assert lost_targets(g) == {"conv.conv_output_size"}
    assert any("expected 2, got 3" in m for m in failures(g, "conv.conv_output_size"))


def test_an_output_size_that_never_raises_is_caught(grade_conv):
    g, _ = grade_conv(append={"conv": """
        def conv_output_size(n, kernel, padding=0, stride=1):
            return (n - kernel + 2 * padding) // stride + 1
    """})
    assert lost_targets(g) == {"conv.conv_output_size"}
    assert "conv.conv_output_size: raises value error when the kernel does not fit" in \
        failed_checks(g, "conv.conv_output_size")
    assert all("ValueError" in m for m in failures(g, "conv.conv_output_size"))


def test_padding_on_one_side_only_is_caught(grade_conv):
    g, _ = grade_conv(append={"conv": """
        def pad2d(X, padding):  # all 2*p rows below and 2*p columns right: the right shape, shifted values
            ph, pw = _pair(padding, "padding", minimum=0)
            rows = X.new_zeros(X.shape[:-2] + (2 * ph, X.shape[-1]))
            X = torch.cat([X, rows], dim=-2)
            return torch.cat([X, X.new_zeros(X.shape[:-1] + (2 * pw,))], dim=-1)
    """})
    assert lost_targets(g) == {"conv.pad2d"}
    assert any("differ" in m for m in failures(g, "conv.pad2d"))


def test_an_average_that_skips_the_padding_zeros_is_caught(grade_conv):
    g, _ = grade_conv(append={"conv": """
        _pool = pool2d

        def pool2d(X, pool_size, mode="max", stride=1, padding=0):
            if mode != "avg":
                return _pool(X, pool_size, mode, stride, padding)
            kh, kw = _pair(pool_size, "pool_size", minimum=1)
            total = _pool(X, pool_size, "avg", stride, padding) * (kh * kw)
            count = _pool(torch.ones_like(X), pool_size, "avg", stride, padding) * (kh * kw)
            return total / count  # count_include_pad=False
    """})
    assert lost_targets(g) == {"conv.pool2d"}
    assert "conv.pool2d: average counts the padding zeros [cpu]" in failed_checks(g, "conv.pool2d")
    assert "conv.pool2d: average pools the notes example [cpu]" not in failed_checks(g, "conv.pool2d")


def test_max_pooling_with_zero_padding_is_caught(grade_conv):
    g, _ = grade_conv(replace={"conv": [('_lowest(X.dtype) if mode == "max" else 0', "0")]})
    assert lost_targets(g) == {"conv.pool2d"}
    assert "conv.pool2d: max padding never wins over negative values [cpu]" in failed_checks(g, "conv.pool2d")


def test_a_pool_that_ignores_the_stride_is_caught(grade_conv):
    g, _ = grade_conv(append={"conv": """
        _pool = pool2d

        def pool2d(X, pool_size, mode="max", stride=1, padding=0):
            return _pool(X, pool_size, mode, 1, padding)
    """})
    assert lost_targets(g) == {"conv.pool2d"}
    message = failures(g, "conv.pool2d")[0]
    assert "shape" in message and "stride=2" in message


def test_a_bias_of_shape_empty_is_caught(grade_conv):
    g, _ = grade_conv(replace={"conv": [("nn.Parameter(torch.randn(1))", "nn.Parameter(torch.randn(()))")]})
    assert lost_targets(g) == {"conv.Conv2D"}
    message = failures(g, "conv.Conv2D")[0]
    assert "['bias']" in message and "(1,)" in message and "()" in message


def test_a_weight_that_is_not_a_parameter_is_caught(grade_conv):
    g, _ = grade_conv(replace={"conv": [("nn.Parameter(torch.randn(kernel_size))",
                                         "torch.randn(kernel_size, requires_grad=True)")]})
    assert lost_targets(g) == {"conv.Conv2D"}
    assert "missing 'weight'" in failures(g, "conv.Conv2D")[0]
    assert "conv.Conv2D: registers weight and bias as parameters" in failed_checks(g, "conv.Conv2D")


# --- forbidden calls cost the whole target, with the call and its line ---------------------------

@pytest.mark.parametrize("case", ["F.conv2d-in-corr2d", "F.max_pool2d-in-pool2d", "F.pad-in-pad2d",
                                  "unfold-in-corr2d_multi_in"])
def test_a_forbidden_call_costs_exactly_its_target(grade_conv, case):
    code, line_text, name, lost = {
        "F.conv2d-in-corr2d": ("""
            import torch.nn.functional as F

            def corr2d(X, K):
                return F.conv2d(X[None, None], K[None, None])[0, 0]
        """, "return F.conv2d(", "conv2d", {"corr2d", "Conv2D"}),  # Conv2D's forward calls corr2d
        "F.max_pool2d-in-pool2d": ("""
            import torch.nn.functional as F
            _pool = pool2d

            def pool2d(X, pool_size, mode="max", stride=1, padding=0):
                if mode == "max" and X.dim() == 4:
                    return F.max_pool2d(X, pool_size, stride, padding)
                return _pool(X, pool_size, mode, stride, padding)
        """, "return F.max_pool2d(", "max_pool2d", {"pool2d"}),
        "F.pad-in-pad2d": ("""
            import torch.nn.functional as F

            def pad2d(X, padding):
                ph, pw = _pair(padding, "padding", minimum=0)
                return F.pad(X, (pw, pw, ph, ph))
        """, "return F.pad(", "pad", {"pad2d"}),
        "unfold-in-corr2d_multi_in": ("""
            def corr2d_multi_in(X, K):
                patches = X.unfold(1, K.shape[1], 1).unfold(2, K.shape[2], 1)  # (C, H', W', h, w)
                return torch.einsum("cijhw,chw->ij", patches, K)
        """, "patches = X.unfold(", "unfold", {"corr2d_multi_in"}),
    }[case]
    g, path = grade_conv(append={"conv": code})
    lost = {f"conv.{name}" for name in lost}
    assert lost_targets(g) == lost
    assert all(points_by_target(g)[t][0] == 0 for t in lost)
    line = line_of(path, line_text)
    for target in lost:
        message = failures(g, target)[0]
        assert message.startswith(f"forbidden call: {target.split('.')[1]} may not use")
        assert f"`{name}`" in message or f".{name}`" in message  # the pattern itself, or the call it matched
        assert f"conv.py line {line}" in message


def test_a_forbidden_call_hidden_from_the_source_is_caught_while_it_runs(grade_conv):
    g, path = grade_conv(append={"conv": """
        def corr2d_multi_in_out(X, K):
            convolve = getattr(torch, "con" + "v2d")
            return convolve(X[None], K)[0]
    """})
    assert lost_targets(g) == {"conv.corr2d_multi_in_out"}
    assert points_by_target(g)["conv.corr2d_multi_in_out"][0] == 0
    message = failures(g, "conv.corr2d_multi_in_out")[0]
    assert "`conv2d`" in message and "seen while it ran" in message
    assert f"conv.py line {line_of(path, 'return convolve(')}" in message
