"""Cases of docs/devices.md's specification, run on one CUDA stand-in; prints each case's outcome as JSON.

    python tests/standin_cases.py python     # torchgrade/sandbox/standin.py
    python tests/standin_cases.py compiled   # torchgrade/sandbox/cudastandin.cpp (loaded before torch)

An outcome is what a check could see: the result's device, dtype, shape and values, or the exception's
type and message; "set aside" where the stand-in says it cannot model the case. tests/test_cudastandin.py
runs both and requires the same outcome for every case (the differential test), and the fairness corpus's
CUDA-only mistakes lose where the reference does not.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WAY = sys.argv[1] if len(sys.argv) > 1 else "python"
if WAY == "compiled":
    from torchgrade.sandbox import cudastandin

    if cudastandin.load() is None:
        print(json.dumps({"error": "the compiled stand-in did not load"}))
        sys.exit(0)

import torch  # noqa: E402 (after the compiled stand-in, which must come first)

from torchgrade.sandbox import standin  # noqa: E402


def outcome(value):
    """What a check sees of a result (tensors in tuples and lists included)."""
    if isinstance(value, torch.Tensor):
        cpu = value.detach().cpu()
        values = cpu.tolist() if cpu.dtype != torch.bool else cpu.int().tolist()
        return ["tensor", str(value.device), str(value.dtype), list(value.shape), _rounded(values),
                bool(value.requires_grad)]
    if isinstance(value, (tuple, list)):
        return [outcome(v) for v in value]
    if isinstance(value, torch.device):
        return ["device", str(value)]
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(type(value))


def _rounded(values):
    if isinstance(values, list):
        return [_rounded(v) for v in values]
    return round(values, 4) if isinstance(values, float) else values


def load(path: str, name: str):
    """`name` from a reference module, or from a fairness corpus submission (appended to its reference)."""
    parts = Path(path).parts
    source = (ROOT / path).read_text()
    if parts[:2] == ("tests", "fairness"):
        source = (ROOT / "reference" / f"{parts[2]}.py").read_text() + "\n" + source
    namespace = {"__name__": f"case_{Path(path).stem}"}
    exec(compile(source, str(ROOT / path), "exec"), namespace)
    return namespace[name]


def _backward_grad(fn, x):
    x = x.detach().requires_grad_()
    fn(x).sum().backward()
    return x.grad


def _lstm():
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(3, 4).cuda()
    x = torch.randn(2, 3, device="cuda", requires_grad=True)
    h, c = cell(x)
    (h.sum() + c.sum()).backward()
    return h, x.grad, cell.weight_ih.grad


def _gru():
    torch.manual_seed(0)
    gru = torch.nn.GRU(3, 4).cuda()
    x = torch.randn(5, 2, 3, device="cuda", requires_grad=True)
    out, h = gru(x)
    out.sum().backward()
    return out, x.grad


def _depthwise():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 2, 3, groups=2).cuda()
    x = torch.randn(1, 2, 5, 5, device="cuda", requires_grad=True)
    y = conv(x)
    y.sum().backward()
    return y, x.grad, conv.weight.grad


def _train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 3, device="cuda"), torch.randn(8, 1, device="cuda")
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss, model[0].weight


def _inference_view():
    p = torch.ones(2, 3, device="cuda", requires_grad=True)
    with torch.inference_mode():
        v, made = p[0], p * 2
    return v.is_inference(), made.is_inference(), torch.ones(1, device="cuda").is_inference()


def _resize():
    t = torch.ones(2, device="cuda")
    t.resize_(6)
    t.fill_(2.0)
    return t


def _out():
    out = torch.empty(0, device="cuda")
    torch.add(torch.ones(3, device="cuda"), 1, out=out)
    return out


def _module_forms():
    m = torch.nn.Linear(2, 2)
    forms = [m.cuda().weight.device, m.to("cpu").to("cuda", torch.float64).weight.dtype,
             m.to(torch.float32).weight.dtype, m.to(torch.ones(1, device="cuda")).weight.device,
             m.double().weight.dtype, m.to(device="cuda", dtype=torch.float32).weight.dtype]
    return [str(f) for f in forms]


def _view_write():
    x = torch.zeros(2, 3, device="cuda")
    x.view(6)[1] = 5
    x[1].add_(1)
    x.t_()
    return x, x.is_contiguous()


def _deepcopy():
    m = torch.nn.Linear(2, 2).cuda()
    return copy.deepcopy(m).weight.device, copy.deepcopy(torch.ones(2, device="cuda"))


def _rng():
    torch.manual_seed(1)
    a = torch.randn(3, device="cuda")
    torch.manual_seed(1)
    return a, torch.randn(3, device="cuda"), torch.rand(2, device="cuda").device


CASES = {
    # placement and factories
    "factory device=cuda": lambda: torch.arange(6.0, device="cuda"),
    "factory device=cuda:0": lambda: torch.zeros(2, device="cuda:0"),
    "factory device=torch.device": lambda: torch.ones(2, device=torch.device("cuda")),
    "factory device=x.device": lambda: torch.full((2,), 3.0, device=torch.ones(1, device="cuda").device),
    "bare factory stays on the cpu": lambda: torch.zeros(2),
    "torch.tensor device=cuda": lambda: torch.tensor([1, 2], device="cuda"),
    "as_tensor device=cuda": lambda: torch.as_tensor([1.0, 2.0], device="cuda"),
    "new_tensor / new_zeros / zeros_like": lambda: [torch.ones(2, device="cuda").new_tensor([3.0]),
                                                    torch.ones(2, device="cuda").new_zeros(2),
                                                    torch.zeros_like(torch.ones(2, device="cuda"))],
    ".cuda()": lambda: torch.tensor([1.0]).cuda(),
    ".to('cuda')": lambda: torch.tensor([1.0]).to("cuda"),
    ".to(device, dtype)": lambda: torch.tensor([1.0]).to("cuda", torch.float64),
    ".to(tensor)": lambda: torch.tensor([1.0]).to(torch.ones(1, device="cuda")),
    ".to(non_blocking=True)": lambda: torch.tensor([1.0]).to("cuda", non_blocking=True),
    ".to('cuda') is no copy": lambda: (lambda x: [x.to("cuda") is x, x.cuda() is x, x.to("cuda:0") is x])(
        torch.ones(1, device="cuda")),
    ".cpu()": lambda: torch.ones(2, device="cuda").cpu(),
    "is_cuda / get_device": lambda: (lambda x: [x.is_cuda, x.get_device(), str(x.device)])(torch.ones(1, device="cuda")),
    "repr": lambda: repr(torch.ones(2, device="cuda", requires_grad=True) * 2),
    "item / tolist / int(max)": lambda: (lambda x: [x.sum().item(), x.tolist(), int(x.max())])(
        torch.tensor([3, 1, 2], device="cuda")),
    "module forms": _module_forms,
    "deepcopy": _deepcopy,
    # CUDA's rules for mixing
    "cpu tensor mixed in": lambda: torch.ones(3, device="cuda") + torch.zeros(3),
    "linear with cpu weights": lambda: torch.nn.Linear(2, 3)(torch.ones(4, 2, device="cuda")),
    "cat of mixed devices": lambda: torch.cat([torch.ones(2, device="cuda"), torch.ones(2)]),
    "matmul with a cpu tensor": lambda: torch.ones(2, 2, device="cuda") @ torch.ones(2, 2),
    "cpu 0-d scalar is allowed": lambda: torch.ones(3, device="cuda") * torch.tensor(2.0),
    "python number is allowed": lambda: torch.ones(3, device="cuda") * 2,
    "where with a cpu 0-d scalar": lambda: torch.where(torch.ones(2, device="cuda") > 0, torch.ones(2, device="cuda"),
                                                       torch.tensor(0.0)),
    "in place into a cpu scalar": lambda: torch.tensor(1.0).add_(torch.ones((), device="cuda")),
    "in place cpu tensor from cuda": lambda: torch.ones(3).add_(torch.ones(3, device="cuda")),
    "copy_ across devices": lambda: (lambda y: (y.copy_(torch.arange(3.0)), y)[1])(torch.zeros(3, device="cuda")),
    "setitem from cpu": lambda: (lambda y: (y.__setitem__(0, torch.tensor(5.0)), y)[1])(torch.zeros(3, device="cuda")),
    "cpu indices for a cuda tensor": lambda: torch.arange(5.0, device="cuda")[torch.tensor([1, 3])],
    "cpu mask for a cuda tensor": lambda: (lambda x: (x.__setitem__(x.cpu() > 2, 0.0), x)[1])(
        torch.arange(5.0, device="cuda")),
    "cuda indices for a cpu tensor": lambda: torch.arange(5.0)[torch.tensor([1, 3], device="cuda")],
    "numpy of a cuda tensor": lambda: torch.ones(2, device="cuda").numpy(),
    "cpu generator for a cuda op": lambda: torch.randn(2, device="cuda", generator=torch.Generator()),
    # views, in place, storage
    "views write through": _view_write,
    "chunk / unbind / split": lambda: [torch.arange(6.0, device="cuda").chunk(3),
                                       torch.ones(2, 2, device="cuda").unbind()],
    "resize_ grows": _resize,
    "out= resized": _out,
    "set_ to another tensor": lambda: (lambda a, b: (a.set_(b), a, a.untyped_storage().data_ptr()
                                                     == b.untyped_storage().data_ptr())[1:])(
        torch.ones(2, device="cuda"), torch.arange(5.0, device="cuda")),
    "storage is shared by views": lambda: (lambda x: x.view(4).untyped_storage().data_ptr()
                                           == x.untyped_storage().data_ptr())(torch.ones(2, 2, device="cuda")),
    "inference_mode views of a normal tensor": _inference_view,
    # autograd
    "backward": lambda: _backward_grad(lambda x: (x * x).sin(), torch.arange(3.0, device="cuda")),
    "custom backward with a cpu constant": lambda: _backward_grad(
        load("tests/fairness/functions/legendre_constant_on_the_cpu.py", "LegendreP3").apply,
        torch.arange(3.0, device="cuda")),
    "custom backward, reference": lambda: _backward_grad(load("reference/functions.py", "LegendreP3").apply,
                                                         torch.arange(3.0, device="cuda")),
    "training steps (Adam)": _train,
    "fused rnn cells (LSTMCell)": _lstm,
    "fused rnn cells (GRU)": _gru,
    "depthwise convolution": _depthwise,
    "random numbers follow the cpu's seed": _rng,
    # the corpus's CUDA-only mistakes, and the reference
    "one_hot, reference": lambda: load("reference/tensors.py", "one_hot")(torch.tensor([0, 2, 1], device="cuda"), 3),
    "one_hot, zeros on the cpu": lambda: load("tests/fairness/tensors/one_hot_zeros_on_the_cpu.py", "one_hot")(
        torch.tensor([0, 2, 1], device="cuda"), 3),
    "corr2d, reference": lambda: load("reference/conv.py", "corr2d")(torch.arange(9.0, device="cuda").view(3, 3),
                                                                     torch.ones(2, 2, device="cuda")),
    "corr2d, zeros on the cpu": lambda: load("tests/fairness/conv/corr2d_zeros_on_the_cpu.py", "corr2d")(
        torch.arange(9.0, device="cuda").view(3, 3), torch.ones(2, 2, device="cuda")),
    # what no stand-in models: the code calls torch.cuda itself
    "torch.cuda.get_rng_state": lambda: torch.cuda.get_rng_state(),
    "torch.cuda.is_available": lambda: torch.cuda.is_available(),
}


def run(case) -> list:
    scope = standin.active() if WAY == "python" else contextlib.nullcontext()
    with scope:
        try:
            return ["ok", outcome(case())]
        except standin.Unsupported:
            return ["set aside"]
        except Exception as e:  # noqa: BLE001 - which exception is the outcome
            message = str(e).split("\n")[0]
            if "cannot model" in message:
                return ["set aside"]
            return ["raises", type(e).__name__, message[:200]]


if __name__ == "__main__":
    print(json.dumps({name: run(case) for name, case in CASES.items()}))
