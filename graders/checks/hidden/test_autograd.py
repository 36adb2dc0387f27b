"""Hidden checks for autograd.py: callers whose x already requires grad or is not a leaf, scalars,
0-d and non-contiguous inputs, outputs that do not depend on x, float32, errors."""

import pytest
import torch

from graders.checks.visible.test_autograd import (ACCUMULATED_HINTS, JACOBIAN_HINTS, SECOND_HINTS, SGD_HINTS,
                                                  VJP_HINTS, autograd_call, explain, randn, sgd_note)


@pytest.mark.target("vjp")
@pytest.mark.parametrize("caller", ["leaf_with_grad", "non_leaf"])
def test_leaves_a_caller_x_that_requires_grad_untouched(check, device, caller):
    x, v = randn(check, 21, (5,), (5,), device=device)
    autograd_call(check, "cumsum_sin", x, v, caller=caller, seed=21, hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_takes_a_0_d_v_for_a_scalar_output(check, device):
    x = randn(check, 22, (2, 3), device=device)
    autograd_call(check, "sum_of_squares", x, torch.tensor(1.5, dtype=torch.float64, device=device),
                  hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_handles_a_matrix_output_and_a_non_contiguous_x(check, device):
    x, v = randn(check, 23, (4,), (4, 4), device=device)
    autograd_call(check, "outer_sin", x, v, hints=VJP_HINTS)
    x, v = randn(check, 24, (4, 3), (3,), device=device)
    autograd_call(check, "row_sums", x.t(), v, hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_is_zero_when_the_output_does_not_depend_on_x(check, device):
    autograd_call(check, "constant", randn(check, 25, (4,), device=device),
                  torch.ones(3, dtype=torch.float64, device=device), hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_is_zero_for_an_output_of_a_parameter_alone(check, device):
    autograd_call(check, "parameter_only", randn(check, 28, (4,), device=device),
                  torch.ones(4, dtype=torch.float64, device=device), hints=VJP_HINTS)


@pytest.mark.target("vjp")
@pytest.mark.parametrize("fn", ["sin", "constant", "parameter_only"])
def test_gives_a_product_that_does_not_require_grad(check, device, fn):
    x = randn(check, 29, (3,), device=device)
    autograd_call(check, fn, x, torch.ones(3, dtype=torch.float64, device=device), history=True, hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_keeps_float32(check, device):
    x, v = randn(check, 26, (3, 2), (3, 2), device=device, dtype=torch.float32)
    autograd_call(check, "tanh", x, v, hints=VJP_HINTS)


@pytest.mark.target("vjp")
def test_raises_runtime_error_when_v_does_not_match_the_output(check, device):
    x, v = randn(check, 27, (4,), (5,), device=device)
    explain(check, "sin", x, v, probe="autograd_call", hints=VJP_HINTS, like="Tensor.backward")


@pytest.mark.target("jacobian")
def test_is_lower_triangular_for_a_cumulative_sum(check, device):
    autograd_call(check, "cumsum_sin", randn(check, 31, (5,), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_has_three_dimensions_for_a_matrix_output(check, device):
    autograd_call(check, "outer_sin", randn(check, 32, (3,), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_of_a_scalar_output_has_the_shape_of_x(check, device):
    autograd_call(check, "sum_of_squares", randn(check, 33, (2, 3), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_of_a_scalar_function_of_a_0_d_x_is_0_d(check, device):
    autograd_call(check, "sin", randn(check, 34, (), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_has_zero_rows_for_outputs_that_do_not_depend_on_x(check, device):
    autograd_call(check, "constant", randn(check, 35, (2, 2), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_has_zero_rows_for_outputs_that_depend_only_on_a_parameter(check, device):
    autograd_call(check, "parameter_only", randn(check, 38, (3,), device=device), hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
@pytest.mark.parametrize("fn", ["cumsum_sin", "parameter_only"])
def test_gives_a_jacobian_that_does_not_require_grad(check, device, fn):
    autograd_call(check, fn, randn(check, 39, (3,), device=device), history=True, hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
@pytest.mark.parametrize("caller", ["leaf_with_grad", "non_leaf"])
def test_leaves_the_grad_and_the_graph_of_the_callers_x_untouched(check, device, caller):
    autograd_call(check, "matmul_fixed", randn(check, 36, (4,), device=device), caller=caller, seed=36,
                  hints=JACOBIAN_HINTS)


@pytest.mark.target("jacobian")
def test_handles_a_non_contiguous_float32_x(check, device):
    x = randn(check, 37, (4, 3), device=device, dtype=torch.float32).t()
    autograd_call(check, "row_sums", x, hints=JACOBIAN_HINTS)


@pytest.mark.target("second_derivative")
def test_is_zero_for_a_linear_function(check, device):
    autograd_call(check, "linear", randn(check, 41, (3,), device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
def test_is_zero_for_a_function_of_a_parameter_alone(check, device):
    autograd_call(check, "parameter_only", randn(check, 46, (3,), device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
def test_is_zero_for_x_times_a_parameter(check, device):
    autograd_call(check, "times_a_parameter", randn(check, 47, (3,), device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
@pytest.mark.parametrize("fn", ["cube", "constant", "linear", "times_a_parameter"])
def test_gives_a_second_derivative_that_does_not_require_grad(check, device, fn):
    autograd_call(check, fn, randn(check, 48, (3,), device=device), history=True, hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
@pytest.mark.parametrize("fn", ["x_exp_x", "softplus", "tanh"])
def test_matches_on_smooth_functions_of_a_3_d_x(check, device, fn):
    autograd_call(check, fn, randn(check, 42, (2, 2, 3), device=device), hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
@pytest.mark.parametrize("caller", ["leaf_with_grad", "non_leaf"])
def test_differentiates_a_copy_of_a_caller_x_that_requires_grad(check, device, caller):
    autograd_call(check, "cube", randn(check, 43, (4,), device=device), caller=caller, seed=43, hints=SECOND_HINTS)


@pytest.mark.target("second_derivative")
def test_keeps_float32_and_0_d_inputs(check, device):
    autograd_call(check, "x_exp_x", randn(check, 44, (3,), device=device, dtype=torch.float32), hints=SECOND_HINTS)
    autograd_call(check, "sin", randn(check, 45, (), device=device), hints=SECOND_HINTS)


@pytest.mark.target("accumulated_grad")
def test_accumulates_for_random_float64_inputs(check, device):
    w, x = randn(check, 51, (1,), (1,), device=device)
    autograd_call(check, w, x, 3, fn=False, watched=[[0, "w"], [1, "x"]], hints=ACCUMULATED_HINTS)


@pytest.mark.target("accumulated_grad")
def test_returns_zeros_after_zero_steps(check, device):
    w, x = randn(check, 52, (1,), (1,), device=device)
    autograd_call(check, w, x, 0, fn=False, watched=[[0, "w"], [1, "x"]], hints=ACCUMULATED_HINTS)


@pytest.mark.target("sgd_step_")
def test_updates_a_parameter_listed_twice_once(check, device):
    check.random(61)
    explain(check, "a list naming one parameter twice", 0.2, probe="autograd_sgd_step",
            options={"device": device, "seed": 61}, hints=SGD_HINTS, note=sgd_note())


@pytest.mark.target("sgd_step_")
def test_takes_a_large_learning_rate_from_model_parameters(check, device):
    check.random(62)
    explain(check, "model.parameters()", 3.0, probe="autograd_sgd_step", options={"device": device, "seed": 62},
            hints=SGD_HINTS, note=sgd_note())
