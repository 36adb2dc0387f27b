# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: make the submission's own failures look like the grader's, to get "grader error (not your
# fault)" rows and an exit 2 instead of a zero: view raises the very TypeError torch 2.4 gave the call
# watch (its checks that expect a TypeError pass, rightly); gather's replies are forged as the worker's
# "grader_fault" kind; one_hot's watch is really broken from the student's process (its arming raises
# that TypeError); scatter_'s replies claim the sandbox could not take the inputs.
# Holds because: an exception raised in the student's code is a result like any other, and a claim of the
# grader's failure counts only where a run of a module of the grader's own, without this code, meets it too.
import sys

_TORCH_24 = ("__init__(): incompatible constructor arguments. The following argument types are supported:\n"
             "    1. torch._C._profiler._ExperimentalConfig(profiler_metrics: list[str] = [], ...)\n"
             "Invoked with: kwargs: profile_all_threads=True")


def view(x, *shape):
    raise TypeError(_TORCH_24)


def _forge():
    worker = sys.modules.get("torchgrade.sandbox.worker")
    if worker is None:  # graded without a sandbox worker: nothing to forge
        return
    wire, honest = sys.modules["torchgrade.sandbox.wire"], worker.Session.handle

    def broken(*args, **kwargs):
        raise TypeError(_TORCH_24)

    def handle(self, request):
        target = request.get("target")
        if target == "gather":
            return wire.encode({"grader_fault": {"stage": "watch", "error": "TypeError: " + _TORCH_24}})
        if target == "scatter_":
            return wire.encode({"sandbox_error": "RuntimeError: Found no NVIDIA driver on your system"})
        if target == "one_hot":
            self.dispatch.armed = broken
            try:
                return honest(self, request)
            finally:
                del self.dispatch.armed
        return honest(self, request)

    worker.Session.handle = handle


_forge()
