"""Visible checks for modules.py: what each module registers, and what it computes with given weights.

Weights are loaded into the student's module by the names the contract fixes (``hidden.weight``,
``params.0``, ``params.linear1`` ...), so forward values and gradients compare exactly what any
correct module computes. Models for init_weights and count_parameters come from the public tables
in torchgrade/sandbox/probes/modules.py.
"""

import pytest
import torch

from graders.checks.visible.test_autograd import explain


def state(g, shapes, device="cpu"):
    """A state_dict with the contract's parameter names and float64 values drawn from `g`."""
    return {name: randn(g, *shape, device=device) for name, shape in shapes.items()}


def mlp_state(g, in_features, hidden, out_features, device="cpu"):
    return state(g, {"hidden.weight": (hidden, in_features), "hidden.bias": (hidden,),
                     "output.weight": (out_features, hidden), "output.bias": (out_features,)}, device)


LIST_SHAPES = {"params.0": (4, 4), "params.1": (4, 4), "params.2": (4, 4), "params.3": (4, 1)}
DICT_SHAPES = {"params.linear1": (4, 4), "params.linear2": (4, 1), "params.linear3": (4, 2)}


def module_hints(name, registers_en, registers_zh, forward_en, forward_zh):
    """Hints for module_facts: what the module registers, then what forward computes."""
    registered = {"en": f"{name} must register {registers_en}.", "zh": f"{name} 必须注册 {registers_zh}。"}
    return (
        ("['submodules']", registered),
        ("['parameters']", registered),
        ("Error(s) in loading state_dict", registered),
        ("", {"en": f"{name}.forward must return {forward_en}.", "zh": f"{name}.forward 应返回 {forward_zh}。"}),
    )


MLP_HINTS = module_hints(
    "MLP", "nn.Linear `hidden` (in_features -> hidden), nn.ReLU `act` and nn.Linear `output` (hidden -> "
    "out_features), in this order, sized by the constructor's arguments",
    "nn.Linear `hidden`（in_features -> hidden）、nn.ReLU `act` 和 nn.Linear `output`（hidden -> out_features），"
    "按此顺序，大小由构造函数的参数决定",
    "output(act(hidden(x))), with no activation after output", "output(act(hidden(x)))，output 之后没有激活函数")
LAYER_HINTS = module_hints(
    "MyLayer", "no parameters", "任何参数（它没有参数）",
    "x - x.mean(), with the mean over all elements (not per row or column)",
    "x - x.mean()，对全部元素求均值（不是按行或按列）")
LIST_HINTS = module_hints(
    "MyListDense", "self.params as an nn.ParameterList of three (4, 4) parameters and one (4, 1) (a plain Python "
    "list registers nothing)",
    "self.params：一个 nn.ParameterList，含三个 (4, 4) 参数和一个 (4, 1) 参数（普通 Python 列表不会注册任何参数）",
    "x multiplied by each parameter in turn with torch.mm", "依次用 torch.mm 把 x 与每个参数相乘的结果")
DICT_HINTS = module_hints(
    "MyDictDense", "self.params as an nn.ParameterDict with linear1 (4, 4), linear2 (4, 1) and linear3 (4, 2)",
    "self.params：一个 nn.ParameterDict，含 linear1 (4, 4)、linear2 (4, 1)、linear3 (4, 2)",
    "torch.mm(x, self.params[choice]), with choice='linear1' by default",
    "torch.mm(x, self.params[choice])，choice 默认为 'linear1'")
INIT_HINTS = (
    ("['weight_initialised']", {
        "en": "init_weights must reach every nn.Linear and nn.Conv2d inside model, however deeply nested, and the "
              "model itself: model.modules() yields them all (model.children() only the direct children).",
        "zh": "init_weights 要处理模型中每一个 nn.Linear 和 nn.Conv2d（无论嵌套多深）以及模型本身："
              "model.modules() 会遍历全部（model.children() 只有直接子模块）。"}),
    ("['bias_zero']", {"en": "init_weights must set the bias of every nn.Linear and nn.Conv2d to zero.",
                       "zh": "init_weights 要把每个 nn.Linear 和 nn.Conv2d 的偏置置零。"}),
    ("['weight_in_place']", {
        "en": "write into the layer's own weight (nn.init.kaiming_normal_(m.weight, ...)) instead of assigning a new "
              "tensor or Parameter.",
        "zh": "请直接写入层自己的权重（nn.init.kaiming_normal_(m.weight, ...)），不要赋值一个新的张量或 Parameter。"}),
    ("['others_unchanged']", {
        "en": "init_weights changes only nn.Linear and nn.Conv2d layers (and their subclasses); every other module "
              "(Conv1d, BatchNorm2d, LayerNorm, Embedding, ...) keeps its values.",
        "zh": "init_weights 只修改 nn.Linear 和 nn.Conv2d（及其子类）；其它模块（Conv1d、BatchNorm2d、LayerNorm、"
              "Embedding 等）保持原值。"}),
    ("['weight_kurtosis']", {
        "en": "the weights are not normally distributed (the kurtosis of a normal distribution is 3, of a uniform "
              "one 1.8): use kaiming_normal_, not kaiming_uniform_.",
        "zh": "权重不是正态分布（正态分布的峰度为 3，均匀分布为 1.8）：请用 kaiming_normal_，不要用 kaiming_uniform_。"}),
    ("['weight_mean_over_std']", {"en": "Kaiming-normal weights have mean 0.", "zh": "Kaiming 正态初始化的权重均值为 0。"}),
    ("", {"en": "every nn.Linear and nn.Conv2d weight, however deeply nested, is drawn from a normal distribution "
                "with mean 0 and std sqrt(2 / fan_in): nn.init.kaiming_normal_(m.weight, mode='fan_in', "
                "nonlinearity='relu'), where fan_in is in_features, or in_channels / groups * kh * kw.",
          "zh": "每个 nn.Linear 和 nn.Conv2d（无论嵌套多深）的权重都服从均值 0、标准差 sqrt(2 / fan_in) 的正态分布："
                "nn.init.kaiming_normal_(m.weight, mode='fan_in', nonlinearity='relu')，fan_in 为 in_features，"
                "或 in_channels / groups * kh * kw。"}),
)
COUNT_HINTS = (
    ("", {"en": "count scalars: sum p.numel() over model.parameters() (tied weights once, no buffers), only those "
                "with requires_grad when trainable_only; return a Python int.",
          "zh": "统计标量个数：对 model.parameters() 求 p.numel() 之和（共享的参数只算一次，不算 buffer），"
                "trainable_only 时只计 requires_grad 的参数；返回 Python int。"}),
)


def forward(check, *args, inputs, hints, kwargs=None, forward_kwargs=None, state=None, seed=0, accept=()):
    """Build the target with `args`, load `state`, run forward on `inputs` and backward (probe module_facts)."""
    shown = ", ".join([f"{str(x.dtype).replace('torch.', '')} tensor of shape {tuple(x.shape)}" for x in inputs]
                      + [f"{k}={v!r}" for k, v in (forward_kwargs or {}).items()])
    loaded = "" if state is None else {"en": " with the weights loaded by name", "zh": "（已按名称加载权重）"}
    note = {"en": f"then forward({shown}){loaded and loaded['en']}, and backward from a fixed gradient",
            "zh": f"随后调用 forward({shown}){loaded and loaded['zh']}，并从固定的梯度做反向传播"}
    return explain(check, *args, probe="module_facts", hints=hints, accept=accept, kwargs=kwargs, note=note,
                   options={"inputs": inputs, "forward_kwargs": forward_kwargs, "state": state, "seed": seed})


def randn(g, *shape, device="cpu", dtype=torch.float64):
    return torch.randn(shape, generator=g, dtype=dtype).to(device)


def init_weights(check, model, seed, device):
    """Three looks at one seeded init_weights call: what it changed, the spread and the centre of the weights."""
    check.random(seed)
    options = {"seed": seed, "device": device}
    explain(check, model, probe="init_weights_report", options={**options, "part": "structure"}, hints=INIT_HINTS)
    # ~1e5 weights per layer: their std is within 0.3% of the true one, their kurtosis within 0.5%.
    explain(check, model, probe="init_weights_report", options={**options, "part": "spread"}, rtol=0.05, atol=0.0,
            hints=INIT_HINTS)
    explain(check, model, probe="init_weights_report", options={**options, "part": "centre"}, rtol=0.0, atol=0.03,
            hints=INIT_HINTS)


@pytest.mark.target("MLP")
def test_registers_hidden_act_output_and_computes_with_given_weights(check, device):
    g = check.random(1)
    forward(check, 7, 5, 3, state=mlp_state(g, 7, 5, 3, device), inputs=(randn(g, 4, 7, device=device),), seed=1,
            hints=MLP_HINTS)


@pytest.mark.target("MLP")
def test_has_the_default_sizes_784_256_10(check, device):
    g = check.random(3)
    forward(check, state=mlp_state(g, 784, 256, 10, device), inputs=(randn(g, 2, 784, device=device),), seed=3,
            hints=MLP_HINTS)


@pytest.mark.target("MyLayer")
def test_centres_the_notes_vector(check, device):
    forward(check, inputs=(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64, device=device),),
            hints=LAYER_HINTS)


@pytest.mark.target("MyLayer")
def test_subtracts_the_mean_of_all_elements_of_a_matrix(check, device):
    forward(check, inputs=(randn(check.random(11), 3, 4, device=device),), seed=11, hints=LAYER_HINTS)


@pytest.mark.target("MyListDense")
def test_registers_a_parameter_list_and_multiplies_through_it(check, device):
    g = check.random(21)
    forward(check, state=state(g, LIST_SHAPES, device), inputs=(randn(g, 3, 4, device=device),), seed=21,
            hints=LIST_HINTS)


@pytest.mark.target("MyDictDense")
def test_registers_a_parameter_dict_and_uses_linear1_by_default(check, device):
    g = check.random(31)
    forward(check, state=state(g, DICT_SHAPES, device), inputs=(randn(g, 3, 4, device=device),), seed=31,
            hints=DICT_HINTS)


@pytest.mark.target("MyDictDense")
def test_uses_the_chosen_parameter(check, device):
    g = check.random(33)
    forward(check, state=state(g, DICT_SHAPES, device), inputs=(randn(g, 3, 4, device=device),),
            forward_kwargs={"choice": "linear3"}, seed=33, hints=DICT_HINTS)


@pytest.mark.target("init_weights")
def test_draws_kaiming_normal_fan_in_weights_and_zero_biases(check, device):
    init_weights(check, "Linear(250, 400)", 41, device)


@pytest.mark.target("init_weights")
def test_reaches_nested_layers_and_leaves_other_modules_alone(check, device):
    init_weights(check, "nested: Linear, ReLU, [Conv2d 3x5, BatchNorm2d], Conv1d", 42, device)


@pytest.mark.target("count_parameters")
def test_counts_the_scalars_of_the_notes_mlp(check):
    explain(check, "MLP(784, 256, 10)", probe="count_parameters_of", exact=True, hints=COUNT_HINTS)


@pytest.mark.target("count_parameters")
@pytest.mark.parametrize("trainable_only", [True, False])
def test_counts_frozen_parameters_only_when_asked(check, trainable_only):
    explain(check, "MLP(784, 256, 10) with the first layer frozen", probe="count_parameters_of",
            kwargs={"trainable_only": trainable_only}, exact=True, hints=COUNT_HINTS)


@pytest.mark.target("count_parameters")
def test_counts_only_trainable_parameters_by_default(check):
    explain(check, "MLP(784, 256, 10) with the first layer frozen", probe="count_parameters_of", exact=True,
            hints=COUNT_HINTS)


@pytest.mark.target("count_parameters")
@pytest.mark.parametrize("model", ["Embedding(100, 16) tied to Linear(16, 100)",
                                   "Conv2d(3, 8, 3) and BatchNorm2d(8) (with buffers)"])
def test_counts_a_shared_parameter_once_and_no_buffers(check, model):
    explain(check, model, probe="count_parameters_of", exact=True, hints=COUNT_HINTS)


@pytest.mark.target("count_parameters")
def test_returns_zero_for_a_model_without_parameters(check):
    explain(check, "ReLU() (no parameters)", probe="count_parameters_of", exact=True, hints=COUNT_HINTS)
