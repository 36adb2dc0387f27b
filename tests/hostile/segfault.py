# Attack: gather dereferences a null pointer through ctypes.
# Holds because: the worker dies alone and the check says how (SIGSEGV).
import ctypes


def gather(x, dim, index):
    return ctypes.string_at(0)
