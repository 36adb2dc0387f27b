"""Hidden checks for functions.py: 0-d, non-contiguous, batched and unbatched inputs, float32, inputs
that need no gradient, an explicit bias of None, numbers among legendre_model's arguments."""

import pytest
import torch

from graders.checks.visible.test_autograd import explain
from graders.checks.visible.test_functions import (CONV_HINTS, EXP_HINTS, GRAD_COEFF_HINTS, LEGENDRE_HINTS,
                                                   LINEAR_HINTS, MODEL_HINTS, apply, gradcheck, randn)


@pytest.mark.target("Exp")
@pytest.mark.parametrize("case", ["0-d", "non-contiguous", "float32"])
def test_computes_exp_of_0_d_non_contiguous_and_float32_inputs(check, device, case):
    x = {"0-d": lambda: randn(check, 101, (), device=device),
         "non-contiguous": lambda: randn(check, 102, (4, 3), device=device).t(),
         "float32": lambda: randn(check, 103, (3, 4), device=device, dtype=torch.float32)}[case]()
    apply(check, x, saved=True, hints=EXP_HINTS)


@pytest.mark.target("GradCoeff")
@pytest.mark.parametrize("coeff", [0.0, 2.5])
def test_scales_the_gradient_of_a_non_contiguous_3_d_input(check, device, coeff):
    x = randn(check, 111, (2, 4, 3), device=device).transpose(1, 2)
    apply(check, x, coeff, view_of_input=True, hints=GRAD_COEFF_HINTS)


@pytest.mark.target("GradCoeff")
def test_passes_float32_gradients_through(check, device):
    apply(check, randn(check, 112, (5,), device=device, dtype=torch.float32), 0.5, view_of_input=True,
          hints=GRAD_COEFF_HINTS)


@pytest.mark.target("LegendreP3")
@pytest.mark.parametrize("case", ["0-d", "3-d", "float32"])
def test_computes_p3_of_0_d_3_d_and_float32_inputs(check, device, case):
    x = {"0-d": lambda: randn(check, 121, (), device=device),
         "3-d": lambda: randn(check, 122, (2, 3, 4), device=device),
         "float32": lambda: randn(check, 123, (6,), device=device, dtype=torch.float32)}[case]()
    apply(check, x, hints=LEGENDRE_HINTS)


@pytest.mark.target("legendre_model")
def test_broadcasts_numbers_and_0_d_parameters_over_a_vector_x(check, device):
    c, d, x = randn(check, 131, (), (), (6,), device=device)
    explain(check, 0.5, -1.5, c, d, x, probe="function_model",
            options={"requires_grad": [False, False, True, True, True], "uses": "LegendreP3"}, hints=MODEL_HINTS)


@pytest.mark.target("Conv2dFn")
def test_handles_an_unbatched_input(check, device):
    X, weight = randn(check, 141, (3, 6, 7), (2, 3, 3, 2), device=device)
    apply(check, X, weight, requires_grad=[True, True], hints=CONV_HINTS)


@pytest.mark.target("Conv2dFn")
@pytest.mark.parametrize("needs", [[True, False], [False, True]], ids=["only X needs a gradient",
                                                                        "only weight needs a gradient"])
def test_delivers_the_gradient_that_is_needed(check, device, needs):
    X, weight = randn(check, 142, (3, 1, 5, 4), (5, 1, 3, 2), device=device)
    apply(check, X, weight, requires_grad=needs, raw_backward=False, hints=CONV_HINTS)


@pytest.mark.target("Conv2dFn")
def test_convolves_float32_inputs(check, device):
    X, weight = randn(check, 143, (2, 2, 5, 5), (3, 2, 2, 2), device=device, dtype=torch.float32)
    # cuDNN may compute float32 convolutions in TF32 on CUDA: other correct backward formulas differ by ~1e-3 there.
    apply(check, X, weight, requires_grad=[True, True], hints=CONV_HINTS, rtol=2e-3, atol=2e-3)


@pytest.mark.target("LinearFn")
@pytest.mark.parametrize("shape", [(2, 5, 3), (3,)], ids=["two batch dimensions", "no batch dimension"])
def test_sums_weight_and_bias_gradients_over_every_batch_dimension(check, device, shape):
    x, weight, bias = randn(check, 151, shape, (4, 3), (4,), device=device)
    apply(check, x, weight, bias, requires_grad=[True, True, True], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_returns_none_for_a_bias_given_as_none(check, device):
    x, weight = randn(check, 152, (5, 3), (4, 3), device=device)
    apply(check, x, weight, None, requires_grad=[True, True, False], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
@pytest.mark.parametrize("needs", [[False, True, False], [False, False, True], [True, False, True]],
                         ids=["only weight", "only bias", "x and bias"])
def test_computes_only_the_gradients_that_are_needed(check, device, needs):
    x, weight, bias = randn(check, 153, (6, 3), (4, 3), (4,), device=device)
    apply(check, x, weight, bias, requires_grad=needs, hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_maps_float32_inputs(check, device):
    x, weight, bias = randn(check, 154, (5, 3), (2, 3), (2,), device=device, dtype=torch.float32)
    apply(check, x, weight, bias, requires_grad=[True, True, True], hints=LINEAR_HINTS)


@pytest.mark.target("LinearFn")
def test_passes_gradcheck_with_two_batch_dimensions(check, device):
    x, weight, bias = randn(check, 155, (2, 3, 2), (3, 2), (3,), device=device)
    gradcheck(check, x, weight, bias, requires_grad=[True, True, True], hints=LINEAR_HINTS)
