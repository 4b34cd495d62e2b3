"""What a managed turn's host is given (its environment) and what its end means (the verdict)."""

from __future__ import annotations

import signal

from floorgate.admission import Automation, Decision, TurnRecord, Verdict

from ..app.owner_gate import CREDENTIAL_ENV
from .hook_wire import RUNTIME_DIR_ENV, runtime_dir
from .turn_wire import TurnCredential

PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")  # of the runner's own; the rest only by env_allow


def host_env(
    automation: Automation,
    record: TurnRecord,
    *,
    runner_env: dict[str, str],
    credential: TurnCredential | None,
    envelope_mode: str,
) -> dict[str, str]:
    """The host's environment: the passed and allowed variables of the runner's, the turn's ids,
    and its credential: the hooks reach the store through the runner's broker, never by its URL."""
    host = automation.spec.host
    allowed = (*PASSED_ENV, *(host.env_allow if host is not None else ()))
    env = {k: runner_env[k] for k in allowed if k in runner_env and k not in CREDENTIAL_ENV}  # an owner's token, never
    env.update(
        FLOORGATE_TURN_ID=record.turn_id,
        FLOORGATE_AUTOMATION=automation.automation_id,
        FLOORGATE_GOAL=automation.spec.goal_id,
        FLOORGATE_AGENT=automation.spec.agent_id,
        FLOORGATE_ATTEMPT=str(record.attempt),
    )
    # Where this user's hook server listens, resolved from the runner's environment (the host's
    # may lack $XDG_RUNTIME_DIR): the host's hooks then ask it instead of starting floorgate.
    env[RUNTIME_DIR_ENV] = str(runtime_dir(runner_env))
    if automation.spec.model is not None:
        env["FLOORGATE_MODEL"] = automation.spec.model
    if credential is not None:
        env.update(credential.env())  # what the hooks the host runs (PreToolUse, UserPromptSubmit) send their requests with
    if record.mission_id is not None:
        env["FLOORGATE_MISSION_ID"] = record.mission_id
        env["FLOORGATE_ENVELOPE_MODE"] = envelope_mode
    return env


def spawn_failed(exc: OSError) -> Verdict:
    """The verdict of a host that could not be started (nothing ran; the start is spent)."""
    reason = {FileNotFoundError: "host_missing", PermissionError: "host_not_executable"}.get(type(exc), "spawn_error")
    return Verdict.infra_failure(reason)


TIMED_OUT = Verdict.timed_out()


def exit_verdict(code: int) -> Verdict:
    """The verdict of a host that ended with ``code`` (negative: killed by that signal)."""
    if code == 0:
        return Verdict.succeeded()
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return Verdict.infra_failure(f"killed_by_{name}", exit_code=code)
    return Verdict.task_failure(f"exit_code_{code}", exit_code=code)


def denied_verdict(decision: Decision) -> Verdict:
    """The verdict of a turn admission denied (nothing ran)."""
    return Verdict.denied(f"admission_{decision.reason.value}")


def settled_unknown() -> Verdict:
    """The verdict of a turn whose host may have run but whose runner is gone."""
    return Verdict.infra_failure("unknown_outcome")
