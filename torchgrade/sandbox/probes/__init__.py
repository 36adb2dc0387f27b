"""Probes: the scenarios a check asks for, run once on the reference and once on the student's code.

A probe receives the object under test wrapped in a ``Target`` (calling it runs that code under the
forbidden-call watch), the positional and keyword arguments the check sent, and options of its own.
It returns plain data (``describe``) that the trusted side compares. The same probe code runs the
reference in the trusted process and the student's code in the sandbox, so both are measured alike.

Probes are public: students may read them. They hold no expected values and no hidden inputs.
The built-in probes are basic.py and parallel.py (imported here, so registered
with the package); a course adds its own in its probes folder
(``probes:`` in assignment.yaml), loaded by ``load_course`` on both sides of the boundary as the
package ``course_probes``. Each registers its probes with ``@probe``.
"""

from __future__ import annotations

import contextlib

from torchgrade.sandbox.probes.core import (_HARNESS_DIRS, COURSE_PACKAGE, NO_STANDIN, PROBES, ProbeError, ProbeLoadError,
                                           Raised, Target, describe, load_course, own_frames, probe, raised,
                                           run_probe, tensor)
from torchgrade.sandbox.probes import basic  # noqa: F401  (registers the basic probes)

with contextlib.suppress(ModuleNotFoundError):  # (a torch without torch.distributed: no data-parallel probes)
    from torchgrade.sandbox.probes import parallel  # noqa: F401

__all__ = ["COURSE_PACKAGE", "NO_STANDIN", "PROBES", "ProbeError", "ProbeLoadError", "Raised", "Target", "describe",
           "load_course", "own_frames", "probe", "raised", "run_probe", "tensor", "_HARNESS_DIRS"]
