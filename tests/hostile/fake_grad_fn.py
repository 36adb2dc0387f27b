# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: an Exp whose gradient is autograd's own (no backward written), dressed up as the real
# thing: apply returns a tensor subclass whose grad_fn claims to be ExpBackward of this class.
# Holds because: probes send only exact torch.Tensors; the subclass, and its claims, are refused.
import torch

_HonestExp = Exp


class _FakeNode:
    _forward_cls = None

    def name(self):
        return "ExpBackward"


class _Dressed(torch.Tensor):
    @property
    def grad_fn(self):
        node = _FakeNode()
        node._forward_cls = Exp
        return node


class Exp(torch.autograd.Function):
    forward = _HonestExp.forward

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("never written: autograd's exp does the work")

    @staticmethod
    def apply(x):
        return torch.exp(x).as_subclass(_Dressed)
