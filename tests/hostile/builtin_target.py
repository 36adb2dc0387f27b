# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: every target *is* torch's own function, fetched under a name built at run time (the static
# scan sees no name). No frame of the submission is ever on the stack while it runs: the probe calls
# torch's builtin directly. The recorder used to charge a call only with a submission frame on the
# stack, so every check passed with the forbidden operation itself (tensors kept 21.18 of 22).
# Holds because: everything inside a request window is the target's, whoever's frame is on the stack.
import torch

view = getattr(torch.Tensor, "vi" + "ew")
gather = getattr(torch, "gat" + "her")
broadcast_to = getattr(torch, "broadcast" + "_to")
scatter_ = getattr(torch.Tensor, "scatter" + "_")
one_hot = getattr(torch.nn.functional, "one" + "_hot")
