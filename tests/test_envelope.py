"""Compute envelopes: validation, inheritance, every seam's refusal, approvals, accounting, meters."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from basics import T0, raw_sql

from floorgate.admission import (
    Accounting,
    ApprovalRejected,
    Approvals,
    AutomationSpec,
    Automations,
    ComputeBlock,
    FixedClock,
    InvalidInput,
    Missions,
    NotFound,
    Policies,
    ReductionNotAuthorized,
    Scope,
    StoreUnavailable,
    merge,
    open_store,
    parse_compute,
)
from floorgate.hosts import Schedule
from floorgate.scheduler.app.envelope_gate import EnvelopeGate
from floorgate.scheduler.app.meters import claude_stream_json, codex_json, floorgate_jsonl
from floorgate.scheduler.runtime.executor import TurnExecutor

from helpers import command

TRANSCRIPTS = Path(__file__).parent / "transcripts"


# -- validation -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, field",
    [
        pytest.param('{"max_turn": 40}', "max_turn", id="typo-is-not-unbounded"),
        pytest.param('{"max_turns": true}', "max_turns", id="boolean"),
        pytest.param('{"max_turns": 40.0}', "max_turns", id="float"),
        pytest.param('{"max_turns": NaN}', "max_turns", id="nan"),
        pytest.param('{"max_turns": "40"}', "max_turns", id="string"),
        pytest.param('{"max_turns": -1}', "max_turns", id="negative"),
        pytest.param('{"max_tokens": 20000000000}', "max_tokens", id="extra-digit-over-cap"),
        pytest.param('{"on_exhausted": "retry"}', "on_exhausted", id="unknown-exhaustion"),
        pytest.param('{"model_allowlist": []}', "model_allowlist", id="empty-allowlist"),
        pytest.param('{"model_allowlist": [""]}', "model_allowlist", id="blank-model"),
        pytest.param("[40]", "--compute", id="not-an-object"),
        pytest.param("{max_turns: 40}", "--compute", id="not-json"),
    ],
)
def test_invalid_blocks_are_rejected_naming_the_key(text: str, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_compute(text)
    assert field in err.value.field


def test_zero_and_absent_mean_unbounded_and_explicit_defaults_survive() -> None:
    block = parse_compute('{"max_turns": 0, "on_exhausted": "finish_stuck"}')
    assert block.doc() == {"max_turns": 0, "on_exhausted": "finish_stuck"}
    envelope = merge([("g", parse_compute('{"max_turns": 40, "on_exhausted": "pause_ask"}')), ("g/a/x", block)])
    assert envelope.max_turns == 40  # an explicit 0 below cannot loosen the parent
    assert envelope.on_exhausted == "finish_stuck"  # the explicit default survives merging


def test_narrower_scopes_only_tighten() -> None:
    envelope = merge(
        [
            ("g", parse_compute('{"max_turns": 40, "max_tokens": 1000, "model_allowlist": ["a", "b"]}')),
            ("g/a", parse_compute('{"max_turns": 60, "max_tool_calls": 9}')),
            ("g/a/x", parse_compute('{"max_tokens": 500, "model_allowlist": ["b", "c"]}')),
        ]
    )
    assert (envelope.max_turns, envelope.max_tool_calls, envelope.max_tokens, envelope.model_allowlist) == (40, 9, 500, ("b",))


def test_loosening_a_bound_needs_reduction_authorization(policies: Policies) -> None:
    scope = Scope.agent("g", "a")
    policies.configure(scope, compute=parse_compute('{"max_turns": 40}'), expected_revision=0, owner_ref="o")
    policies.configure(scope, compute=parse_compute('{"max_turns": 20}'), expected_revision=1, owner_ref="o")  # tighter: fine
    for looser in ('{"max_turns": 30}', "{}", '{"max_turns": 20, "on_exhausted": "pause_ask"}'):
        with pytest.raises(ReductionNotAuthorized):
            policies.configure(scope, compute=parse_compute(looser), expected_revision=2, owner_ref="o")
    rule = policies.configure(scope, compute=parse_compute('{"max_turns": 30}'), expected_revision=2, owner_ref="o", allow_reduction=True)
    explicit = Scope.automation("g", "a", "x")
    policies.configure(explicit, compute=parse_compute('{"on_exhausted": "finish_stuck"}'), expected_revision=0, owner_ref="o")
    with pytest.raises(ReductionNotAuthorized):  # giving up an explicit finish_stuck loosens what merges above it
        policies.configure(explicit, compute=parse_compute('{"max_turns": 5}'), expected_revision=1, owner_ref="o")
    assert rule.compute.max_turns == 30 and rule.min_interval == timedelta(0)
    change = policies.history(scope)[1]
    assert change.compute_before == {"max_turns": 20} and change.compute_after == {"max_turns": 30} and change.reduction_authorized


# -- seams -----------------------------------------------------------------------------------------
def automation(store, clock, script="pass", *, model=None, backend=None, meter="none", timeout=30.0):  # type: ignore[no-untyped-def]
    spec = AutomationSpec(
        goal_id="g",
        agent_id="a",
        schedule=Schedule.parse("DTSTART:20261201T090000Z RRULE:FREQ=DAILY").canonical(),
        host=command(script, timeout),
        model=model,
        backend=backend,
        meter=meter,
    )
    return Automations(store, clock).add("x", spec)


def envelope(store, clock, text: str, path: str = "g/a") -> None:  # type: ignore[no-untyped-def]
    Policies(store, clock).configure(Scope.parse(path), compute=parse_compute(text), expected_revision=0, owner_ref="o")


def run(store, clock, tmp_path, auto, mode="enforce", **kw):  # type: ignore[no-untyped-def]
    return TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode=mode).run(auto, **kw)


def test_max_turns_refuses_at_turn_start_and_the_last_allowed_turn_succeeds(store, tmp_path) -> None:
    clock = FixedClock(T0)
    marks = tmp_path / "marks"
    envelope(store, clock, '{"max_turns": 2}')
    failing = automation(store, clock, f"open({str(marks)!r}, 'a').write('x'); import sys; sys.exit(1)")
    assert run(store, clock, tmp_path, failing).verdict.status == "failed"
    spec = failing.spec.model_copy(update={"host": command(f"open({str(marks)!r}, 'a').write('x')")})
    fixed = Automations(store, clock).edit("x", spec)
    last = run(store, clock, tmp_path, fixed)  # turn 2 of 2 finishes the mission: a success
    assert last.verdict.status == "succeeded"
    mission = Missions(store, clock).recent("x", 1)[0]
    assert mission.status == "succeeded" and mission.turns == 2
    assert marks.read_text() == "xx"


def test_exhausted_mission_settles_stuck_naming_the_bound_and_survives_restart(db_url: str, tmp_path) -> None:
    clock = FixedClock(T0)
    with open_store(db_url) as store:
        envelope(store, clock, '{"max_turns": 2}')
        Policies(store, clock).configure(Scope.parse("g/a/x"), min_interval=timedelta(minutes=1), expected_revision=0, owner_ref="o")
        auto = automation(store, clock, "import sys; sys.exit(1)")
        run(store, clock, tmp_path, auto)
    clock.advance(timedelta(minutes=2))
    with open_store(db_url) as store:  # a restart: the counter is durable
        auto = Automations(store, clock).get("x")
        assert run(store, clock, tmp_path, auto).verdict.status == "failed"
    clock.advance(timedelta(minutes=7))  # past the wait two consecutive failures bring (2 x 3 min)
    with open_store(db_url) as store:
        auto = Automations(store, clock).get("x")
        stuck = run(store, clock, tmp_path, auto)
        assert stuck.verdict.status == "stuck" and stuck.verdict.stop_reason == "compute bound exhausted: max_turns=2"
        assert stuck.verdict.bound == "max_turns"  # the bound is a field, not a prefix of the reason
        assert stuck.record is None  # nothing launched
        mission = Missions(store, clock).recent("x", 1)[0]
        assert mission.status == "stuck" and mission.stop_reason == "compute bound exhausted: max_turns=2"
        from floorgate.admission import Admission

        assert len(Admission(store, clock).starts()) == 2  # refused before admission: no floor slot spent


def test_max_wall_seconds_kills_at_the_mission_deadline(store, tmp_path) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_wall_seconds": 1}')
    auto = automation(store, clock, "import time; time.sleep(30)", timeout=60)
    outcome = run(store, clock, tmp_path, auto)
    assert outcome.verdict.status == "stuck" and "max_wall_seconds=1" in outcome.verdict.stop_reason
    assert Missions(store, clock).recent("x", 1)[0].status == "stuck"
    from floorgate.admission import Journal

    stored = Journal(store, clock).get(outcome.turn_id)
    assert stored is not None and stored.verdict is not None and stored.verdict.bound == "max_wall_seconds"  # in its column


def test_max_tokens_counts_reported_usage_and_is_inert_without_reports(store, tmp_path) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_tokens": 1000}')
    silent = automation(store, clock, "import sys; sys.exit(1)")
    for _ in range(3):
        clock.advance(timedelta(hours=1))  # past the wait consecutive failures bring
        assert run(store, clock, tmp_path, silent).verdict.status == "failed"  # no usage: never counted as zero
    mission = Missions(store, clock).current("x")
    assert not mission.usage_known and mission.tokens == 0
    gate = EnvelopeGate(store, clock=clock)
    from floorgate.scheduler.views.present import mission_doc

    assert mission_doc(mission, gate.envelope("g", "a", "x")[0])["left"]["tokens_note"].startswith("max_tokens is inert")
    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "input_tokens": 900, "output_tokens": 200, "model": "m"})
    spec = silent.spec.model_copy(update={"host": command(f"print({line!r}); import sys; sys.exit(1)"), "meter": "jsonl"})
    metered = Automations(store, clock).edit("x", spec)
    clock.advance(timedelta(hours=1))
    assert run(store, clock, tmp_path, metered).verdict.status == "failed"
    assert Missions(store, clock).current("x").tokens == 1100
    clock.advance(timedelta(hours=1))
    refused = run(store, clock, tmp_path, metered)
    assert refused.verdict.status == "stuck" and refused.verdict.stop_reason == "compute bound exhausted: max_tokens=1000"


@pytest.mark.parametrize(
    "model, backend, block, needle",
    [
        pytest.param("gpt-x", None, '{"model_allowlist": ["claude-sonnet-4-5"]}', "model gpt-x", id="model"),
        pytest.param(None, None, '{"model_allowlist": ["claude-sonnet-4-5"]}', "(none configured)", id="unknown-model"),
        pytest.param("m", "openai", '{"backend_allowlist": ["anthropic"]}', "backend openai", id="backend"),
    ],
)
def test_allowlists_stop_the_mission_at_launch(store, tmp_path, model, backend, block, needle) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, block)
    outcome = run(store, clock, tmp_path, automation(store, clock, model=model, backend=backend))
    assert outcome.verdict.status == "stuck" and needle in outcome.verdict.stop_reason and outcome.record is None


def test_reported_model_outside_the_allowlist_stops_the_mission(store, tmp_path) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, '{"model_allowlist": ["small"]}')
    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "total_tokens": 10, "model": "huge"})
    auto = automation(store, clock, f"print({line!r})", model="small", meter="jsonl")
    turn = run(store, clock, tmp_path, auto)
    mission = Missions(store, clock).recent("x", 1)[0]
    assert mission.status == "stuck" and "huge" in mission.stop_reason
    # The turn that reported it is stuck too, and the automation is held at once.
    assert turn.verdict.status == "stuck" and turn.verdict.bound == "model_allowlist" and "huge" in turn.verdict.stop_reason
    held = Automations(store, clock).get("x")
    assert held.state == "held" and held.hold_kind == "mission_stuck"


def test_malformed_block_fails_closed_in_enforce_and_runs_unbounded_in_observe(store, tmp_path) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_turns": 1}')
    raw_sql(store, 'UPDATE fg_rules SET compute_json = \'{"max_turns": "lots"}\'')
    auto = automation(store, clock)
    closed = run(store, clock, tmp_path, auto)
    assert closed.verdict.status == "stuck" and "malformed" in closed.verdict.stop_reason
    with pytest.raises(ReductionNotAuthorized):  # an unreadable block cannot be quietly replaced by a looser one
        Policies(store, clock).configure(Scope.parse("g/a"), compute=ComputeBlock(), expected_revision=1, owner_ref="o")
    for _ in range(2):  # observe: no phantom ceiling, and the problem is on the record
        assert run(store, clock, tmp_path, auto, mode="observe").verdict.status == "succeeded"
    assert "malformed" in Missions(store, clock).recent("x", 1)[0].problems


def test_observe_records_but_never_blocks(store, tmp_path) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_turns": 1}')
    auto = automation(store, clock, "import sys; sys.exit(1)")
    for _ in range(3):
        clock.advance(timedelta(hours=1))  # past the wait consecutive failures bring
        assert run(store, clock, tmp_path, auto, mode="observe").verdict.status == "failed"
    mission = Missions(store, clock).current("x")
    assert mission.turns == 3 and "max_turns" in mission.problems


def test_disabled_keeps_no_envelope_state(store, tmp_path) -> None:
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_turns": 1}')
    auto = automation(store, clock)
    for _ in range(2):
        assert run(store, clock, tmp_path, auto, mode="disabled").verdict.status == "succeeded"
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_missions") == [(0,)]


# -- approvals ------------------------------------------------------------------------------------
def paused_mission(store, clock, tmp_path):  # type: ignore[no-untyped-def]
    envelope(store, clock, '{"max_turns": 1, "on_exhausted": "pause_ask"}')
    auto = automation(store, clock, "import sys; sys.exit(1)")
    run(store, clock, tmp_path, auto)
    asked = run(store, clock, tmp_path, auto)
    assert asked.verdict.status == "stuck" and "owner ask auth-" in asked.verdict.stop_reason
    (ask,) = Approvals(store, clock).pending()
    return auto, ask


def test_pause_ask_approval_extends_by_the_stored_proposal_once(store, tmp_path) -> None:
    clock = FixedClock(T0)
    auto, ask = paused_mission(store, clock, tmp_path)
    assert Missions(store, clock).get(ask.mission_id).status == "awaiting_owner"
    waiting = run(store, clock, tmp_path, auto).verdict  # waits for the owner, and says how to answer
    assert waiting.status == "stuck" and f"approve {ask.approval_id}" in waiting.stop_reason
    decided = Approvals(store, clock).decide(ask.approval_id, True, scope_now="g/a/x")
    assert decided.state == "approved" and decided.proposal == {"max_turns": 1}
    mission = Missions(store, clock).get(ask.mission_id)
    assert mission.status == "open" and mission.extra_turns == 1
    with pytest.raises(ApprovalRejected, match="single-use"):
        Approvals(store, clock).decide(ask.approval_id, True, scope_now="g/a/x")
    assert run(store, clock, tmp_path, auto).verdict.status == "failed"  # the one extra turn ran


def test_expired_superseded_mismatched_and_unknown_ids_are_rejected(store, tmp_path) -> None:
    clock = FixedClock(T0)
    _auto, ask = paused_mission(store, clock, tmp_path)
    approvals = Approvals(store, clock)
    with pytest.raises(ApprovalRejected, match="does not match"):
        approvals.decide(ask.approval_id, True, scope_now="g/a/elsewhere")
    newer = approvals.ask(ask.mission_id, "g/a/x", "max_turns", 1)
    with pytest.raises(ApprovalRejected, match="superseded"):
        approvals.decide(ask.approval_id, True, scope_now="g/a/x")
    clock.advance(timedelta(days=2))
    with pytest.raises(ApprovalRejected, match="expired"):
        approvals.decide(newer.approval_id, True, scope_now="g/a/x")
    with pytest.raises(ApprovalRejected, match="unknown"):
        approvals.decide("auth-nope", True)
    assert Missions(store, clock).get(ask.mission_id).status == "awaiting_owner"


def test_deny_stops_the_mission_and_holds_the_automation_until_resumed(store, tmp_path) -> None:
    clock = FixedClock(T0)
    auto, ask = paused_mission(store, clock, tmp_path)
    Approvals(store, clock).decide(ask.approval_id, False, scope_now="g/a/x")
    mission = Missions(store, clock).get(ask.mission_id)
    assert mission.status == "stuck" and "denied" in mission.stop_reason
    refused = run(store, clock, tmp_path, auto)  # no fresh allowance behind the owner's back
    assert refused.record is None and refused.verdict.stop_reason == "automation_held"
    assert Automations(store, clock).get("x").state == "held"
    clock.advance(timedelta(seconds=1))
    Automations(store, clock).set_state("x", "active", None)  # the owner resumes: a new mission
    assert run(store, clock, tmp_path, Automations(store, clock).get("x")).record is not None
    assert Missions(store, clock).current("x").mission_id != ask.mission_id


def test_a_failure_to_record_the_decision_never_resumes(tmp_path) -> None:
    clock = FixedClock(T0)
    with open_store(str(tmp_path / "a.db")) as store:
        _, ask = paused_mission(store, clock, tmp_path)
        raw_sql(store, "CREATE TRIGGER fail_missions BEFORE UPDATE ON fg_missions BEGIN SELECT RAISE(ABORT, 'disk full'); END")
        with pytest.raises(StoreUnavailable):
            Approvals(store, clock).decide(ask.approval_id, True, scope_now="g/a/x")
        raw_sql(store, "DROP TRIGGER fail_missions")
        assert Approvals(store, clock).get(ask.approval_id).state == "pending"
        assert Missions(store, clock).get(ask.mission_id).status == "awaiting_owner"


# -- accounting -----------------------------------------------------------------------------------
def test_reconcile_is_idempotent_and_unknown_ids_are_errors(store) -> None:
    clock = FixedClock(T0)
    mission = Missions(store, clock).open("x", "g", "a")
    accounting = Accounting(store, clock)
    accounting.reserve(mission.mission_id, "req-1", estimate_tokens=500)
    accounting.dispatched("req-1")
    _, changed = accounting.reconcile("req-1", 420)
    assert changed and Missions(store, clock).get(mission.mission_id).tokens == 420
    again, changed = accounting.reconcile("req-1", 420)
    assert not changed and again.actual_tokens == 420
    assert Missions(store, clock).get(mission.mission_id).tokens == 420
    with pytest.raises(NotFound):
        accounting.reconcile("req-unknown", 10)
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_dispatches") == [(1,)]


def test_unparseable_usage_latches_the_mission_across_restarts(db_url: str, tmp_path) -> None:
    clock = FixedClock(T0)
    with open_store(db_url) as store:
        auto = automation(
            store,
            clock,
            'print(\'{"floorgate_usage": 1, "request_id": "r1", "input_tokens": "many"}\'); import sys; sys.exit(1)',
            meter="jsonl",
        )
        run(store, clock, tmp_path, auto)
    with open_store(db_url) as store:
        auto = Automations(store, clock).get("x")
        latched = Missions(store, clock).current("x")
        assert latched.latch is not None and "could not be parsed" in latched.latch
        blocked = run(store, clock, tmp_path, auto)
        assert blocked.verdict.status == "stuck" and "accounting latch" in blocked.verdict.stop_reason
        assert run(store, clock, tmp_path, auto, mode="observe").verdict.status == "failed"  # observe: recorded, not blocked
        Missions(store, clock).set_latch(latched.mission_id, None)  # what 'floorgate reconcile --clear-latch' does


# -- the tool-call seam -----------------------------------------------------------------------------
def test_pre_tool_use_refuses_the_call_that_crosses_the_bound(db_url: str) -> None:
    clock = FixedClock(T0)
    with open_store(db_url) as store:
        envelope(store, clock, '{"max_tool_calls": 2}')
        automation(store, clock)
        mission = Missions(store, clock).open("x", "g", "a")
    payload = json.dumps(
        {
            "session_id": "s",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf /tmp/secret"},
            "tool_use_id": "toolu_1",
        }
    )

    def call() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "floorgate", "hook", "pre-tool-use", "--db", db_url, "--mission", mission.mission_id],
            input=payload,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert [call().returncode for _ in range(2)] == [0, 0]
    third = call()
    assert third.returncode == 2 and "max_tool_calls=2" in third.stderr and "Bash refused" in third.stderr
    with open_store(db_url) as store:
        m = Missions(store, clock).get(mission.mission_id)
        assert m.tool_calls == 2 and m.status == "stuck"
        dump = repr(raw_sql(store, "SELECT * FROM fg_missions")) + repr(raw_sql(store, "SELECT * FROM fg_dispatches"))
        assert "rm -rf" not in dump  # tool arguments are never persisted


def test_a_host_in_another_directory_counts_tool_calls_in_the_runner_s_store(tmp_path, sqlite_db, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The runner opened its store by a relative path; the host runs elsewhere (its --cwd), and
    the PreToolUse hook it runs must still find the mission in that same store."""
    import shutil

    from floorgate.admission import CommandHost

    runner_dir = tmp_path / "runner"
    runner_dir.mkdir()
    shutil.copy(sqlite_db, runner_dir / "floorgate.db")
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    monkeypatch.chdir(runner_dir)
    clock = FixedClock(T0)
    hook = f"import subprocess, sys; sys.exit(subprocess.run([{sys.executable!r}, '-m', 'floorgate', 'hook', 'pre-tool-use'], input='{{}}', text=True).returncode)"
    with open_store("sqlite:///floorgate.db") as store:
        envelope(store, clock, '{"max_tool_calls": 5}')
        auto = automation(store, clock)
        spec = auto.spec.model_copy(update={"host": CommandHost(argv=(sys.executable, "-c", hook), cwd=str(host_dir), timeout_seconds=30)})
        auto = Automations(store, clock).edit("x", spec)
        monkeypatch.delenv("FLOORGATE_DB", raising=False)
        outcome = run(store, clock, tmp_path, auto)
        assert outcome.verdict.status == "succeeded", outcome.verdict
        assert Missions(store, clock).recent("x", 1)[0].tool_calls == 1  # counted in this store
    assert not (host_dir / "floorgate.db").exists()


# -- meters ---------------------------------------------------------------------------------------
def test_claude_stream_json_counts_each_message_once() -> None:
    usage = claude_stream_json((TRANSCRIPTS / "claude_stream.jsonl").read_text().splitlines())
    assert set(usage.requests) == {"msg_01A", "msg_01B"}
    assert usage.requests["msg_01A"].tokens == 4 + 5355 + 11292 + 61  # the last event of the message wins
    assert usage.tokens == (4 + 5355 + 11292 + 61) + (6 + 212 + 16827 + 5)
    assert usage.tool_calls == 1 and usage.num_turns == 2 and usage.result_subtype == "success"
    assert usage.models == {"claude-sonnet-4-5"} and usage.total_cost_usd == pytest.approx(0.1924)


def test_claude_stream_json_counts_what_the_real_cli_spent() -> None:
    """Claude Code 2.1.332 against the stand-in (tests/agents): three messages of 1147, 2149 and
    3151 tokens by the provider's final usage. Its assistant events carry the stream's opening
    usage (output_tokens 1), so only the result event's total says what was spent."""
    usage = claude_stream_json((TRANSCRIPTS / "claude_code_2.1.332_tools.jsonl").read_text().splitlines())
    assert usage.tokens == 1147 + 2149 + 3151
    assert usage.tool_calls == 2 and usage.num_turns == 3 and usage.result_subtype == "success" and usage.unparseable == 0


def test_claude_error_max_turns_is_visible() -> None:
    usage = claude_stream_json((TRANSCRIPTS / "claude_max_turns.jsonl").read_text().splitlines())
    assert usage.result_subtype == "error_max_turns" and usage.tokens == 1240 and usage.tool_calls == 1


def test_codex_exec_json_usage_and_tool_items() -> None:
    usage = codex_json((TRANSCRIPTS / "codex_exec.jsonl").read_text().splitlines())
    assert usage.tokens == 34172 + 163 and usage.num_turns == 1 and usage.tool_calls == 2


def test_missing_usage_is_not_zero_and_garbage_is_counted() -> None:
    assert not floorgate_jsonl(["plain output", '{"other": 1}']).reported
    broken = floorgate_jsonl(['{"floorgate_usage": 1, "request_id": "r"}', '{"floorgate_usage": 1, "usage": trunc'])
    assert broken.unparseable == 2 and not broken.reported
    assert codex_json(['{"type": "turn.completed"}']).unparseable == 1
