"""The check engine: one submission's checks collected, run, compared and scored in the trusted process.

- ``config.py``, ``submission_limits.py``, ``hints.py``, ``course.py``  the assignment and the course as
  files say them, validated.
- ``notebooks.py``  a handed-in ``.ipynb`` read as the module it stands for; messages mapped back to cells.
- ``plugin.py``, ``session.py``, ``grading.py``  checks as pytest tests: torchgrade's plugin, a session
  collected once per process, one submission graded.
- ``differential.py``  a check's two runs, the reference here and the student's code in the sandbox;
  ``compare.py`` and ``bounds.py`` what differs, said within bounded cost; ``grader_errors.py`` a
  failure claimed by the sandbox, confirmed before a student is blamed.
- ``scoring.py``, ``results.py``  points, and results.json (Gradescope's format).
- ``refcache.py``, ``fingerprint.py``  the reference's outcomes kept between runs, under the key of
  everything that decides them.
- ``probes.py``  what a course's probes import (``torchgrade.probes``), and their reference page.
- ``watch.py``  `check --watch`: a module graded again on each save.
- ``i18n.py``  every sentence a student reads, in English and Chinese.

It may import ``torchgrade.sandbox`` and ``torchgrade.base``; nothing above it (outputs, class grading,
authoring, the command line).
"""
