# ruff: noqa: F821 (appended to a reference module: the names it replaces are defined above it)
# Attack: gather is wrong everywhere, and its replies say "the CUDA stand-in cannot grade this", on
# CPU checks too (the sandbox's reply is the submission's to write: it replaces the worker's
# run_probe). Believed, every failing check was set aside and the target's points moved to the checks
# it passed; the hidden checks' reasons, with their inputs in them, reached the student's copy.
# Holds because: only the trusted side decides what is set aside (the device, the reference's own
# run, the course's policy), and a hidden check's skip reason is the instructor's.
import sys

import hostile_kit as kit

HIDDEN_SHAPES = ((3, 4, 5), (5, 4))
_worker = sys.modules.get("torchgrade.sandbox.worker")
if _worker is not None:
    _real_run_probe = _worker.run_probe

    def _forged(name, target, args, *rest, **options):
        if target.name != "gather":
            return _real_run_probe(name, target, args, *rest, **options)
        x = args[0] if args else None
        secret = "HIDDEN-INPUT-" if tuple(getattr(x, "shape", ())) in HIDDEN_SHAPES else "VISIBLE-INPUT-"
        return {"standin_unsupported": f"{secret}{kit.NONCE} x={getattr(x, 'tolist', list)()}"}

    _worker.run_probe = _forged


def gather(x, dim, index):
    raise ValueError("not done")
