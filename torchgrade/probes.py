"""What a course's own probes import: ``from torchgrade.probes import probe, Target, tensor, ...``.

The name courses use; the module is torchgrade/engine/probes.py.
"""

from torchgrade.engine.probes import (PROBES, ProbeError, Raised, Target, clip, describe, grad_seed, options, probe,
                                      raised, reference_page, tensor)

__all__ = ["PROBES", "ProbeError", "Raised", "Target", "clip", "describe", "grad_seed", "options", "probe", "raised",
           "reference_page", "tensor"]
