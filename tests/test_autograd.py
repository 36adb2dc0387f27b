"""Checks for autograd.py: the reference scores full marks, the stubs zero, and each realistic mistake
loses exactly the points of its own target, with a message that names what went wrong."""

import pytest

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets


def test_reference_scores_full_marks(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="cpu", only=("autograd",))
    assert g.max_score == pytest.approx(assignment.exercise("autograd").points)
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]


def test_untouched_stubs_score_zero(assignment):
    g = grade_submission(ROOT / "exercises", assignment, device="cpu", only=("autograd",))
    assert g.score == 0 and g.max_score == pytest.approx(assignment.exercise("autograd").points)
    assert all("not implemented yet" in t.output for t in g.tests if t.status == "failed")


OTHER_CORRECT_AUTOGRAD = """
    def vjp(f, x, v):
        x_ = x.clone().detach().requires_grad_(True)     # clone first (an inference tensor's alias refuses grad)
        y = f(x_)
        if not y.requires_grad:
            return torch.zeros_like(x)
        (g,) = torch.autograd.grad(y, x_, grad_outputs=v, allow_unused=True)
        return torch.zeros_like(x) if g is None else g


    def jacobian(f, x):
        x_ = torch.empty_like(x).copy_(x).requires_grad_(True)
        y = f(x_)
        J = torch.zeros(y.numel(), x.numel(), dtype=x.dtype, device=x.device)
        if y.requires_grad:
            for i, y_i in enumerate(y.reshape(-1)):      # rows written into a preallocated matrix
                (g,) = torch.autograd.grad(y_i, x_, retain_graph=True, allow_unused=True)
                if g is not None:
                    J[i] = g.reshape(-1)
        return J.reshape(y.shape + x.shape)


    def second_derivative(f, x):
        x_ = x.detach().clone().requires_grad_(True)
        y = f(x_)
        if not y.requires_grad:
            return torch.zeros_like(x)
        (first,) = torch.autograd.grad(y, x_, torch.ones_like(y), create_graph=True, allow_unused=True)
        if first is None or not first.requires_grad:  # (None: y depends on a parameter of f's, not on x)
            return torch.zeros_like(x)
        (second,) = torch.autograd.grad(first, x_, torch.ones_like(first), allow_unused=True)
        return torch.zeros_like(x) if second is None else second


    def accumulated_grad(w, x, steps):
        if steps < 0:
            raise ValueError("negative steps")
        w_, x_ = w.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        total = torch.zeros_like(w)
        for _ in range(steps):
            torch.autograd.backward((x_ + w_) * (w_ + 1))
        return total if w_.grad is None else w_.grad.clone()


    def sgd_step_(params, lr):
        for p in params:
            if p.grad is not None:
                p.data.add_(p.grad, alpha=-lr)           # in place through .data; zeros instead of None
                p.grad.zero_()
"""


def test_other_correct_implementations_score_full_marks(grade, assignment):
    g = grade(only=("autograd",), append={"autograd": OTHER_CORRECT_AUTOGRAD})
    assert lost_targets(g) == set(), [(t.name, t.output) for t in g.tests if t.status == "failed"][:2]
    assert g.score == pytest.approx(assignment.exercise("autograd").points)


def lost_with(g, target, *words):
    """Assert that only `target` lost points and that one of its messages holds all `words`."""
    assert lost_targets(g) == {target}
    messages = failures(g, target)
    assert any(all(w in m for w in words) for m in messages), messages[:2]


VJP_CHANGES_THE_CALLERS_X = {
    "flips requires_grad": ("""
        def vjp(f, x, v):
            x.requires_grad_(True)
            f(x).backward(gradient=v)
            return x.grad
    """, ("['caller_requires_grad_after']['x']: expected False, got True", "work on a copy")),
    "leaves a .grad": ("""
        def vjp(f, x, v):
            flag = x.requires_grad
            x.requires_grad_(True)
            f(x).backward(gradient=v)
            out = x.grad.clone()
            x.requires_grad_(flag)
            return out
    """, ("['caller_grad_after']['x']", "expected None", "left a gradient on a caller's tensor (x)")),
    "backpropagates into a caller's x that requires grad": ("""
        def vjp(f, x, v):
            x_ = x.clone() if x.requires_grad else x.detach().requires_grad_(True)
            x_.retain_grad()
            f(x_).backward(gradient=v)
            return x_.grad
    """, ("['caller_grad_after']['x']", "left a gradient on a caller's tensor (x)")),
}


@pytest.mark.parametrize("mistake", VJP_CHANGES_THE_CALLERS_X)
def test_a_vjp_that_changes_the_callers_x_loses_vjp(grade, mistake):
    code, words = VJP_CHANGES_THE_CALLERS_X[mistake]
    lost_with(grade(only=("autograd",), append={"autograd": code}), "autograd.vjp", *words)


WRONG_JACOBIANS = {
    "never clears the gradient": """
        def jacobian(f, x):
            x_ = x.detach().clone().requires_grad_(True)
            y = f(x_)
            rows = []
            for y_i in y.reshape(-1):
                y_i.backward(retain_graph=True)
                rows.append(x_.grad.reshape(-1).clone())
            return torch.stack(rows).reshape(y.shape + x.shape)
    """,
    "one backward of all ones": """
        def jacobian(f, x):
            x_ = x.detach().clone().requires_grad_(True)
            y = f(x_)
            y.backward(torch.ones_like(y))
            return x_.grad.expand(y.shape + x.shape).clone()
    """,
    "the transposed layout": """
        _right_jacobian = jacobian

        def jacobian(f, x):
            j = _right_jacobian(f, x)
            return j.reshape(-1, x.numel()).t().reshape(x.shape + j.shape[:j.dim() - x.dim()])
    """,
}


@pytest.mark.parametrize("mistake", WRONG_JACOBIANS)
def test_a_wrong_jacobian_loses_jacobian(grade, mistake):
    g = grade(only=("autograd",), append={"autograd": WRONG_JACOBIANS[mistake]})
    lost_with(g, "autograd.jacobian", "the result", "clear x.grad between passes")


def test_a_second_derivative_without_create_graph_loses_second_derivative(grade):
    g = grade(only=("autograd",), append={"autograd": """
        def second_derivative(f, x):
            x_ = x.detach().clone().requires_grad_(True)
            (first,) = torch.autograd.grad(f(x_).sum(), x_)
            (second,) = torch.autograd.grad(first.sum(), x_)
            return second
    """})
    lost_with(g, "autograd.second_derivative", "your code raised RuntimeError", "create_graph=True")


def test_a_second_derivative_by_two_backward_calls_loses_second_derivative(grade):
    g = grade(only=("autograd",), append={"autograd": """
        def second_derivative(f, x):
            x_ = x.detach().clone().requires_grad_(True)
            y = f(x_)
            y.backward(torch.ones_like(y), create_graph=True)
            x_.grad.sum().backward()
            return x_.grad.detach()
    """})
    lost_with(g, "autograd.second_derivative", "the result", "create_graph=True), then differentiate it again")


def test_an_accumulated_grad_that_zeroes_each_step_loses_accumulated_grad(grade):
    g = grade(only=("autograd",), append={"autograd": """
        def accumulated_grad(w, x, steps):
            w_ = w.detach().clone().requires_grad_(True)
            for _ in range(steps):
                w_.grad = None
                ((x + w_) * (w_ + 1)).backward()
            return w_.grad.clone()
    """})
    lost_with(g, "autograd.accumulated_grad", "the result", "do not zero w.grad between the steps")


WRONG_SGD_STEPS = {
    "rebinds the name": ("""
        def sgd_step_(params, lr):
            for p in params:
                if p.grad is not None:
                    g, p.grad = p.grad, None
                    p = p - lr * g
    """, ("['parameters_after']", "only rebinds a local name")),
    "records history": ("""
        def sgd_step_(params, lr):
            for p in params:
                if p.grad is not None:
                    p -= lr * p.grad
                    p.grad = None
    """, ("your code raised RuntimeError", "under torch.no_grad()")),
    "leaves the gradients": ("""
        def sgd_step_(params, lr):
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p -= lr * p.grad
    """, ("['grads_cleared']", "expected True, got False", "same pass as its update")),
    "loops twice over a generator": ("""
        def sgd_step_(params, lr):
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p -= lr * p.grad
                for p in params:
                    p.grad = None
    """, ("['grads_cleared']", "generator")),
    "replaces .data": ("""
        def sgd_step_(params, lr):
            for p in params:
                if p.grad is not None:
                    p.data = p.data - lr * p.grad
                    p.grad = None
    """, ("['updated_in_place']", "expected True, got False", "`p.data = ...`")),
}


@pytest.mark.parametrize("mistake", WRONG_SGD_STEPS)
def test_a_wrong_sgd_step_loses_sgd_step(grade, mistake):
    code, words = WRONG_SGD_STEPS[mistake]
    lost_with(grade(only=("autograd",), append={"autograd": code}), "autograd.sgd_step_", *words)


def test_an_sgd_step_through_torch_optim_is_forbidden(grade):
    g = grade(only=("autograd.sgd_step_",), append={"autograd": """
        def sgd_step_(params, lr):
            params = list(params)
            torch.optim.SGD(params, lr=lr).step()
            for p in params:
                p.grad = None
    """})
    lost_with(g, "autograd.sgd_step_", "forbidden call: sgd_step_ may not use `torch.optim.*`")
