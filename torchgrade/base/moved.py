"""The modules' names before the package was built in wings, and where each is now.

Courses import some of them (``torchgrade.differential.CheckFailed``, ``torchgrade.i18n.t`` in check
files; scripts ``torchgrade.batch.grade_class``): ``torchgrade/__init__.py`` makes each old name the
module it became, so those imports keep working. torchgrade's own code uses the new names only
(tests/test_layers.py): an old name is invisible to the import contracts.
"""

from __future__ import annotations

#: The old name (under ``torchgrade.``) -> the module now (under ``torchgrade.``).
MOVED = {
    "printable": "base.printable", "sources": "sandbox.sources", "forbidden": "sandbox.forbidden",
    "config": "engine.config", "hints": "engine.hints", "compare": "engine.compare", "bounds": "engine.bounds",
    "i18n": "engine.i18n", "scoring": "engine.scoring", "results": "engine.results",
    "grader_errors": "engine.grader_errors", "differential": "engine.differential", "session": "engine.session",
    "grading": "engine.grading", "course": "engine.course", "refcache": "engine.refcache",
    "submission_limits": "engine.submission_limits", "watch": "engine.watch",
    "report": "outputs.report", "feedback": "outputs.feedback", "terminal": "outputs.terminal",
    "overview": "outputs.overview", "exports": "outputs.exports", "lms": "outputs.lms", "gradescope": "outputs.gradescope",
    "submissions": "classroom.submissions", "batch": "classroom.batch", "shards": "classroom.shards",
    "executors": "classroom.executors", "executors.local": "classroom.executors.local",
    "executors.dask": "classroom.executors.dask", "ledger": "classroom.ledger", "overrides": "classroom.overrides",
    "similarity": "classroom.similarity", "progress": "classroom.progress", "coursepack": "classroom.coursepack",
    "scaffold": "authoring.scaffold", "bundle": "authoring.bundle", "audit": "authoring.audit",
    "auditpage": "authoring.auditpage", "mutants": "authoring.mutants", "coverage": "authoring.coverage",
    "verification": "authoring.verification",
}
