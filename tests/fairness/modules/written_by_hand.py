# expect: full marks
"""Modules built another way: submodules registered with setattr, a reduce over the ParameterList,
the ParameterDict from a comprehension, Kaiming's std worked out by hand as in the notes
(normal_ with sqrt(2 / fan_in)), parameters counted once by identity."""

import functools
import math


class MLP(nn.Module):
    def __init__(self, in_features=784, hidden=256, out_features=10):
        super().__init__()
        for name, layer in (("hidden", nn.Linear(in_features, hidden)), ("act", nn.ReLU()),
                            ("output", nn.Linear(hidden, out_features))):
            setattr(self, name, layer)

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x


class MyLayer(nn.Module):
    def forward(self, x):
        return x - torch.mean(x)


class MyListDense(nn.Module):
    def __init__(self):
        super().__init__()
        self.params = nn.ParameterList(nn.Parameter(torch.randn(4, n)) for n in (4, 4, 4, 1))

    def forward(self, x):
        return functools.reduce(torch.mm, self.params, x)


class MyDictDense(nn.Module):
    def __init__(self):
        super().__init__()
        self.params = nn.ParameterDict({f"linear{i}": nn.Parameter(torch.randn(4, n))
                                        for i, n in ((1, 4), (2, 1), (3, 2))})

    def forward(self, x, choice="linear1"):
        return x.mm(self.params[choice])


def init_weights(model):
    for m in model.modules():
        if isinstance(m, nn.Linear):
            fan_in = m.in_features
        elif isinstance(m, nn.Conv2d):
            fan_in = m.in_channels // m.groups * math.prod(m.kernel_size)
        else:
            continue
        with torch.no_grad():
            m.weight.normal_(0.0, math.sqrt(2.0 / fan_in))
            if m.bias is not None:
                m.bias.zero_()


def count_parameters(model, trainable_only=True):
    unique = {}
    for p in model.parameters(recurse=True):
        unique[id(p)] = p
    return sum(p.numel() for p in unique.values() if p.requires_grad or not trainable_only)
