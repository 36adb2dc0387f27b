"""The trust boundary. Only this package touches student code.

Layout, by side of the boundary:

- ``host.py``   trusted: starts sandbox processes, enforces time limits, decodes what comes back.
- ``isolation.py`` trusted: how strongly sandboxes are isolated (bubblewrap, an unprivileged user,
  or limits only), chosen once per process; see SECURITY.md for what each level guarantees.
- ``inbox.py``  trusted: the one folder shared with sandboxes, where a submission is staged.
- ``ipc.py``    both: shared memory, semaphores and message queues a submission leaves, kept from the next.
- ``exits.py``  both: how a worker or a rank ended, in words.
- ``wire.py``   both: the frame format (msgpack, tensors as raw storage bytes, plain types only).
- ``zygote.py`` sandbox: a clean process that imported torch once and forks one worker per student module.
- ``portable.py`` both: the portable backend (level ``process``; macOS, Windows): each worker a fresh
  Python started with ``subprocess``, over pipes, killed with its process tree (psutil).
- ``worker.py`` sandbox: isolates itself, imports the student's module and runs probes on it.
- ``recorder.py``, ``entries.py`` sandbox: what torch ran while the student's code ran, by name.
- ``arrays.py`` sandbox: numpy and other array libraries used where calls are forbidden.
- ``probes.py`` both: the scenarios a check asks for; the same code runs the reference (trusted)
  and the student's code (sandbox), and describes the outcome as plain data.
"""
