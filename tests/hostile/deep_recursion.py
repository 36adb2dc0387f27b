# Attack: lift the recursion limit and recurse through C (repr of itself) until the stack runs out.
# Holds because: the worker dies of SIGSEGV (or hits the time limit) alone.
import sys

sys.setrecursionlimit(10**8)


class _Deep:
    def __repr__(self):
        return repr(self)


def gather(x, dim, index):
    return repr(_Deep())
