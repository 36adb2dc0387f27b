"""The trust boundary. Only this package touches student code.

Layout, by side of the boundary:

- ``host.py``   trusted: starts sandbox processes, enforces time limits, decodes what comes back.
- ``wire.py``   both: the frame format (``torch.save`` out, a weights-only load in, plain types only).
- ``zygote.py`` sandbox: a clean process that imported torch once and forks one worker per target.
- ``worker.py`` sandbox: imports the student's module and runs probes on it.
- ``probes.py`` both: the scenarios a check asks for; the same code runs the reference (trusted)
  and the student's code (sandbox), and describes the outcome as plain data.
"""
