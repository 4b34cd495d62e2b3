"""Owner control: exact-revision CAS, reduction authorization, provenance, inheritance."""

from datetime import timedelta

import pytest
from basics import DAY, raw_sql

from floorgate.admission import Policies, ReductionNotAuthorized, RevisionConflict, Scope

H = timedelta(hours=1)


def test_first_write_needs_revision_zero_and_conflicts_change_nothing(policies: Policies) -> None:
    scope = Scope.agent("g", "a")
    with pytest.raises(RevisionConflict) as err:
        policies.configure(scope, min_interval=DAY, expected_revision=3, owner_ref="alice")
    assert err.value.current_revision == 0
    assert policies.get(scope) is None
    rule = policies.configure(scope, min_interval=DAY, expected_revision=0, owner_ref="alice")
    assert rule.revision == 1
    with pytest.raises(RevisionConflict) as err:
        policies.configure(scope, min_interval=2 * DAY, expected_revision=0, owner_ref="bob")
    assert err.value.current_revision == 1
    stored = policies.get(scope)
    assert stored is not None and stored.min_interval == DAY and stored.owner_ref == "alice"
    assert len(policies.history(scope)) == 1


def test_raising_needs_no_authorization_lowering_does(policies: Policies) -> None:
    scope = Scope.goal("g")
    policies.configure(scope, min_interval=H, expected_revision=0, owner_ref="alice")
    policies.configure(scope, min_interval=DAY, expected_revision=1, owner_ref="alice")
    with pytest.raises(ReductionNotAuthorized):
        policies.configure(scope, min_interval=H, expected_revision=2, owner_ref="alice")
    with pytest.raises(ReductionNotAuthorized):
        policies.configure(scope, min_interval=timedelta(0), expected_revision=2, owner_ref="alice")
    current = policies.get(scope)
    assert current is not None and current.min_interval == DAY and current.revision == 2
    lowered = policies.configure(scope, min_interval=H, expected_revision=2, owner_ref="alice", allow_reduction=True)
    assert lowered.min_interval == H and lowered.revision == 3


def test_disable_removes_only_that_rule_and_keeps_revisions_and_starts(policies: Policies, admission, clock) -> None:
    policies.configure(Scope.goal("g"), min_interval=H, expected_revision=0, owner_ref="alice")
    policies.configure(Scope.agent("g", "a"), min_interval=DAY, expected_revision=0, owner_ref="alice")
    assert admission.reserve(goal="g", agent="a", automation=None, turn_id="t1", trigger_time=clock.now()).admitted
    disabled = policies.configure(
        Scope.agent("g", "a"), min_interval=timedelta(0), expected_revision=1, owner_ref="alice", allow_reduction=True
    )
    assert disabled.revision == 2 and not disabled.active
    effective = policies.effective("g", "a")
    assert effective.floor == H and [str(r.scope) for r in effective.rules] == ["g"]
    assert [s.turn_id for s in admission.starts()] == ["t1"]
    # The revision keeps counting from the disabled rule: no ABA after a disable.
    with pytest.raises(RevisionConflict):
        policies.configure(Scope.agent("g", "a"), min_interval=DAY, expected_revision=0, owner_ref="alice")


def test_every_write_records_provenance(policies: Policies, clock) -> None:
    scope = Scope.automation("g", "a", "x")
    policies.configure(scope, min_interval=H, expected_revision=0, owner_ref="alice")
    clock.advance(H)
    policies.configure(scope, min_interval=timedelta(minutes=30), expected_revision=1, owner_ref="bob", allow_reduction=True)
    newest, oldest = policies.history(scope)
    assert (oldest.before, oldest.after, oldest.revision, oldest.owner_ref, oldest.reduction_authorized) == (
        None,
        H,
        1,
        "alice",
        False,
    )
    assert (newest.before, newest.after, newest.revision, newest.owner_ref, newest.reduction_authorized) == (
        H,
        timedelta(minutes=30),
        2,
        "bob",
        True,
    )
    assert newest.changed_at - oldest.changed_at == H


@pytest.mark.parametrize(
    "rules, automation, agent_floor, lane_floor, floor",
    [
        pytest.param({"g": DAY}, "x", DAY, timedelta(0), DAY, id="goal-rule-applies-to-agent"),
        pytest.param({"g": H, "g/a": DAY}, None, DAY, timedelta(0), DAY, id="agent-rule-raises-goal"),
        pytest.param({"g": DAY, "g/a": H}, None, DAY, timedelta(0), DAY, id="agent-rule-cannot-weaken-goal"),
        pytest.param({"g/a": DAY, "g/a/x": H}, "x", DAY, H, DAY, id="automation-rule-cannot-weaken-agent"),
        pytest.param({"g/a": H, "g/a/x": DAY}, "x", H, DAY, DAY, id="automation-rule-narrows-lane"),
        pytest.param({"g/a/x": DAY}, None, timedelta(0), timedelta(0), timedelta(0), id="no-automation-id-no-lane-rule"),
        pytest.param({"g/b": DAY, "h": DAY}, "x", timedelta(0), timedelta(0), timedelta(0), id="peers-and-other-goals-ignored"),
    ],
)
def test_effective_floor_is_the_maximum_applicable_rule(policies, rules, automation, agent_floor, lane_floor, floor) -> None:
    for path, interval in rules.items():
        policies.configure(Scope.parse(path), min_interval=interval, expected_revision=0, owner_ref="o")
    eff = policies.effective("g", "a", automation)
    assert (eff.agent_floor, eff.lane_floor, eff.floor) == (agent_floor, lane_floor, floor)


def test_history_survives_reopen(db_url: str, clock) -> None:
    from floorgate.admission import open_store

    with open_store(db_url) as store:
        Policies(store, clock).configure(Scope.goal("g"), min_interval=DAY, expected_revision=0, owner_ref="alice")
    with open_store(db_url) as store:
        rule = Policies(store, clock).get(Scope.goal("g"))
        assert rule is not None and rule.revision == 1
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_rule_history") == [(1,)]
