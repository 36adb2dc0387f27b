# Attack: while gather runs, replace the worker's encoder so that the reply is a pickle whose
# unpickling makes a folder on the grader's side (any code would do), as torch.save would write it.
# Holds because: the trusted side loads replies with msgpack, which runs no code and knows no
# class (a pickle is not even msgpack), and checks that what it built is plain data.
import os

import hostile_kit as kit
import torch

import torchgrade.sandbox.wire as _wire


class _Payload:
    def __reduce__(self):
        return (os.mkdir, (kit.CONFIG["canary"],))


def _evil_encode(obj):
    import io

    buffer = io.BytesIO()
    torch.save({"value": _Payload()}, buffer)
    return buffer.getvalue()


def gather(x, dim, index):
    _wire.encode = _evil_encode
    return x
