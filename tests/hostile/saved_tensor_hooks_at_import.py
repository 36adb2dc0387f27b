# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: saved-tensor hooks built of C builtins, pushed when the module is imported (before any request, where
# no push is checked) and left in force for every request of the module. These two are harmless; a pack that
# applied a forbidden operator (saved_tensor_hooks.py) would run unseen in every check.
# Holds because: when a request is armed, the saved-tensor hooks in force are checked; one that runs no Python
# code is a refused entry, so every watched target of the module loses.
import torch

torch.autograd.graph.saved_tensors_hooks(torch.Tensor.detach, torch.Tensor.clone).__enter__()
