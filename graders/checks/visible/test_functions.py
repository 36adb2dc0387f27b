"""Visible checks for functions.py: custom autograd Functions, their backward nodes and gradients.

``function_apply`` (torchgrade/sandbox/probes/functions.py) also calls the output's backward node
directly, so these checks see what each ``backward`` returns before autograd reduces or checks it.
"""

import pytest
import torch

from graders.checks.visible.test_autograd import explain


def function_hints(name, backward_en, backward_zh):
    """Hints for the facts every Function check reports; `backward_*` says what backward returns."""
    returns = {"en": f"{name}.backward(ctx, grad_output) must return {backward_en}.",
               "zh": f"{name}.backward(ctx, grad_output) 应返回 {backward_zh}。"}
    return (
        ("['grad_fn']", {
            "en": f"the output of {name}.apply(...) must have {name}'s own backward node as its grad_fn: subclass "
                  f"torch.autograd.Function with static forward(ctx, ...) and backward(ctx, ...), and let the "
                  f"gradient come from {name}.backward, not from torch's own operations.",
            "zh": f"{name}.apply(...) 的输出的 grad_fn 必须是 {name} 自己的反向节点：继承 torch.autograd.Function，"
                  f"写静态方法 forward(ctx, ...) 和 backward(ctx, ...)，梯度要来自 {name}.backward，"
                  f"而不是 torch 自带运算的梯度。"}),
        ("['backward_returned']", returns),
        ("['grads']", returns),
        ("['gradcheck']", {
            "en": f"torch.autograd.gradcheck compares {name}.backward with finite differences on float64 inputs: "
                  f"{returns['en']}",
            "zh": f"torch.autograd.gradcheck 在 float64 输入上用有限差分检验 {name}.backward：{returns['zh']}"}),
        ("incorrect number of gradients", {
            "en": f"{name}.backward returns one value per input of forward (None for inputs that need no gradient).",
            "zh": f"{name}.backward 返回值的个数要与 forward 的输入个数相同（不需要梯度的输入返回 None）。"}),
    )


EXP_HINTS = (("['saved_result']", {
    "en": "Exp.forward must save its result exp(x) with ctx.save_for_backward(result), not its input x: "
          "the derivative of exp is exp itself.",
    "zh": "Exp.forward 要用 ctx.save_for_backward(result) 保存结果 exp(x)，而不是输入 x：exp 的导数就是它本身。"}),
) + function_hints("Exp", "grad_output * result, with the result saved in forward",
                  "grad_output * result（result 为 forward 中保存的结果）")
GRAD_COEFF_HINTS = (("['shares_storage_with_input']", {
    "en": "GradCoeff.forward must return x unchanged, as a view: return x.view_as(x) (not a copy).",
    "zh": "GradCoeff.forward 原样返回 x 的视图：return x.view_as(x)（不要复制）。"}),
) + function_hints("GradCoeff", "(ctx.coeff * grad_output, None): None for the number coeff",
                   "(ctx.coeff * grad_output, None)：数值 coeff 对应 None")
LEGENDRE_HINTS = function_hints("LegendreP3", "grad_output * 1.5 * (5 * x**2 - 1), with the x saved in forward",
                                "grad_output * 1.5 * (5 * x**2 - 1)（x 为 forward 中保存的输入）")
CONV_HINTS = function_hints(
    "Conv2dFn",
    "(F.conv_transpose2d(grad_out, weight), F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)): "
    "with several samples and channels the transposes matter",
    "(F.conv_transpose2d(grad_out, weight), F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1))："
    "样本数和通道数大于 1 时，这些转置缺一不可")
LINEAR_HINTS = function_hints(
    "LinearFn",
    "(grad_output @ weight, grad_output^T @ x summed over every batch dimension, grad_output summed over every "
    "batch dimension, in the shape of bias), with None wherever ctx.needs_input_grad[i] is False or bias is None, "
    "and one value per argument given to apply",
    "(grad_output @ weight、对所有批维求和的 grad_outputᵀ @ x、对所有批维求和且形状与 bias 相同的 grad_output)，"
    "ctx.needs_input_grad[i] 为 False 或 bias 为 None 的位置返回 None，返回个数与传给 apply 的参数个数相同")
MODEL_HINTS = (("['graph_uses_function']", {
    "en": "legendre_model must compute P3 with LegendreP3.apply(c + d * x): the gradients of c and d have to flow "
          "through LegendreP3.backward.",
    "zh": "legendre_model 必须用 LegendreP3.apply(c + d * x) 计算 P3：c 和 d 的梯度要经过 LegendreP3.backward。"}),
    ("", {"en": "legendre_model(a, b, c, d, x) = a + b * LegendreP3.apply(c + d * x).",
          "zh": "legendre_model(a, b, c, d, x) = a + b * LegendreP3.apply(c + d * x)。"}))


def randn(check, seed, *shapes, device="cpu", dtype=torch.float64):
    g = check.random(seed)
    out = [torch.randn(shape, generator=g, dtype=dtype).to(device) for shape in shapes]
    return out[0] if len(out) == 1 else out


def apply(check, *args, hints, rtol=None, atol=None, **options):
    """Run ``Fn.apply(*args)`` and the backward behind it (probe function_apply) on both sides and compare."""
    return explain(check, *args, probe="function_apply", options=options, hints=hints, rtol=rtol, atol=atol)


def gradcheck(check, *args, hints, **options):
    """Run torch.autograd.gradcheck on ``Fn.apply`` (probe function_gradcheck) on both sides and compare."""
    return explain(check, *args, probe="function_gradcheck", options=options, hints=hints)


@pytest.mark.target("Exp")
def test_computes_exp_and_saves_its_result_for_its_own_backward(check, device):
    apply(check, randn(check, 1, (2, 3), device=device), saved=True, hints=EXP_HINTS)


@pytest.mark.target("Exp")
def test_exp_backward_passes_gradcheck(check, device):
    gradcheck(check, randn(check, 2, (4,), device=device), hints=EXP_HINTS)


@pytest.mark.target("GradCoeff")
def test_scales_the_gradient_by_coeff_as_in_the_notes(check, device):
    x = torch.tensor([2.0], dtype=torch.float64, device=device)
    apply(check, x, -0.1, view_of_input=True, hints=GRAD_COEFF_HINTS)


@pytest.mark.target("GradCoeff")
def test_reverses_the_gradient_with_coeff_minus_one(check, device):
    apply(check, randn(check, 3, (2, 3), device=device), -1.0, view_of_input=True, hints=GRAD_COEFF_HINTS)


@pytest.mark.target("LegendreP3")
def test_matches_the_notes_values_and_derivatives(check, device):
    x = torch.tensor([0.5, 2.0, 1.0, 3.0], dtype=torch.float64, device=device)
    apply(check, x, hints=LEGENDRE_HINTS)


@pytest.mark.target("LegendreP3")
def test_p3_backward_passes_gradcheck(check, device):
    gradcheck(check, randn(check, 4, (5,), device=device), hints=LEGENDRE_HINTS)


@pytest.mark.target("legendre_model")
def test_matches_the_notes_example_through_legendre_p3(check, device):
    a, b, c, d, x = (torch.tensor(v, dtype=torch.float64, device=device) for v in (1.0, 2.0, 1.0, 2.0, 1.0))
    explain(check, a, b, c, d, x, probe="function_model", options={"requires_grad": [True] * 5, "uses": "LegendreP3"},
            hints=MODEL_HINTS)


@pytest.mark.target("Conv2dFn")
def test_matches_conv2d_and_its_gradients_with_several_samples_and_channels(check, device):
    X, weight = randn(check, 5, (2, 3, 6, 7), (4, 3, 2, 3), device=device)
    apply(check, X, weight, requires_grad=[True, True], hints=CONV_HINTS)


@pytest.mark.target("Conv2dFn")
def test_conv_backward_passes_gradcheck(check, device):
    X, weight = randn(check, 6, (2, 2, 4, 5), (3, 2, 2, 3), device=device)
    gradcheck(check, X, weight, requires_grad=[True, True], hints=CONV_HINTS)


@pytest.mark.target("LinearFn")
def test_matches_linear_and_its_three_gradients(check, device):
    x, weight, bias = randn(check, 7, (5, 3), (4, 3), (4,), device=device)
    apply(check, x, weight, bias, requires_grad=[True, True, True], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_takes_two_arguments_when_there_is_no_bias(check, device):
    x, weight = randn(check, 8, (5, 3), (4, 3), device=device)
    apply(check, x, weight, requires_grad=[True, True], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_returns_none_where_needs_input_grad_is_false(check, device):
    x, weight, bias = randn(check, 9, (5, 3), (4, 3), (4,), device=device)
    apply(check, x, weight, bias, requires_grad=[True, False, False], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_linear_backward_passes_gradcheck(check, device):
    x, weight, bias = randn(check, 10, (3, 2), (4, 2), (4,), device=device)
    gradcheck(check, x, weight, bias, requires_grad=[True, True, True], hints=LINEAR_HINTS)


# --- what each stub's docstring promises, one claim per check --------------------------------------

@pytest.mark.target("legendre_model")
def test_takes_numbers_for_a_and_b_and_broadcasts_over_a_vector_x(check, device):
    c, d, x = randn(check, 11, (), (), (4,), device=device)
    explain(check, 2.0, 0.5, c, d, x, probe="function_model",
            options={"requires_grad": [False, False, True, True, True], "uses": "LegendreP3"}, hints=MODEL_HINTS)


@pytest.mark.target("Conv2dFn")
def test_convolves_an_unbatched_input(check, device):
    X, weight = randn(check, 12, (2, 5, 4), (3, 2, 2, 2), device=device)
    apply(check, X, weight, requires_grad=[True, True], hints=CONV_HINTS)


@pytest.mark.target("LinearFn")
@pytest.mark.parametrize("shape", [(3,), (2, 4, 3)], ids=["no-batch-dimension", "two-batch-dimensions"])
def test_maps_any_number_of_batch_dimensions(check, device, shape):
    x, weight, bias = randn(check, 13, shape, (2, 3), (2,), device=device)
    apply(check, x, weight, bias, requires_grad=[True, True, True], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_returns_no_gradient_for_a_bias_given_as_none(check, device):
    x, weight = randn(check, 14, (4, 3), (2, 3), device=device)
    apply(check, x, weight, None, requires_grad=[True, True, False], hints=LINEAR_HINTS)


@pytest.mark.target("Conv2dFn")
@pytest.mark.parametrize("needs", [[True, False], [False, True]], ids=["only-x", "only-weight"])
def test_delivers_the_gradient_that_is_needed_when_only_one_is(check, device, needs):
    X, weight = randn(check, 15, (2, 1, 4, 5), (2, 1, 2, 2), device=device)
    # Conv2dFn's contract asks for the needed gradient, not None for the other (raw_backward=False)
    apply(check, X, weight, requires_grad=needs, raw_backward=False, hints=CONV_HINTS)


@pytest.mark.target("LinearFn")
def test_returns_only_the_bias_gradient_when_only_bias_needs_one(check, device):
    x, weight, bias = randn(check, 16, (4, 3), (2, 3), (2,), device=device)
    apply(check, x, weight, bias, requires_grad=[False, False, True], hints=LINEAR_HINTS)
