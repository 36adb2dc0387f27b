"""Scoring: a target's points split over its checks that ran; skipped checks set aside; forbidden zeroes all."""

import pytest

from torchgrade.engine.scoring import CheckResult, assign_points


def result(target, status, device="cpu", forbidden=False, visibility="visible"):
    return CheckResult(nodeid=f"{target}-{status}-{device}", name=target, exercise="tensors", target=target,
                       device=device, visibility=visibility, status=status, forbidden=forbidden)


def test_points_are_split_over_the_checks_that_ran(assignment):
    checks = [result("view", "passed"), result("view", "failed"), result("view", "skipped", "cuda")]
    assign_points(checks, assignment)
    assert [c.max_score for c in checks] == [2.0, 2.0, 0.0]
    assert [c.score for c in checks] == [2.0, 0.0, 0.0]


def test_a_forbidden_call_in_one_check_zeroes_the_whole_target(assignment):
    checks = [result("gather", "passed"), result("gather", "failed", forbidden=True), result("one_hot", "passed")]
    checks[1].output = "forbidden call: gather may not use `gather`, found at tensors.py line 3"
    assign_points(checks, assignment)
    assert [c.score for c in checks] == [0.0, 0.0, 3.0]
    assert checks[0].status == "failed"
    assert checks[0].output.startswith("scored zero: forbidden call")


def test_a_visible_check_zeroed_by_a_hidden_checks_forbidden_call_carries_nothing_of_its_message(assignment):
    """The hidden check's message names lines of the student's choosing (code.replace(co_firstlineno=...)):
    it may hold the hidden inputs, so a visible check says only where its zero comes from, unless a visible
    check found a forbidden call too (then that one's message, whatever the order)."""
    hidden = result("gather", "failed", forbidden=True, visibility="hidden")
    hidden.output = "forbidden call: gather may not use `gather`, found at tensors.py line 1345435"
    checks = [hidden, result("gather", "passed")]
    assign_points(checks, assignment)
    assert checks[1].status == "failed" and "1345435" not in checks[1].output
    assert checks[1].output == "scored zero: a hidden check of this target found a forbidden call (its message is " \
                               "in the instructor's copy)"
    seen = result("gather", "failed", forbidden=True)
    seen.output = "forbidden call: gather may not use `gather`, found at tensors.py line 3"
    checks = [hidden, seen, result("gather", "passed")]
    assign_points(checks, assignment)
    assert checks[2].output == "scored zero: " + seen.output


def test_errors_score_zero_but_keep_their_share_of_the_maximum(assignment):
    checks = [result("broadcast_shape", "error"), result("broadcast_shape", "passed")]
    assign_points(checks, assignment)
    assert sum(c.max_score for c in checks) == pytest.approx(2.0)
    assert sum(c.score for c in checks) == pytest.approx(1.0)
