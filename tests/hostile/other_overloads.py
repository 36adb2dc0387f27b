# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather, scatter_ and scatter_add_ call the forbidden operator under an overload other than
# `.default` (`torch.ops.aten.gather.out`, `scatter_.src`, `scatter_add.out`), with names built at
# run time: the recorder saw `gather.out`, and only `.default`/`.Tensor` were taken off before
# matching. Each then returns the honest result, so only the forbidden call can cost it.
# Holds because: a call is matched by its operator, whatever the overload.
import hostile_kit as kit
import torch

_honest_gather, _honest_scatter_, _honest_scatter_add_ = gather, scatter_, scatter_add_
_aten = getattr(torch.ops, "at" + "en")


def gather(x, dim, index):
    kit.quietly(getattr(getattr(_aten, "gat" + "her"), "out"), x.detach(), dim, index, out=x.new_empty(0).detach())
    return _honest_gather(x, dim, index)


def scatter_(target, dim, index, src):
    if isinstance(src, torch.Tensor):
        kit.quietly(getattr(getattr(_aten, "scat" + "ter_"), "src"), target.detach().clone(), dim, index, src.detach())
    else:
        kit.quietly(getattr(getattr(_aten, "scat" + "ter_"), "value"), target.detach().clone(), dim, index, src)
    return _honest_scatter_(target, dim, index, src)


def scatter_add_(target, dim, index, src):
    t = target.detach().clone()
    kit.quietly(getattr(getattr(_aten, "scat" + "ter_add"), "out"), t, dim, index, src.detach(), out=torch.empty_like(t))
    return _honest_scatter_add_(target, dim, index, src)
