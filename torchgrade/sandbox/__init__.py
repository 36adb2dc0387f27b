"""The trust boundary. Only this package touches student code.

It may import ``torchgrade.base`` and nothing else of torchgrade (the engine above sends it requests
and reads back plain data; ``lint-imports`` holds it to that).

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
- ``probes/`` both: the scenarios a check asks for (``core.py`` the registry and ``Target``,
  ``basic.py`` and ``parallel.py`` the built-in ones); the same code runs the reference (trusted) and
  the student's code (sandbox), and describes the outcome as plain data.
- ``failures.py`` trusted: how a sandbox fails to answer (timeout, death, a bad reply, a zygote gone).
- ``originals.py`` sandbox: the profiler's switches as torch made them, kept before any student code.
- ``forbidden.py`` both: forbidden-call patterns, matched at run time by name and in the source statically.
- ``sources.py`` trusted: a submission's files read bounded in size, parsed once per content.
- ``observer.py`` both: the compiled watch (observer.cpp), built by the trusted side, loaded and proven
  in the sandbox.
- ``cppbuild.py`` trusted: compiles the observer and the compiled CUDA stand-in into the user's cache.
- ``cudastandin.py`` (cudastandin.cpp) sandbox: the compiled CUDA stand-in, experimental and off.
- ``warmup.py``, ``provenance.py``, ``linetrace.py``, ``keyrings.py``, ``standin.py``: a sandbox
  process's preparation, where code comes from, line coverage, keyrings, the CUDA stand-in.
"""
