"""Hidden checks for modules.py: batch dimensions, keyword sizes, every parameter of the containers,
unknown choices, bias-free, subclassed and grouped layers, tied weights, buffers, frozen parameters."""

import pytest
import torch

from graders.checks.visible.test_autograd import explain
from graders.checks.visible.test_modules import (COUNT_HINTS, DICT_HINTS, DICT_SHAPES, LAYER_HINTS, LIST_HINTS,
                                                 LIST_SHAPES, MLP_HINTS, forward, init_weights, mlp_state, randn,
                                                 state)


@pytest.mark.target("MLP")
def test_takes_its_sizes_as_keywords_and_any_batch_dimensions(check, device):
    g = check.random(201)
    forward(check, kwargs={"in_features": 6, "hidden": 9, "out_features": 2}, state=mlp_state(g, 6, 9, 2, device),
            inputs=(randn(g, 2, 3, 6, device=device),), seed=201, hints=MLP_HINTS)


@pytest.mark.target("MyLayer")
@pytest.mark.parametrize("case", ["3-d", "float32"])
def test_centres_3_d_and_float32_inputs(check, device, case):
    g = check.random(211)
    x = randn(g, 2, 3, 4, device=device) if case == "3-d" else randn(g, 5, 2, device=device, dtype=torch.float32)
    forward(check, inputs=(x,), seed=211, hints=LAYER_HINTS)


@pytest.mark.target("MyListDense")
def test_gives_every_parameter_its_gradient_for_a_single_row(check, device):
    g = check.random(221)
    forward(check, state=state(g, LIST_SHAPES, device), inputs=(randn(g, 1, 4, device=device),), seed=221,
            hints=LIST_HINTS)


@pytest.mark.target("MyDictDense")
def test_uses_linear2_and_gives_the_others_no_gradient(check, device):
    g = check.random(231)
    forward(check, state=state(g, DICT_SHAPES, device), inputs=(randn(g, 5, 4, device=device),),
            forward_kwargs={"choice": "linear2"}, seed=231, hints=DICT_HINTS)


@pytest.mark.target("MyDictDense")
def test_raises_for_an_unknown_choice(check, device):
    # A missing key of an nn.ParameterDict raises AttributeError in recent PyTorch, KeyError in older ones.
    g = check.random(233)
    forward(check, state=state(g, DICT_SHAPES, device), inputs=(randn(g, 2, 4, device=device),),
            forward_kwargs={"choice": "linear4"}, accept=("KeyError",), hints=DICT_HINTS)


@pytest.mark.target("init_weights")
@pytest.mark.parametrize("model", ["bias-free Linear and Conv2d", "Linear subclass, LayerNorm, Embedding",
                                   "Conv2d(128, 256, (3, 5), groups=4)"])
def test_handles_bias_free_subclassed_and_grouped_layers(check, device, model):
    init_weights(check, model, 251, device)


@pytest.mark.target("count_parameters")
@pytest.mark.parametrize("model", ["Embedding(100, 16) tied to Linear(16, 100)",
                                   "Conv2d(3, 8, 3) and BatchNorm2d(8) (with buffers)", "ReLU() (no parameters)"])
def test_counts_tied_weights_once_and_no_buffers(check, model):
    explain(check, model, probe="count_parameters_of", exact=True, hints=COUNT_HINTS)


@pytest.mark.target("count_parameters")
@pytest.mark.parametrize("trainable_only", [True, False])
def test_counts_a_partly_frozen_layer(check, trainable_only):
    explain(check, "Linear(10, 5) with only its bias frozen", trainable_only, probe="count_parameters_of", exact=True,
            hints=COUNT_HINTS)
