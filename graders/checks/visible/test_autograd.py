"""Visible checks for autograd.py: vector-Jacobian products, Jacobians, second derivatives, SGD by hand.

Functions are named from the public table ``graders/probes/autograd.py:FUNCTIONS``. The checks named
"leaves the caller's ... as it was" (and the hidden ones about callers whose x requires grad) look at
the caller's tensors after the call; the others compare only the result.
"""

import pytest
import torch

from torchgrade.engine.differential import CheckFailed
from torchgrade.engine.i18n import language, t


def explain(check, *args, hints=(), note=None, **kwargs):
    """``check(...)``; a failure that names a fact listed in `hints` ends with that fact's hint.

    `hints` is a sequence of ``(marker, {"en": ..., "zh": ...})``. The first marker found in the
    message wins and its hint replaces the target's hint for the kind of failure (torchgrade/engine/hints.py);
    the marker "" gives the hint for a failure that neither names a listed fact nor has a hint.
    `note` (``{"en": ..., "zh": ...}``) adds what the call line cannot show, such as a forward input.
    """
    try:
        return check(*args, **kwargs)
    except CheckFailed as e:
        text = str(e)
        if type(e) is not CheckFailed or "NotImplementedError" in text:  # forbidden calls and stubs: as they are
            raise
        advice = next((h[language()] for marker, h in hints if marker and marker in text), None)
        generic = "\n" + t("hint", text="")
        if generic in text:
            text, advice = text[:text.rindex(generic)], advice or text[text.rindex(generic) + len(generic):]
        advice = advice or next((h[language()] for marker, h in hints if not marker), None)
        if note:
            text += "\n" + note[language()]
        raise CheckFailed(text + ("\n" + t("hint", text=advice) if advice else "")) from None


def caller_hints(target, *names):
    """Hints for what a call leaves on the caller's tensors (facts ``caller_*`` of probes/autograd.py)."""
    return (
        ("['caller_requires_grad_after']", {
            "en": f"{target} changed requires_grad on a caller's tensor ({', '.join(names)}): work on a copy, "
                  f"t.detach().requires_grad_(True), never on the caller's tensor itself.",
            "zh": f"{target} 改变了调用者张量（{', '.join(names)}）的 requires_grad：请在副本上计算，"
                  f"即 t.detach().requires_grad_(True)，不要直接修改调用者的张量。"}),
        ("['caller_grad_after']", {
            "en": f"{target} left a gradient on a caller's tensor ({', '.join(names)}), or on the leaf it was "
                  f"computed from: backpropagate into a detached copy, not into the caller's tensor.",
            "zh": f"{target} 在调用者的张量（{', '.join(names)}）或其来源的叶子张量上留下了梯度："
                  f"请对分离（detach）出来的副本做反向传播，而不是对调用者的张量。"}),
        ("['caller_values_kept']", {
            "en": f"{target} changed the values of a caller's tensor ({', '.join(names)}).",
            "zh": f"{target} 改变了调用者张量（{', '.join(names)}）的值。"}),
    )


NO_GRAPH_HINT = ("does not require grad", {
    "en": "when f(x) does not depend on x, y has no graph and backward() raises: the result is then zero "
          "(check y.requires_grad first).",
    "zh": "当 f(x) 与 x 无关时，y 没有计算图，backward() 会报错：此时结果为零（先检查 y.requires_grad）。"})
VJP_HINTS = caller_hints("vjp", "x") + (NO_GRAPH_HINT,
    ("", {"en": "vjp(f, x, v) is the gradient of (f(x) * v).sum() with respect to x: y = f(x_copy); "
                "y.backward(gradient=v); return x_copy.grad.",
          "zh": "vjp(f, x, v) 等于 (f(x) * v).sum() 对 x 的梯度：y = f(x_copy); y.backward(gradient=v); "
                "返回 x_copy.grad。"}),)
JACOBIAN_HINTS = caller_hints("jacobian", "x") + (NO_GRAPH_HINT,
    ("", {"en": "row k of the Jacobian is the gradient of the k-th output element alone: one "
                "backward(retain_graph=True) per output element, and clear the copy's .grad before each pass "
                "(gradients accumulate otherwise); the result has shape y.shape + x.shape.",
          "zh": "雅可比矩阵的第 k 行只是第 k 个输出元素的梯度：每个输出元素做一次 backward(retain_graph=True)，"
                "每次之前清空副本的 .grad（否则梯度会累加）；结果形状为 y.shape + x.shape。"}),)
SECOND_HINTS = caller_hints("second_derivative", "x") + (
    ("RuntimeError", {
        "en": "the first derivative must itself be differentiable: compute it with "
              "torch.autograd.grad(f(x).sum(), x, create_graph=True). Where f' does not depend on x at all "
              "(a linear or constant f) it has no graph even so, and f'' is zero.",
        "zh": "一阶导数本身必须可以再求导：用 torch.autograd.grad(f(x).sum(), x, create_graph=True) 计算它。"
              "若 f' 与 x 无关（f 为线性或常数函数），它仍然没有计算图，此时 f'' 为零。"}),
    ("", {"en": "f''(x) is the gradient of f'(x).sum(), with f'(x) from torch.autograd.grad(..., create_graph=True); "
                "a second backward() into the same .grad adds f' and f''.",
          "zh": "f''(x) 是 f'(x).sum() 的梯度，其中 f'(x) 由 torch.autograd.grad(..., create_graph=True) 求得；"
                "对同一个 .grad 再做一次 backward() 会把 f' 与 f'' 加在一起。"}),)
ACCUMULATED_HINTS = caller_hints("accumulated_grad", "w", "x") + (
    ("", {"en": "run y = (x + w) * (w + 1); y.backward() `steps` times on copies of w and x, without zeroing, "
                "and return a copy of the copy's .grad: steps * (2w + x + 1).",
          "zh": "在 w 和 x 的副本上重复 steps 次 y = (x + w) * (w + 1); y.backward()，中间不要清零，"
                "最后返回副本 .grad 的拷贝：steps * (2w + x + 1)。"}),)
def sgd_note(unused: bool = False) -> dict:
    """What the first argument of an sgd_step_ call stands for (the call line shows only its name)."""
    extra_en = (", plus a parameter `unused` that the loss does not use (its .grad is None)" if unused else "")
    extra_zh = ("，另有一个损失没有用到的参数 `unused`（其 .grad 为 None）" if unused else "")
    return {"en": f"params (the first argument) are the parameters of a model Linear(4, 3), Tanh, Linear(3, 2){extra_en}, "
                  f"taken in the form named, after one backward pass of a mean squared error",
            "zh": f"params（第一个参数）是模型 Linear(4, 3)、Tanh、Linear(3, 2) 的参数{extra_zh}，按所示形式传入，"
                  f"此前已对均方误差做过一次反向传播"}


SGD_HINTS = (
    ("NoneType", {
        "en": "skip the parameters whose .grad is None: a parameter that the loss does not use has no gradient.",
        "zh": "跳过 .grad 为 None 的参数：损失没有用到的参数没有梯度。"}),
    ("RuntimeError", {
        "en": "do the update under torch.no_grad(): autograd refuses an in-place change of a leaf that requires grad.",
        "zh": "请在 torch.no_grad() 下更新：autograd 不允许原地修改 requires_grad 的叶子张量。"}),
    ("['parameters_after']", {
        "en": "each parameter must change in place by -lr * p.grad (p -= lr * p.grad under torch.no_grad()); "
              "`p = p - lr * p.grad` only rebinds a local name and leaves the parameter as it was.",
        "zh": "每个参数都要原地减去 lr * p.grad（在 torch.no_grad() 下 p -= lr * p.grad）；"
              "`p = p - lr * p.grad` 只是让局部变量指向新张量，参数本身没有变。"}),
    ("['updated_in_place']", {
        "en": "update the parameter's own storage (p.sub_(...), p -= ...); `p.data = ...` or a new Parameter "
              "puts the values into other memory.",
        "zh": "请修改参数自身的存储（p.sub_(...)、p -= ...）；`p.data = ...` 或新建 Parameter 会把数值放到别的内存里。"}),
    ("['still_leaf']", {
        "en": "each parameter must stay a leaf with requires_grad=True and no grad_fn.",
        "zh": "每个参数都必须仍是 requires_grad=True、没有 grad_fn 的叶子张量。"}),
    ("['grads_cleared']", {
        "en": "clear each gradient (p.grad = None) in the same pass as its update: model.parameters() is a "
              "generator and can be iterated only once.",
        "zh": "在更新每个参数的同一轮循环里清空它的梯度（p.grad = None）：model.parameters() 是生成器，只能遍历一次。"}),
)


def randn(check, seed, *shapes, device="cpu", dtype=torch.float64):
    g = check.random(seed)
    out = [torch.randn(shape, generator=g, dtype=dtype).to(device) for shape in shapes]
    return out[0] if len(out) == 1 else out


def autograd_call(check, *args, hints, watch=False, **options):
    """The probe autograd_call. What the call leaves on the caller's tensors is compared only where
    the check is about it (`watch`, or a `caller` state): a helper that flips requires_grad on the
    caller's x loses those checks, not every check of its values (one claim per check)."""
    if not watch and "caller" not in options:
        options["watched"] = []
    return explain(check, *args, probe="autograd_call", options=options, hints=hints)


@pytest.mark.target("vjp")
def test_matches_the_notes_example(check, device):
    x = torch.tensor([[2.0, 4.0], [3.0, 5.0]], dtype=torch.float64, device=device)
    autograd_call(check, "notes_quadratic", x, torch.full_like(x, 0.25), hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_weights_each_output_by_v_on_a_rectangular_function(check, device):
    x, v = randn(check, 1, (4,), (3,), device=device)
    autograd_call(check, "matmul_fixed", x, v, hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_sums_over_outputs_that_mix_inputs(check, device):
    x, v = randn(check, 2, (5,), (5,), device=device)
    autograd_call(check, "cumsum_sin", x, v, hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_leaves_the_callers_x_and_v_as_they_were(check, device):
    x, v = randn(check, 6, (3,), (3,), device=device)
    autograd_call(check, "sin", x, v, watched=[[1, "x"], [2, "v"]], watch=True, hints=VJP_HINTS)


@pytest.mark.target("jacobian")
def test_matches_the_notes_diagonal_example(check, device):
    x = torch.tensor([0.0, 1.0], dtype=torch.float64, device=device)
    autograd_call(check, "notes_three_quarter_square", x, hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_has_one_row_per_output_on_a_rectangular_function(check, device):
    autograd_call(check, "matmul_fixed", randn(check, 3, (4,), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_has_shape_y_shape_plus_x_shape(check, device):
    autograd_call(check, "row_sums", randn(check, 4, (2, 3), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_leaves_the_callers_x_as_it_was_after_every_pass(check, device):
    autograd_call(check, "cumsum_sin", randn(check, 7, (3,), device=device), watch=True, hints=JACOBIAN_HINTS)


@pytest.mark.target("second_derivative")
def test_matches_the_notes_examples(check, device):
    autograd_call(check, "square", torch.tensor([3.0], dtype=torch.float64, device=device), hints=SECOND_HINTS)
    autograd_call(check, "cube", torch.tensor([1.0, 2.0], dtype=torch.float64, device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
def test_matches_minus_sin_for_sin(check, device):
    autograd_call(check, "sin", randn(check, 5, (2, 3), device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
def test_leaves_the_callers_x_as_it_was_after_differentiating_twice(check, device):
    autograd_call(check, "cube", randn(check, 8, (3,), device=device), watch=True, hints=SECOND_HINTS)


@pytest.mark.target("vjp")
def test_takes_the_product_at_an_x_made_under_inference_mode(check, device):
    x, v = randn(check, 82, (5,), (5,), device=device)
    autograd_call(check, "cumsum_sin", x, v, caller="inference", hints=VJP_HINTS)


@pytest.mark.target("jacobian")
def test_builds_the_jacobian_at_an_x_made_under_inference_mode(check, device):
    autograd_call(check, "notes_three_quarter_square", randn(check, 83, (2,), device=device), caller="inference",
                  hints=JACOBIAN_HINTS)


@pytest.mark.target("second_derivative")
def test_differentiates_an_x_made_under_inference_mode(check, device):
    autograd_call(check, "cube", randn(check, 80, (3,), device=device), caller="inference", hints=SECOND_HINTS)


@pytest.mark.target("accumulated_grad")
def test_works_on_w_and_x_made_under_inference_mode(check, device):
    w, x = randn(check, 81, (1,), (1,), device=device)
    autograd_call(check, w, x, 2, fn=False, watched=[[0, "w"], [1, "x"]], caller="inference", hints=ACCUMULATED_HINTS)


@pytest.mark.target("accumulated_grad")
def test_leaves_the_callers_w_and_x_as_they_were(check, device):
    w, x = randn(check, 9, (1,), (1,), device=device)
    autograd_call(check, w, x, 2, fn=False, watched=[[0, "w"], [1, "x"]], watch=True, hints=ACCUMULATED_HINTS)


@pytest.mark.target("accumulated_grad")
@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_accumulates_the_notes_5_10_15_20(check, device, steps):
    w = torch.tensor([1.0], device=device)
    x = torch.tensor([2.0], device=device)
    autograd_call(check, w, x, steps, fn=False, watched=[[0, "w"], [1, "x"]], hints=ACCUMULATED_HINTS)


@pytest.mark.target("sgd_step_")
def test_steps_every_parameter_of_model_parameters_in_place(check, device):
    check.random(11)
    explain(check, "model.parameters()", 0.1, probe="autograd_sgd_step", options={"device": device, "seed": 11},
            hints=SGD_HINTS, note=sgd_note())


@pytest.mark.target("sgd_step_")
def test_skips_parameters_without_a_gradient(check, device):
    check.random(13)
    explain(check, "model.parameters()", 0.1, probe="autograd_sgd_step",
            options={"device": device, "seed": 13, "unused": True}, hints=SGD_HINTS, note=sgd_note(unused=True))


@pytest.mark.target("sgd_step_")
def test_steps_a_list_of_parameters_in_place(check, device):
    check.random(12)
    explain(check, "list(model.parameters())", 0.5, probe="autograd_sgd_step",
            options={"device": device, "seed": 12}, hints=SGD_HINTS, note=sgd_note())


# --- what each stub's docstring promises, one claim per check --------------------------------------

@pytest.mark.target("vjp")
def test_gives_the_plain_gradient_for_a_scalar_output_and_a_0_d_v(check, device):
    x = randn(check, 70, (3,), device=device)
    autograd_call(check, "sum_of_squares", x, torch.tensor(1.0, dtype=torch.float64, device=device),
                  hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_is_zero_for_an_output_that_ignores_x(check, device):
    autograd_call(check, "constant", randn(check, 71, (2,), device=device),
                  torch.ones(3, dtype=torch.float64, device=device), hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_raises_runtime_error_for_a_v_shaped_unlike_the_output(check, device):
    x, v = randn(check, 72, (3,), (2,), device=device)
    explain(check, "sin", x, v, probe="autograd_call", hints=VJP_HINTS, like="Tensor.backward")


@pytest.mark.target("vjp")
def test_works_on_a_caller_x_that_is_not_a_leaf(check, device):
    x, v = randn(check, 73, (4,), (4,), device=device)
    autograd_call(check, "sin", x, v, caller="non_leaf", seed=73, hints=VJP_HINTS)


@pytest.mark.target("jacobian")
def test_gives_a_0_d_result_for_a_scalar_function_of_a_0_d_x(check, device):
    autograd_call(check, "sin", randn(check, 74, (), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_has_the_shape_of_x_for_a_scalar_output(check, device):
    autograd_call(check, "sum_of_squares", randn(check, 75, (3,), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_gives_zero_rows_where_the_output_ignores_x(check, device):
    autograd_call(check, "constant", randn(check, 76, (3,), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("second_derivative")
def test_gives_zero_for_a_linear_function(check, device):
    autograd_call(check, "linear", randn(check, 77, (4,), device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
def test_differentiates_a_0_d_x(check, device):
    autograd_call(check, "cube", randn(check, 78, (), device=device), hints=SECOND_HINTS)


@pytest.mark.target("accumulated_grad")
def test_gives_zeros_for_zero_steps(check, device):
    w, x = randn(check, 79, (1,), (1,), device=device)
    autograd_call(check, w, x, 0, fn=False, hints=ACCUMULATED_HINTS)


@pytest.mark.target("accumulated_grad")
def test_rejects_negative_steps_with_value_error(check, device):
    w, x = randn(check, 80, (1,), (1,), device=device)
    autograd_call(check, w, x, -1, fn=False, hints=ACCUMULATED_HINTS)


@pytest.mark.target("sgd_step_")
def test_updates_a_parameter_given_twice_only_once(check, device):
    check.random(81)
    explain(check, "a list naming one parameter twice", 0.1, probe="autograd_sgd_step",
            options={"device": device, "seed": 81}, hints=SGD_HINTS, note=sgd_note())


@pytest.mark.target("jacobian")
def test_has_no_rows_for_a_function_with_no_outputs(check, device):
    autograd_call(check, "no_outputs", randn(check, 82, (2, 3), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("second_derivative")
@pytest.mark.parametrize("fn", ["constant", "relu"])
def test_gives_zero_where_f_is_constant_or_piecewise_linear(check, device, fn):
    autograd_call(check, fn, randn(check, 83, (5,), device=device), hints=SECOND_HINTS)


@pytest.mark.target("accumulated_grad")
def test_leaves_a_callers_w_and_x_that_require_grad_untouched(check, device):
    w, x = randn(check, 84, (1,), (1,), device=device)
    autograd_call(check, w, x, 2, fn=False, watched=[[0, "w"], [1, "x"]], caller="leaf_with_grad", seed=84,
                  hints=ACCUMULATED_HINTS)


@pytest.mark.target("jacobian")
def test_differentiates_a_caller_x_that_is_not_a_leaf(check, device):
    autograd_call(check, "cumsum_sin", randn(check, 85, (3,), device=device), caller="non_leaf", seed=85,
                  hints=JACOBIAN_HINTS)
