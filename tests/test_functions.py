"""Checks for functions.py: the reference scores full marks, the stubs zero, other correct Functions too,
and each realistic mistake loses exactly its own target, with a message that names what went wrong."""

import pytest

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets


def test_reference_scores_full_marks(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="cpu", only=("functions",))
    assert g.max_score == pytest.approx(assignment.exercise("functions").points)
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]


def test_untouched_stubs_score_zero(assignment):
    g = grade_submission(ROOT / "exercises", assignment, device="cpu", only=("functions",))
    assert g.score == 0 and g.max_score == pytest.approx(assignment.exercise("functions").points)
    assert all("not implemented yet" in t.output for t in g.tests if t.status == "failed")


def lost_with(g, target, *words):
    """Assert that only `target` lost points and that one of its messages holds all `words`."""
    assert lost_targets(g) == {target}
    messages = failures(g, target)
    assert any(all(w in m for w in words) for m in messages), messages[:2]


OTHER_CORRECT_FUNCTIONS = """
    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            return (ctx.saved_tensors[0] * grad_output, None)      # a tuple, with a trailing None


    class GradCoeff(Function):
        @staticmethod
        def forward(ctx, x, coeff):
            ctx.coeff = coeff
            return x                                               # autograd turns it into a view

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.coeff, None


    class LinearFn(Function):
        @staticmethod
        def forward(ctx, x, weight, bias=None):
            ctx.save_for_backward(x, weight, bias)
            out = torch.einsum("...i,oi->...o", x, weight)
            return out if bias is None else out + bias

        @staticmethod
        def backward(ctx, grad_output):
            x, weight, bias = ctx.saved_tensors
            g = [None] * len(ctx.needs_input_grad)
            batch = tuple(range(grad_output.dim() - 1))
            if ctx.needs_input_grad[0]:
                g[0] = torch.einsum("...o,oi->...i", grad_output, weight)
            if ctx.needs_input_grad[1]:
                g[1] = torch.einsum("...o,...i->oi", grad_output, x)
            if len(g) > 2 and ctx.needs_input_grad[2]:
                g[2] = grad_output.sum(dim=batch) if batch else grad_output.clone()
            return tuple(g)


    class Conv2dFn(Function):
        @staticmethod
        def forward(ctx, X, weight):
            ctx.save_for_backward(X, weight)
            return F.conv2d(X, weight)

        @staticmethod
        def backward(ctx, grad_out):
            X, weight = ctx.saved_tensors
            batched = X.dim() == 4
            X4, g4 = (X, grad_out) if batched else (X[None], grad_out[None])
            kh, kw = weight.shape[-2:]
            grad_w = torch.zeros_like(weight)                    # a loop over kernel positions
            for i in range(kh):
                for j in range(kw):
                    patch = X4[:, :, i:i + g4.shape[2], j:j + g4.shape[3]]
                    grad_w[:, :, i, j] = torch.einsum("nohw,nihw->oi", g4, patch)
            grad_X = F.conv_transpose2d(g4, weight)
            return (grad_X if batched else grad_X[0]), grad_w
"""


def test_other_correct_functions_score_full_marks(grade, assignment):
    g = grade(only=("functions",), append={"functions": OTHER_CORRECT_FUNCTIONS})
    assert lost_targets(g) == set(), [(t.name, t.output) for t in g.tests if t.status == "failed"][:2]
    assert g.score == pytest.approx(assignment.exercise("functions").points)


EXP_MISTAKES = {
    "is torch's own exp": ("""
        class Exp:
            @staticmethod
            def apply(x):
                return torch.exp(x)
    """, ("['grad_fn']: expected 'Exp.backward', got 'ExpBackward0'", "own backward node")),
    "saves its input instead of its result": ("""
        class Exp(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.exp()

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output * x.exp()
    """, ("['saved_result']: expected True, got False", "save its result exp(x)")),
    "ignores grad_output": ("""
        class Exp(Function):
            @staticmethod
            def forward(ctx, x):
                result = x.exp()
                ctx.save_for_backward(result)
                return result

            @staticmethod
            def backward(ctx, grad_output):
                (result,) = ctx.saved_tensors
                return result
    """, ("['backward_returned'][0]", "must return grad_output * result")),
}


@pytest.mark.parametrize("mistake", EXP_MISTAKES)
def test_a_wrong_exp_loses_exp(grade, mistake):
    code, words = EXP_MISTAKES[mistake]
    lost_with(grade(only=("functions",), append={"functions": code}), "functions.Exp", *words)


AUTOGRAD_IN_BACKWARD = {
    "torch.autograd.grad": ("torch.autograd.grad(y, x, grad_output)[0]", "`grad` (here `torch.autograd.grad`)"),
    "y.backward": ("y.backward(grad_output) or x.grad", "`y.backward`"),
    "an autograd call the source does not show": ('getattr(torch.autograd, "gr" + "ad")(y, x, grad_output)[0]',
                                                  "`grad`", "(seen while it ran)"),
}


@pytest.mark.parametrize("call", AUTOGRAD_IN_BACKWARD)
def test_an_exp_whose_backward_runs_autograd_scores_zero(grade, call):
    expression, *words = AUTOGRAD_IN_BACKWARD[call]
    g = grade(only=("functions",), append={"functions": f"""
        class Exp(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.exp()

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                with torch.enable_grad():
                    x = x.detach().requires_grad_(True)
                    y = torch.exp(x)
                    return {expression}
    """})
    lost_with(g, "functions.Exp", "forbidden call: Exp may not use", *words)
    assert all(t.score == 0 for t in g.tests if t.target == "Exp")


def test_a_grad_coeff_without_none_for_coeff_loses_grad_coeff(grade):
    g = grade(only=("functions",), append={"functions": """
        class GradCoeff(Function):
            @staticmethod
            def forward(ctx, x, coeff):
                ctx.coeff = coeff
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad_output):
                return ctx.coeff * grad_output
    """})
    lost_with(g, "functions.GradCoeff", "['backward_returned']: expected 2 items", "(ctx.coeff * grad_output, None)")


def test_a_grad_coeff_that_copies_x_loses_grad_coeff(grade):
    g = grade(only=("functions",), replace={"functions": [("return x.view_as(x)", "return x.clone()")]})
    lost_with(g, "functions.GradCoeff", "expected True, got False", "return x.view_as(x)")


LINEAR_MISTAKES = {
    "a bias gradient not summed over the batch": (
        ("grad_bias = grad_output.sum_to_size(ctx.bias_shape)", "grad_bias = grad_output"),
        ("['backward_returned'][2]", "expected (4,), got (5, 4)", "summed over every batch dimension")),
    "a bias gradient summed over the wrong dimension": (
        ("grad_bias = grad_output.sum_to_size(ctx.bias_shape)", "grad_bias = grad_output.sum(-1)"),
        ("['backward_returned'][2]", "expected (4,), got (5,)", "in the shape of bias")),
    "every gradient whatever ctx.needs_input_grad says": (
        ("needs = ctx.needs_input_grad", "needs = [True] * len(ctx.needs_input_grad)"),
        ("['backward_returned'][1]", "expected None", "ctx.needs_input_grad[i] is False")),
    "a bias gradient for two arguments": (
        ("        if len(needs) == 2:\n            return grad_x, grad_weight\n",
         "        grad_bias = grad_output.sum(0) if grad_bias is None else grad_bias\n"),
        ("['backward_returned']: expected 2 items", "one value per argument given to apply")),
}


@pytest.mark.parametrize("mistake", LINEAR_MISTAKES)
def test_a_wrong_linear_fn_loses_linear_fn(grade, mistake):
    change, words = LINEAR_MISTAKES[mistake]
    lost_with(grade(only=("functions",), replace={"functions": [change]}), "functions.LinearFn", *words)


def test_a_conv2d_fn_missing_a_transpose_loses_conv2d_fn(grade):
    g = grade(only=("functions",), replace={"functions": [(
        "grad_weight = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)",
        "grad_weight = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1))")]})
    lost_with(g, "functions.Conv2dFn", "['backward_returned'][1]", "expected (4, 3, 2, 3), got (3, 4, 2, 3)",
              "the transposes matter")


def test_a_legendre_model_that_bypasses_legendre_p3_loses_legendre_model(grade):
    g = grade(only=("functions",), replace={"functions": [(
        "return a + b * LegendreP3.apply(c + d * x)",
        "t = c + d * x\n    return a + b * 0.5 * (5 * t ** 3 - 3 * t)")]})
    lost_with(g, "functions.legendre_model", "['graph_uses_function']: expected True, got False",
              "LegendreP3.apply(c + d * x)")


def test_a_wrong_backward_fails_gradcheck_on_cuda_with_the_entry_that_differs(grade):
    """On CUDA gradcheck compares along random directions (fast mode: the stand-in pays per operator); a wrong
    backward still fails there, and the message names the first entry that differs, as on the CPU."""
    g = grade(only=("functions",), device="all", replace={"functions": [(
        "return grad_output * 1.5 * (5 * x ** 2 - 1)", "return grad_output * 1.5 * (5 * x ** 2 - 2)")]})
    failed = {t.name: t.output for t in g.tests if t.status == "failed" and "gradcheck" in t.name}
    assert set(failed) == {"functions.LegendreP3: p3 backward passes gradcheck [cpu]",
                           "functions.LegendreP3: p3 backward passes gradcheck [cuda]"}
    for output in failed.values():
        assert "Jacobian mismatch for output 0 with respect to input 0: 5 of 25 entries differ; d(out[0])/d(in[0]) is" \
            in output and "by your backward" in output, output
