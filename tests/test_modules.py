"""Checks for modules.py: the reference scores full marks, the stubs zero, other correct modules too,
and each realistic mistake loses exactly its own target, with a message that names what went wrong."""

import pytest

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets


def test_reference_scores_full_marks(assignment):
    g = grade_submission(ROOT / "reference", assignment, device="cpu", only=("modules",))
    assert g.max_score == pytest.approx(assignment.exercise("modules").points)
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]


def test_untouched_stubs_score_zero(assignment):
    g = grade_submission(ROOT / "exercises", assignment, device="cpu", only=("modules",))
    assert g.score == 0 and g.max_score == pytest.approx(assignment.exercise("modules").points)
    assert all("not implemented yet" in t.output for t in g.tests if t.status == "failed")


def lost_with(g, target, *words):
    """Assert that only `target` lost points and that one of its messages holds all `words`."""
    assert lost_targets(g) == {target}
    messages = failures(g, target)
    assert any(all(w in m for w in words) for m in messages), messages[:2]


OTHER_CORRECT_MODULES = """
    class MyLayer(nn.Module):
        def forward(self, x):
            return x - x.sum() / x.numel()


    class MyListDense(nn.Module):
        def __init__(self):
            super().__init__()
            self.params = nn.ParameterList()
            for shape in [(4, 4), (4, 4), (4, 4), (4, 1)]:
                self.params.append(nn.Parameter(torch.randn(*shape)))

        def forward(self, x):
            for p in self.params:
                x = x @ p
            return x


    def init_weights(model):
        with torch.no_grad():
            for m in list(model.modules())[::-1]:        # another order: other random draws
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    if m.bias is not None:
                        m.bias.zero_()
                    fan_in = m.weight[0].numel()
                    m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5)


    def count_parameters(model, trainable_only=True):
        total = 0
        for p in model.parameters():
            if p.requires_grad or not trainable_only:
                total += p.numel()
        return total
"""


def test_other_correct_modules_score_full_marks(grade, assignment):
    g = grade(only=("modules",), append={"modules": OTHER_CORRECT_MODULES})
    assert lost_targets(g) == set(), [(t.name, t.output) for t in g.tests if t.status == "failed"][:2]
    assert g.score == pytest.approx(assignment.exercise("modules").points)


MLP_MISTAKES = {
    "other submodule names": (
        [("self.hidden = nn.Linear(in_features, hidden)\n        self.act = nn.ReLU()\n"
          "        self.output = nn.Linear(hidden, out_features)",
          "self.fc1 = nn.Linear(in_features, hidden)\n        self.act = nn.ReLU()\n"
          "        self.fc2 = nn.Linear(hidden, out_features)"),
         ("return self.output(self.act(self.hidden(x)))", "return self.fc2(self.act(self.fc1(x)))")],
        ("['submodules']", "'hidden: Linear'", "must register nn.Linear `hidden`")),
    "a ReLU after the output layer": (
        [("return self.output(self.act(self.hidden(x)))", "return self.act(self.output(self.act(self.hidden(x))))")],
        ("the result", "no activation after output")),
    "the default sizes whatever the arguments": (
        [("self.hidden = nn.Linear(in_features, hidden)", "self.hidden = nn.Linear(784, 256)"),
         ("self.output = nn.Linear(hidden, out_features)", "self.output = nn.Linear(256, 10)")],
        ("['parameters']", "'(5, 7)'", "'(256, 784)'", "sized by the constructor's arguments")),
}


@pytest.mark.parametrize("mistake", MLP_MISTAKES)
def test_a_wrong_mlp_loses_mlp(grade, mistake):
    changes, words = MLP_MISTAKES[mistake]
    lost_with(grade(only=("modules",), replace={"modules": changes}), "modules.MLP", *words)


def test_a_layer_centred_per_column_loses_my_layer(grade):
    g = grade(only=("modules",), replace={"modules": [("return x - x.mean()\n", "return x - x.mean(dim=0)\n")]})
    lost_with(g, "modules.MyLayer", "the result", "the mean over all elements")


def test_a_plain_list_of_parameters_loses_my_list_dense(grade):
    g = grade(only=("modules",), replace={"modules": [(
        "self.params = nn.ParameterList([nn.Parameter(torch.randn(4, 4)) for _ in range(3)])",
        "self.params = [nn.Parameter(torch.randn(4, 4)) for _ in range(3)]")]})
    lost_with(g, "modules.MyListDense", "['submodules']", "'params: ParameterList'",
              "a plain Python list registers nothing")


def test_a_plain_dict_of_parameters_loses_my_dict_dense(grade):
    g = grade(only=("modules",), replace={"modules": [
        ("self.params = nn.ParameterDict({", "self.params = dict({"),
        ('self.params.update({"linear3": nn.Parameter(torch.randn(4, 2))})',
         'self.params["linear3"] = nn.Parameter(torch.randn(4, 2))')]})
    lost_with(g, "modules.MyDictDense", "['submodules']", "'params: ParameterDict'", "nn.ParameterDict with linear1")


KAIMING = '            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")'
INIT_MISTAKES = {
    "kaiming_uniform_ with the ReLU gain": (
        KAIMING,
        '            nn.init.kaiming_uniform_(m.weight, mode="fan_in", nonlinearity="relu")',
        ("['weight_kurtosis']", "use kaiming_normal_, not kaiming_uniform_")),
    "fan_out": (
        KAIMING, '            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")',
        ("['weight_std']", "std sqrt(2 / fan_in)")),
    "a fan_in that ignores the kernel": (
        KAIMING,
        "            nn.init.normal_(m.weight, 0.0, (2 / m.weight.shape[1]) ** 0.5)",
        ("['weight_std']['2.0']", "in_channels / groups * kh * kw")),
    "biases left alone": ("nn.init.zeros_(m.bias)", "pass", ("['bias_zero']", "expected True, got False")),
    "every module with a weight matrix": (
        "if isinstance(m, (nn.Linear, nn.Conv2d)):",
        "if getattr(m, 'weight', None) is not None and m.weight.dim() > 1:",
        ("['others_unchanged']", "changes only nn.Linear and nn.Conv2d")),
    "the children only": (
        "for m in model.modules():", "for m in model.children():",
        ("['weight_initialised']['2.0']", "expected True, got False", "however deeply nested")),
    "a new Parameter": (
        KAIMING,
        '            m.weight = nn.Parameter(nn.init.kaiming_normal_(torch.empty_like(m.weight), nonlinearity="relu"))',
        ("['weight_in_place']", "expected True, got False", "instead of assigning a new tensor or Parameter")),
}


@pytest.mark.parametrize("mistake", INIT_MISTAKES)
def test_a_wrong_init_weights_loses_init_weights(grade, mistake):
    old, new, words = INIT_MISTAKES[mistake]
    lost_with(grade(only=("modules",), replace={"modules": [(old, new)]}), "modules.init_weights", *words)


COUNT_MISTAKES = {
    "tensors instead of scalars": (
        "return int(sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only))",
        "return len([p for p in model.parameters() if p.requires_grad or not trainable_only])",
        ("expected 203530, got 4",)),
    "the state_dict (tied weights twice, buffers)": (
        "return int(sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only))",
        "return sum(t.numel() for t in model.state_dict().values())",
        ("expected 1600, got 3200", "tied weights once, no buffers")),
    "trainable_only ignored": (
        "return int(sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only))",
        "return sum(p.numel() for p in model.parameters())",
        ("expected 2570, got 203530", "only those with requires_grad")),
}


@pytest.mark.parametrize("mistake", COUNT_MISTAKES)
def test_a_wrong_count_loses_count_parameters(grade, mistake):
    old, new, words = COUNT_MISTAKES[mistake]
    lost_with(grade(only=("modules",), replace={"modules": [(old, new)]}), "modules.count_parameters", *words)
