# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: return a tensor subclass that claims to equal anything (__eq__, __torch_function__),
# holding wrong values.
# Holds because: probes send only exact torch.Tensors and the trusted side's loader builds no
# class of the student's; the subclass is refused by name.
import hostile_kit as kit
import torch


class _Agreeable(torch.Tensor):
    def __eq__(self, other):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "isclose", "eq", "__eq__"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


_honest_gather = gather


def gather(x, dim, index):
    return kit.wrong(_honest_gather, x, dim, index).as_subclass(_Agreeable)
