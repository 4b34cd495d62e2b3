"""Verdicts come from named constructors: each kind of ending fixes status, retryability and category."""

from __future__ import annotations

import pytest

from floorgate.admission import Verdict
from floorgate.admission.journal import FailureCategory, TurnStatus


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        pytest.param(Verdict.succeeded(), ("succeeded", "completed", False, "none", 0, None), id="succeeded"),
        pytest.param(Verdict.infra_failure("host_missing"), ("failed", "host_missing", True, "infra", None, None), id="infra-failure"),
        pytest.param(
            Verdict.infra_failure("killed_by_SIGKILL", exit_code=-9), ("failed", "killed_by_SIGKILL", True, "infra", -9, None), id="killed"
        ),
        pytest.param(
            Verdict.task_failure("exit_code_3", exit_code=3), ("failed", "exit_code_3", False, "task", 3, None), id="task-failure"
        ),
        pytest.param(Verdict.timed_out(), ("timed_out", "deadline_exceeded", False, "task", None, None), id="timed-out"),
        pytest.param(Verdict.denied("overlap"), ("denied", "overlap", False, "policy", None, None), id="denied"),
        pytest.param(
            Verdict.denied("turn_owned", retryable=True), ("denied", "turn_owned", True, "policy", None, None), id="denied-retryable"
        ),
        pytest.param(
            Verdict.denied("admission_state_unavailable", retryable=True, category=FailureCategory.INFRA),
            ("denied", "admission_state_unavailable", True, "infra", None, None),
            id="denied-unreadable",
        ),
        pytest.param(
            Verdict.stuck("compute bound exhausted", "max_turns"),
            ("stuck", "compute bound exhausted", False, "policy", None, "max_turns"),
            id="stuck",
        ),
    ],
)
def test_each_named_verdict(verdict: Verdict, expected: tuple[object, ...]) -> None:
    assert isinstance(verdict.status, TurnStatus) and isinstance(verdict.failure_category, FailureCategory)
    got = (verdict.status.value, verdict.stop_reason, verdict.retryable, verdict.failure_category.value, verdict.exit_code, verdict.bound)
    assert got == expected
