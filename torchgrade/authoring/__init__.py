"""Authoring: what a course author runs to make and prove a course.

- ``scaffold.py``  `torchgrade init`: a working course to start from.
- ``stubs.py``  exercises/ from the reference's solution markers; ``notebooks.py`` the student notebooks.
- ``bundle.py``  the students' bundle: stubs, visible checks, the reference's recorded outcomes.
- ``audit.py``, ``mutants.py``, ``coverage.py``, ``verification.py``, ``auditpage.py``  how strong the
  checks are: mutants of the reference they miss, the lines they never run, equivalence marks verified,
  the audit's page.

It may import class grading (the audit grades its mutants as a class), outputs, the engine, the sandbox
and base; only the command line is above it.
"""
