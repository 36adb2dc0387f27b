# Attack: os._exit(0) inside gather: no exception, no traceback, exit status 0.
# Holds because: a worker that ends without answering fails its check, and only that one.
import os


def gather(x, dim, index):
    os._exit(0)
