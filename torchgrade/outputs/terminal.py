"""The terminal summary of `torchgrade check`: a table per exercise, then each failure with its hint and rerun.

Colour comes from ``click.style``; ``click.echo`` drops it where the output is not a terminal.
"""

from __future__ import annotations

import sys

import click

from torchgrade.outputs.feedback import CheckView, ExerciseView, SubmissionView, TargetView
from torchgrade.engine.i18n import t

_STATUS_COLOURS = {"passed": "green", "failed": "red", "error": "yellow", "not_implemented": "red",
                   "skipped": "bright_black"}
#: Lines of one failure message shown in the terminal (the report has them all).
MESSAGE_LINES = 14


def points(value: float) -> str:
    """Points as a student reads them: 2.5, 3, 0.33."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _unicode() -> bool:
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower()
    return encoding.startswith("utf")


def bar(fraction: float, width: int = 10) -> str:
    """A text progress bar: ``███████░░░`` (``#######...`` where the terminal cannot show blocks)."""
    full, empty = ("█", "░") if _unicode() else ("#", ".")
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return full * filled + empty * (width - filled)


def _mark(status: str) -> str:
    ok, bad, skip = ("✓", "✗", "-") if _unicode() else ("+", "x", "-")
    symbol = ok if status == "passed" else skip if status == "skipped" else bad
    return click.style(symbol, fg=_STATUS_COLOURS.get(status, "red"))


def _exercise_line(ex: ExerciseView, width: int) -> str:
    fraction = ex.score / ex.max_score if ex.max_score else 0.0
    colour = "green" if ex.passed else "red" if ex.score == 0 else "yellow"
    score = f"{points(ex.score):>5} / {points(ex.max_score):<5}"
    return (f"{_mark('passed' if ex.passed else 'failed')} " + click.style(f"{ex.file:<{width}}", bold=True)
            + f" {click.style(bar(fraction), fg=colour)} {score} {click.style(ex.title, fg='bright_black')}")


def _target_line(tv: TargetView, width: int) -> str:
    status = tv.status
    text = f"    {_mark(status)} {tv.name:<{width}} {points(tv.score):>5} / {points(tv.max_score):<5}"
    if status == "not_implemented":  # the message says it all ("view is not implemented yet ...")
        text += " " + click.style(tv.failures[0].message.split("\n", 1)[0] or t("status_not_implemented"), fg="red")
    elif status == "failed":
        text += " " + click.style(t("checks_failed", failed=len(tv.failures), total=len(tv.ran)), fg="red")
    elif status == "skipped":
        text += " " + click.style(t("status_skipped"), fg="bright_black")
    return text


def _failure_lines(check: CheckView, verbose: bool) -> list[str]:
    indent = " " * 8
    status = click.style(t(f"status_{check.status}").upper(), fg=_STATUS_COLOURS[check.status], bold=True)
    device = f" [{check.result.device}]" if check.result.device else ""
    lines = [f"      {status} {check.claim}{device}"]
    message = check.message.splitlines()
    limit = len(message) if verbose else MESSAGE_LINES
    lines += [indent + line for line in message[:limit]]
    if len(message) > limit:
        lines.append(indent + click.style(t("more_lines", count=len(message) - limit), fg="bright_black"))
    if check.hint:
        lines.append(indent + click.style(t("hint", text=check.hint), fg="cyan"))
    if check.rerun:
        lines.append(indent + click.style(t("rerun", command=check.rerun), fg="bright_black"))
    return lines


def render(view: SubmissionView, *, verbose: bool = False, totals: bool = True) -> list[str]:
    """The lines `torchgrade check` prints: per exercise a bar, per unfinished target its failures, then
    (with `totals`) the skipped checks and the score."""
    lines: list[str] = []
    width = max((len(e.file) for e in view.exercises), default=8)
    name_width = max((len(tv.name) for e in view.exercises for tv in e.targets), default=8)
    for ex in view.exercises:
        lines.append(_exercise_line(ex, width))
        if ex.missing:  # one line for a module the submission lacks, not a failure per check
            lines.append("    " + click.style(ex.missing, fg="red"))
            continue
        if ex.passed:
            continue
        for tv in ex.targets:
            lines.append(_target_line(tv, name_width))
            if tv.status != "failed":
                continue
            failures = [c for c in tv.failures if not c.not_implemented]
            shown = failures if verbose else failures[:1]
            for check in shown:
                lines += _failure_lines(check, verbose)
            if len(failures) > len(shown):
                lines.append(" " * 8 + click.style(
                    t("more_failures", count=len(failures) - len(shown), target=tv.qualname), fg="bright_black"))
    if not totals:
        return lines
    lines.append("")
    for reason, count in view.skipped:
        lines.append(click.style(t("skipped_because", count=count, reason=reason), fg="bright_black"))
    grade = view.grade
    score = click.style(f"{points(grade.score)} / {points(grade.max_score)}", bold=True)
    devices = ", ".join(grade.devices) or t("no_device")
    lines.append(t("score_line", score=score, percent=f"{view.percent:.0f}", graded_on=t("graded_on", devices=devices)))
    if grade.standin:  # which device facts are a GPU's and which the CUDA stand-in's
        lines.append(click.style(t("standin_graded", policy=grade.standin), fg="bright_black"))
    return lines


def echo(view: SubmissionView, *, verbose: bool = False) -> None:
    """Print the summary (colour only where the output is a terminal that supports it)."""
    for line in render(view, verbose=verbose):
        click.echo(line.rstrip())
