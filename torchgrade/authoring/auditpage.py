"""The audit's page (reports/audit/index.html): auditing some targets updates only their part of it.

`torchgrade audit norms` takes seconds where the whole course takes minutes, so an author audits a few
targets at a time. Beside the page, ``audit.json`` keeps each target's section as data (`Audit.as_dict`'s,
with the time and seed it was audited at); a run replaces the sections of the targets it audited and
keeps the others, where the course has the same title and still has that target. The figures at the
top count every target shown; a section kept from an earlier run says when it was audited.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from torchgrade.authoring.audit import Audit, MutantResult, TargetAudit
from torchgrade.authoring.coverage import Coverage
from torchgrade.authoring.mutants import Mutant

#: The data beside the page.
DATA_FILE = "audit.json"
FORMAT = 1


def target_from_dict(data: dict) -> TargetAudit:
    """A target's audit as `TargetAudit.as_dict` gave it (the mutants' sources are not kept: the page shows none)."""
    results = [MutantResult(Mutant(data["target"], m["operator"], m["file"], int(m["line"]), m["before"], m["after"], "",
                                   m["id"]), m["verdict"], list(m["killed_by"]), m["how"], m["reason"], m["mark"],
                            m["evidence"]) for m in data["mutants"]]
    by_id = {r.mutant.id: r for r in results}
    audit = TargetAudit(data["target"], int(data["made"]), results, [])
    audit.unmeasured = list(data["visible_checks_no_mutant_fails"])
    audit.subsumed = [(s["check"], s["covered_by"]) for s in data["visible_checks_adding_nothing"]]
    audit.named_misses = [(n["check"], n["word"], by_id[n["mutant"]])
                          for n in data["visible_checks_passing_what_their_name_names"] if n["mutant"] in by_id]
    audit.coverage = Coverage.from_dict(data["coverage"]) if data.get("coverage") else None
    audit.measures_nothing = list(data.get("checks_that_measure_nothing") or ())
    return audit


def _earlier(path: Path, title: str) -> dict:
    """{target: {"when", "seed", "data"}} of the last page of the same course (none where there is none)."""
    try:
        saved = json.loads((path.parent / DATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("title") != title:
        return {}
    return saved.get("targets") if isinstance(saved.get("targets"), dict) else {}


def write_page(audit: Audit, path: Path) -> None:
    """reports/audit/index.html: the page of `audit` (the report pages' template and style, autoescaped), with the sections of the course's other targets from the page's last run."""
    from torchgrade.outputs.report import _env
    from torchgrade.engine.results import write_atomic

    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    kept = _earlier(path, audit.title)
    sections = {t.qualname: {"when": now, "seed": audit.seed, "data": t.as_dict()} for t in audit.targets}
    order = list(audit.course) or [*kept, *sections]
    merged = {q: sections.get(q) or kept[q] for q in order if q in sections or q in kept}
    earlier: dict[str, str] = {}
    shown = []
    for qualname, section in merged.items():
        if qualname in sections:
            shown.append(next(t for t in audit.targets if t.qualname == qualname))
            continue
        try:
            shown.append(target_from_dict(section["data"]))
        except (KeyError, TypeError, ValueError):  # a file of another version, or edited: that section goes
            merged[qualname] = None
            continue
        earlier[qualname] = f"{section['when']}, seed {section['seed']}"
    merged = {q: s for q, s in merged.items() if s is not None}
    page = dataclasses.replace(audit, targets=shown)
    write_atomic(path, _env.get_template("audit.html").render(audit=page, earlier=earlier))
    write_atomic(path.parent / DATA_FILE, json.dumps({"format": FORMAT, "title": audit.title, "targets": merged},
                                                     ensure_ascii=False))
