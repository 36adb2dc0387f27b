"""Outputs: what a grade becomes for the people and systems that read it.

- ``feedback.py``  a grade in words (per target, per check, with hints); ``terminal.py`` those words
  in a terminal.
- ``report.py``, ``overview.py``  the HTML report per submission and the class overview (jinja2, autoescaped).
- ``exports.py``  grades.csv, JUnit XML, and reading results.json back.
- ``lms.py``  Canvas and Moodle gradebooks, matched to a roster.
- ``gradescope.py``  the Gradescope autograder's zip (what runs in it is torchgrade/classroom/autograder.py).

It may import the engine, the sandbox and base; not class grading, authoring or the command line.
"""
