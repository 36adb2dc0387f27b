# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather gives up its points to read the hidden checks' inputs. The visible checks are
# public, so every other input is a hidden one: it prints those, and raises with them in the
# message. Printed output (the last 8 KB per target) and every message used to be in the student's
# report.html and results.json (`output`, and each test's `output`).
# Holds because: a hidden check's printed output and messages reach only the instructor's copy
# (DIR/<submission>/instructor/); the student's copy has the hidden check's name and verdict.
import hostile_kit as kit

# graders/checks/visible/test_tensors.py's gather checks use none of these shapes: an input of one is a
# hidden check's (3-d inputs, a transposed 4x5 one)
HIDDEN_SHAPES = ((3, 4, 5), (5, 4))


def gather(x, dim, index):
    if tuple(x.shape) not in HIDDEN_SHAPES:
        print(f"VISIBLE-INPUT-{kit.NONCE}")
        raise ValueError(f"VISIBLE-INPUT-{kit.NONCE}")
    print(f"HIDDEN-INPUT-{kit.NONCE} x={x.tolist()} dim={dim} index={index.tolist()}")
    raise ValueError(f"HIDDEN-INPUT-{kit.NONCE} x={x.tolist()} dim={dim} index={index.tolist()}")
