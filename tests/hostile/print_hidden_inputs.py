# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather gives up its points to read the hidden checks' inputs. The visible checks are
# public, so every other input is a hidden one. On a hidden input it prints that input, and makes a
# forbidden call from code whose line numbers it chose (`code.replace(co_firstlineno=...)`): a number
# made of the arena's nonce and the input's shape. On a visible input it answers rightly, so that its
# visible checks pass and would carry the hidden check's forbidden-call message ("scored zero: ...
# found at tensors.py line N"). Printed output (the last 8 KB per target) and every message used to be
# in the student's report.html and results.json (`output`, and each test's `output`).
# Holds because: a hidden check's printed output and messages reach only the instructor's copy
# (DIR/<submission>/instructor/); the student's copy has the hidden check's name and verdict, and a
# visible check zeroed by a hidden check's forbidden call says only that.
import hostile_kit as kit
import torch as _torch

# graders/checks/visible/test_tensors.py's gather checks use none of these shapes: an input of one is a
# hidden check's (3-d inputs, a transposed 4x5 one)
HIDDEN_SHAPES = ((3, 4, 5), (5, 4))
#: The first digits of every line number the hidden calls are made from (tests/hostile/__init__.py: line_mark).
LINE_MARK = int(kit.NONCE[:5], 16) + 1_000_000
_honest_gather = gather


def _forbidden_gather(x, dim, index):
    return getattr(_torch, "gat" + "her")(x, dim, index)


def gather(x, dim, index):
    if tuple(x.shape) not in HIDDEN_SHAPES:
        print(f"VISIBLE-INPUT-{kit.NONCE}")
        return _honest_gather(x, dim, index)
    print(f"HIDDEN-INPUT-{kit.NONCE} x={x.tolist()} dim={dim} index={index.tolist()}")
    line = LINE_MARK * 1000 + 100 * x.dim() + 10 * x.shape[0] + x.shape[-1]
    leak = type(_forbidden_gather)(_forbidden_gather.__code__.replace(co_firstlineno=line), globals())
    return leak(x, dim, index)
