"""Class grading: a class folder graded submission by submission, resumably, anywhere, and the
instructor's decisions on it.

- ``submissions.py``  what a class folder (or an LMS download) holds: one submission per student, staged.
- ``batch.py``  a class graded, each result written as it completes; ``shards.py`` a class in parts, merged.
- ``executors/``  where submissions are graded: this process, a local pool, a Dask cluster
  (``coursepack.py`` ships the course to a cluster's workers).
- ``ledger.py``  what was graded from which content by which grader: what a re-run skips.
- ``overrides.py``  the instructor's decisions, applied on every regrade; ``gradebook.py`` the grades
  of a class folder with them, as exports read them.
- ``similarity.py``  pairs of students with the same code, per target.
- ``progress.py``  the run's progress line.
- ``autograder.py``  one submission graded on Gradescope (`torchgrade autograde`).

It may import outputs, the engine, the sandbox and base; not authoring or the command line.
"""
