"""Section-9 rows of seed 004 that the admission core covers, on both backends."""

from datetime import timedelta
from itertools import pairwise

import pytest
from basics import DAY, MS, T0, raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floorgate.admission import Admission, FixedClock, InvalidInput, Policies, Reason, Scope, StartKind


def daily(policies: Policies, path: str = "g/a") -> None:
    policies.configure(Scope.parse(path), min_interval=DAY, expected_revision=0, owner_ref="alice")


def reserve(admission: Admission, clock: FixedClock, turn: str, automation: str | None = "x", agent: str = "a", **kw):
    kw.setdefault("trigger_time", clock.now())
    return admission.reserve(goal="g", agent=agent, automation=automation, turn_id=turn, **kw)


def test_daily_boundary_exactly_one_floor_later(policies, admission, clock) -> None:
    daily(policies)
    first = reserve(admission, clock, "t1")
    assert first.admitted and first.reason is Reason.ELIGIBLE
    assert first.next_eligible_at == T0 + DAY
    admission.confirm("t1")
    clock.set(T0 + DAY - MS)
    early = reserve(admission, clock, "t2")
    assert not early.admitted and early.reason is Reason.INTERVAL_WAIT
    assert early.next_eligible_at == T0 + DAY
    clock.set(T0 + DAY)
    on_time = reserve(admission, clock, "t2")
    assert on_time.admitted and on_time.anchor_at == T0 + DAY


def test_anchor_is_the_reservation_not_the_confirmation(policies, admission, clock) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    clock.advance(timedelta(hours=5))
    admission.confirm("t1")
    clock.set(T0 + DAY)
    assert reserve(admission, clock, "t2").admitted


def test_denial_writes_nothing(policies, admission, clock, store) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    before = raw_sql(store, "SELECT turn_id, anchor_us, phase FROM fg_starts ORDER BY turn_id")
    for i in range(20):
        clock.advance(timedelta(minutes=1))
        assert not reserve(admission, clock, f"d{i}").admitted
    assert raw_sql(store, "SELECT turn_id, anchor_us, phase FROM fg_starts ORDER BY turn_id") == before
    assert admission.eligibility("g", "a", "x").last_start.turn_id == "t1"


def test_sqlite_denial_appends_nothing_to_the_wal(tmp_path) -> None:
    from floorgate.admission import open_store

    path = tmp_path / "wal.db"
    clock = FixedClock(T0)
    with open_store(str(path)) as store:
        daily(Policies(store, clock))
        admission = Admission(store, clock)
        reserve(admission, clock, "t1")
        wal = path.with_name("wal.db-wal")
        size = wal.stat().st_size
        mtime = wal.stat().st_mtime_ns
        for i in range(50):
            clock.advance(timedelta(minutes=1))
            assert not reserve(admission, clock, f"d{i}").admitted
        assert (wal.stat().st_size, wal.stat().st_mtime_ns) == (size, mtime)


def test_unconfirmed_reservation_resumes_with_anchor_unmoved(policies, admission, clock) -> None:
    daily(policies)
    first = reserve(admission, clock, "t1")
    clock.advance(timedelta(hours=3))  # the host crashed before confirming
    again = reserve(admission, clock, "t1")
    assert again.admitted and again.reason is Reason.RESUMED
    assert again.anchor_at == first.anchor_at == T0
    assert [s.anchor_at for s in admission.starts()] == [T0]
    assert admission.confirm("t1").status == "confirmed"
    assert admission.confirm("t1").status == "already_confirmed"


def test_confirmed_turn_is_never_admitted_again_even_manually(policies, admission, clock) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    admission.confirm("t1")
    clock.advance(3 * DAY)
    for manual in (None, "owner asked"):
        d = reserve(admission, clock, "t1", manual_reason=manual)
        assert not d.admitted and d.reason is Reason.TURN_ALREADY_STARTED


def test_duplicate_and_stale_triggers_are_denied(policies, admission, clock) -> None:
    daily(policies)
    tick = clock.now()
    reserve(admission, clock, "t1", trigger_time=tick)
    clock.advance(2 * DAY)
    dup = reserve(admission, clock, "t2", trigger_time=tick)
    assert not dup.admitted and dup.reason is Reason.DUPLICATE_TRIGGER
    stale = reserve(admission, clock, "t3", trigger_time=tick - timedelta(hours=1))
    assert not stale.admitted and stale.reason is Reason.STALE_TRIGGER
    assert reserve(admission, clock, "t4", trigger_time=clock.now()).admitted


def test_failed_launch_consumes_its_interval(policies, admission, clock) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    admission.confirm("t1")  # the host then failed: nothing is refunded
    clock.advance(timedelta(minutes=3))  # a retry after backoff reset
    retry = reserve(admission, clock, "t1-retry")
    assert not retry.admitted and retry.next_eligible_at == T0 + DAY


def test_manual_bypasses_only_the_interval_and_anchors_the_floor(policies, admission, clock) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    clock.advance(timedelta(hours=2))
    manual = reserve(admission, clock, "m1", manual_reason="owner asked for a rerun")
    assert manual.admitted and manual.reason is Reason.MANUAL and manual.kind is StartKind.MANUAL
    record = admission.start("m1")
    assert record.kind is StartKind.MANUAL and record.manual_reason == "owner asked for a rerun"
    clock.set(T0 + DAY)  # one floor after the automatic start, but not after the manual one
    late = reserve(admission, clock, "t2")
    assert not late.admitted and late.next_eligible_at == T0 + timedelta(hours=2) + DAY
    with pytest.raises(InvalidInput):
        reserve(admission, clock, "m2", manual_reason="   ")


def test_clock_rollback_denies_until_time_passes_the_anchor(policies, admission, clock) -> None:
    daily(policies)
    clock.set(T0 + 5 * DAY)
    reserve(admission, clock, "t1")
    clock.set(T0)  # the host clock jumped back
    d = reserve(admission, clock, "t2", manual_reason="even manual waits")
    assert not d.admitted and d.reason is Reason.CLOCK_ROLLBACK
    assert admission.eligibility("g", "a", "x").reason is Reason.CLOCK_ROLLBACK


def test_compatible_off_writes_no_cadence_state(admission, clock, store) -> None:
    d = reserve(admission, clock, "t1")
    assert d.admitted and d.reason is Reason.NO_RULE and d.next_eligible_at is None
    assert admission.confirm("t1").status == "no_reservation"
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]
    assert reserve(admission, clock, "t2").admitted


def test_goal_rule_applies_per_agent(policies, admission, clock) -> None:
    daily(policies, "g")
    assert reserve(admission, clock, "a1", agent="a").admitted
    assert reserve(admission, clock, "b1", agent="b").admitted
    assert not reserve(admission, clock, "a2", agent="a", automation="y").admitted


def test_agent_rule_constrains_all_automations_lane_rule_only_its_lane(policies, admission, clock) -> None:
    policies.configure(Scope.automation("g", "a", "x"), min_interval=DAY, expected_revision=0, owner_ref="o")
    assert reserve(admission, clock, "x1", automation="x").admitted
    clock.advance(timedelta(hours=1))
    assert not reserve(admission, clock, "x2", automation="x").admitted
    y1 = reserve(admission, clock, "y1", automation="y")
    assert y1.admitted and y1.reason is Reason.NO_RULE  # another lane: no rule applies, nothing recorded
    policies.configure(Scope.agent("g", "a"), min_interval=timedelta(hours=6), expected_revision=0, owner_ref="o")
    clock.advance(timedelta(hours=1))
    denied = reserve(admission, clock, "y2", automation="y")  # the agent rule counts from x1, its last recorded start
    assert not denied.admitted and denied.next_eligible_at == T0 + timedelta(hours=6)


def test_narrower_rule_never_weakens(policies, admission, clock) -> None:
    daily(policies)
    policies.configure(Scope.automation("g", "a", "x"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    reserve(admission, clock, "t1")
    clock.advance(timedelta(hours=2))
    d = reserve(admission, clock, "t2")
    assert not d.admitted and d.floor.floor == DAY and d.next_eligible_at == T0 + DAY


def test_phase_less_start_fails_closed(policies, admission, clock, store) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    raw_sql(store, "UPDATE fg_starts SET phase = NULL WHERE turn_id = 't1'")
    clock.advance(2 * DAY)
    d = reserve(admission, clock, "t1")
    assert not d.admitted and d.reason is Reason.TURN_ALREADY_STARTED
    assert admission.start("t1").phase_recorded is False


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param("UPDATE fg_starts SET phase = 'bogus'", id="unknown-phase"),
        pytest.param("UPDATE fg_rules SET min_interval_us = -5", id="negative-floor"),
        pytest.param("UPDATE fg_rules SET revision = 0", id="zero-revision"),
        pytest.param("UPDATE fg_starts SET anchor_us = 4611686018427387904", id="anchor-beyond-any-calendar"),
    ],
)
def test_malformed_state_denies_and_reads_unavailable(policies, admission, clock, store, edit) -> None:
    daily(policies)
    reserve(admission, clock, "t1")
    raw_sql(store, edit)
    clock.advance(3 * DAY)
    d = reserve(admission, clock, "t1")
    assert not d.admitted and d.reason is Reason.STATE_UNAVAILABLE
    e = admission.eligibility("g", "a", "x")
    assert e.status == "unavailable" and e.next_eligible_at is None


def test_sqlite_text_in_a_time_column_fails_closed(tmp_path) -> None:
    from floorgate.admission import open_store

    clock = FixedClock(T0)
    with open_store(str(tmp_path / "x.db")) as store:
        daily(Policies(store, clock))
        admission = Admission(store, clock)
        reserve(admission, clock, "t1")
        raw_sql(store, "UPDATE fg_rules SET min_interval_us = 'a day'")
        clock.advance(3 * DAY)
        assert reserve(admission, clock, "t2").reason is Reason.STATE_UNAVAILABLE


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param("UPDATE fg_rules SET min_interval_us = '\u00b2'", id="superscript-floor"),
        pytest.param(
            "UPDATE fg_rules SET min_interval_us = '\uff18\uff16\uff14\uff10\uff10\uff10\uff10\uff10\uff10\uff10\uff10'",
            id="fullwidth-floor",
        ),
        pytest.param("UPDATE fg_starts SET anchor_us = '\u00b2'", id="superscript-anchor"),
    ],
)
def test_sqlite_digits_floorgate_never_writes_fail_closed(tmp_path, edit) -> None:  # type: ignore[no-untyped-def]
    """Text that str.isdigit() accepts but floorgate never writes (a superscript, full-width
    digits) in a number column is damaged state: a denial, never an exception or a floor."""
    from floorgate.admission import open_store

    clock = FixedClock(T0)
    with open_store(str(tmp_path / "x.db")) as store:
        daily(Policies(store, clock))
        admission = Admission(store, clock)
        reserve(admission, clock, "t1")
        raw_sql(store, edit)
        clock.advance(3 * DAY)
        for turn in ("t1", "t2"):  # the turn's own start, and a new turn
            assert reserve(admission, clock, turn).reason is Reason.STATE_UNAVAILABLE
        assert admission.eligibility("g", "a", "x").status == "unavailable"
        assert admission.eligibility_many([("g", "a", "x")])[("g", "a", "x")].status == "unavailable"


def test_eligibility_readback(policies, admission, clock) -> None:
    assert admission.eligibility("g", "a").reason is Reason.NO_RULE
    daily(policies)
    policies.configure(Scope.automation("g", "a", "x"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    reserve(admission, clock, "t1")
    clock.advance(timedelta(hours=23))
    e = admission.eligibility("g", "a", "x")
    assert e.status == "interval_wait" and e.next_eligible_at == T0 + DAY
    assert [(str(r.scope), r.revision) for r in e.floor.rules] == [("g/a", 1), ("g/a/x", 1)]
    assert e.last_start.turn_id == "t1" and e.last_start.kind is StartKind.AUTOMATIC
    clock.advance(timedelta(hours=1))
    assert admission.eligibility("g", "a", "x").status == "eligible"


def test_naive_times_are_rejected(admission) -> None:
    from datetime import datetime

    with pytest.raises(InvalidInput) as err:
        admission.reserve(goal="g", agent="a", automation=None, turn_id="t", trigger_time=datetime(2026, 1, 1))  # noqa: DTZ001 - naive on purpose
    assert err.value.field == "trigger_time"


def test_restart_keeps_the_floor(db_url: str) -> None:
    from floorgate.admission import open_store

    clock = FixedClock(T0)
    with open_store(db_url) as store:
        daily(Policies(store, clock))
        reserve(Admission(store, clock), clock, "t1")
    clock.advance(timedelta(hours=1))
    with open_store(db_url) as store:
        d = reserve(Admission(store, clock), clock, "t2")
        assert not d.admitted and d.next_eligible_at == T0 + DAY


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(st.integers(min_value=0, max_value=40 * 60), st.sampled_from(["x", "y", None])),
        min_size=1,
        max_size=25,
    )
)
def test_property_automatic_starts_are_at_least_a_floor_apart(tmp_path_factory, steps) -> None:
    from floorgate.admission import open_store

    floor = timedelta(minutes=90)
    clock = FixedClock(T0)
    with open_store(str(tmp_path_factory.mktemp("prop") / "p.db")) as store:
        Policies(store, clock).configure(Scope.agent("g", "a"), min_interval=floor, expected_revision=0, owner_ref="o")
        admission = Admission(store, clock)
        admitted = []
        for i, (seconds, lane) in enumerate(steps):
            clock.advance(timedelta(seconds=seconds))
            d = admission.reserve(goal="g", agent="a", automation=lane, turn_id=f"t{i}", trigger_time=clock.now())
            if d.admitted:
                admitted.append(d.anchor_at)
            else:
                assert d.next_eligible_at > clock.now()
        assert all(b - a >= floor for a, b in pairwise(admitted))
        assert admitted and admitted[0] == T0 + timedelta(seconds=steps[0][0])


DAMAGED_RULES = [
    ("null-min-interval", "NULL", "1"),
    ("null-revision", "3600000000", "NULL"),
    ("negative-floor", "-1", "1"),
    ("over-the-cap", str(4000 * 86_400 * 1_000_000), "1"),
    ("revision-zero", "3600000000", "0"),
]


@pytest.mark.parametrize("damage", DAMAGED_RULES, ids=[d[0] for d in DAMAGED_RULES])
def test_a_damaged_rule_denies_everywhere_and_is_never_read_as_no_rule(store, damage) -> None:  # type: ignore[no-untyped-def]
    """A hand rebuild without constraints: the rule row keeps its place but holds garbage."""
    from basics import raw_sql

    from floorgate.admission import StoreUnavailable

    _, interval, revision = damage
    clock = FixedClock(T0)
    Policies(store, clock).configure(Scope.agent("g", "a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    raw_sql(store, "ALTER TABLE fg_rules RENAME TO fg_rules_kept")
    raw_sql(store, "CREATE TABLE fg_rules AS SELECT * FROM fg_rules_kept")  # no constraints survive
    raw_sql(store, f"UPDATE fg_rules SET min_interval_us = {interval}, revision = {revision}")
    gate = Admission(store, clock)
    decision = gate.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0)
    assert not decision.admitted and decision.reason is Reason.STATE_UNAVAILABLE
    assert gate.eligibility("g", "a", "x").status == "unavailable"
    with pytest.raises(StoreUnavailable):
        gate.next_eligible_many([("g", "a", "x")])
    with pytest.raises(StoreUnavailable):
        Policies(store, clock).list("g")
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]


def test_a_decision_is_the_value_its_constructor_builds(policies, admission, clock) -> None:  # type: ignore[no-untyped-def]
    """The hot path fills a Decision's fields directly (_rule._decision): that is sound only while
    Decision is a frozen dataclass whose __init__ does nothing more than set its fields."""
    import dataclasses

    from floorgate.admission import Decision

    daily(policies)
    for turn, when in (("t1", T0), ("t2", T0 + MS)):  # an admission and an interval denial
        clock.set(when)
        made = reserve(admission, clock, turn)
        built = Decision(**{f.name: getattr(made, f.name) for f in dataclasses.fields(Decision)})
        assert made == built and vars(made) == vars(built)
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.admitted = True  # type: ignore[misc]
    assert not hasattr(Decision, "__post_init__")
