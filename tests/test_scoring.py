"""Scoring: a target's points split over its checks that ran; skipped checks set aside; forbidden zeroes all."""

import pytest

from torchgrade.engine.scoring import CheckResult, assign_points


def result(target, status, device="cpu", forbidden=False):
    return CheckResult(nodeid=f"{target}-{status}-{device}", name=target, exercise="tensors", target=target,
                       device=device, visibility="visible", status=status, forbidden=forbidden)


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


def test_errors_score_zero_but_keep_their_share_of_the_maximum(assignment):
    checks = [result("broadcast_shape", "error"), result("broadcast_shape", "passed")]
    assign_points(checks, assignment)
    assert sum(c.max_score for c in checks) == pytest.approx(2.0)
    assert sum(c.score for c in checks) == pytest.approx(1.0)
