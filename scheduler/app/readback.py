"""One readback of what an automation will do next, under every surface.

``status``, ``automation show``, ``automation preview`` (and the HTTP console after them) render
an ``AutomationReadback``; none computes its own answer. Next fires come from the same planning
the timer host does (``preview.simulate``), with the host policy every host reads from the store,
on the schedule that host really arms (floored for crontab and external timers). The values it
returns are declared in ``_readback_values`` (imported from here by every surface).
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from itertools import islice

from floorgate.admission import (
    Admission,
    Approvals,
    Automation,
    AutomationState,
    Automations,
    Eligibility,
    HoldKind,
    HostPolicies,
    HostPolicy,
    Journal,
    Missions,
    Overlap,
    StartKind,
    StartRecord,
    Store,
    StoreUnavailable,
    TickLog,
    TimerBinding,
    TimerBindings,
    TurnRecord,
    WhenDenied,
    failure_wait,
)
from floorgate.admission.clock import Clock, SystemClock, iso, read_clock
from floorgate.admission.liveness import HookAnswers, HostBeat, HostBeats
from floorgate.admission.windows import NEVER
from floorgate.hosts import InvalidSchedule, Schedule
from floorgate.hosts.registry import capabilities
from floorgate.hosts.schedule import parse_canonical

from ..runtime.recovery import orphaned
from ._readback_reads import Listed, _Bulk, _Direct, listed_of
from ._readback_values import STOPPED as STOPPED  # re-exported: status and the dashboard name the stopped states
from ._readback_values import AutomationReadback, Overview, OverviewStream, Preview, ReadContext, ReadbackState
from .budget_readback import BudgetReadback, LaneLimits, PreviewLimits, judged, limit_denied, limited
from .phase import off_phase
from .preview import FloorMeeting, PlanInputs, PreviewRow, first_run, first_run_at, simulate
from .timers import LAUNCH_WAIT, TimerService
from .wake import catch_up_window, trigger_due


def floor_meeting(timer: str) -> tuple[FloorMeeting, timedelta]:
    """How the timer host meets a floor that has not elapsed, and how long a fire waits for it."""
    caps = capabilities(timer)
    if caps.floor_aware:
        return _COALESCE  # its timer never wakes inside the floor
    if caps.launches_turns:
        return _WAIT  # its fire runs 'turn run --wait-eligible'
    return _DENY  # the app asks the hook, which denies inside the floor


_COALESCE, _WAIT, _DENY = (FloorMeeting.COALESCE, timedelta(0)), (FloorMeeting.WAIT, LAUNCH_WAIT), (FloorMeeting.DENY, timedelta(0))


# Decoded automations a readback of many holds at once: fifty thousand held together took ~50 MB
# (a third of a status's peak), so above this many each page is read again by id when its turn comes.
_PAGE = 2_000


class Readback:
    """Computes readbacks from the store; every surface calls these methods."""

    def __init__(self, store: Store, clock: Clock | None = None, timers: TimerService | None = None) -> None:
        """``timers``: the process's timer service (its state directory and crontab account are
        part of the crontab line a readback compares with); by default one with no settings."""
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.admission = Admission(store, self.clock)
        self.automations = Automations(store, self.clock)
        self.journal = Journal(store, self.clock)
        self.ticklog = TickLog(store)
        self.bindings = TimerBindings(store)
        self.missions = Missions(store, self.clock)
        self.approvals = Approvals(store, self.clock)
        self.hook_answers = HookAnswers(store)
        self.beats = HostBeats(store)
        self.timers = timers if timers is not None else TimerService(store, clock=self.clock)
        self.budgets = BudgetReadback(store, self.clock)

    def host_policy(self) -> HostPolicy:
        return HostPolicies(self.store, self.clock).get().policy

    def hosts(self) -> list[HostBeat]:
        """Every timer host that recorded a heartbeat (alive or not: ``HostBeat.alive``)."""
        return self.beats.all()

    def context(self) -> ReadContext:
        """What every readback of one request shares: the clock reading, host policy and hosts."""
        now = read_clock(self.clock)
        return ReadContext(now=now, policy=self.host_policy(), hosts=tuple(self.hosts()))

    # -- one and many ------------------------------------------------------------------------
    def automation(self, automation_id: str) -> AutomationReadback:
        """The readback of one automation (``NotFound`` when it does not exist)."""
        try:
            automation = self.automations.get(automation_id)
        except StoreUnavailable as exc:
            if not self.automations.exists(automation_id):
                raise
            return _unreadable(automation_id, str(exc))
        return self.of(automation, self.context())

    def overview(self, goal: str | None = None, agent: str | None = None, automation: str | None = None) -> Overview:
        """What ``status`` shows: every automation's readback, the floored lanes no automation
        stands for, and the timer hosts, from one shared context."""
        view = self.overview_stream(goal, agent, automation)
        return Overview(now=view.now, readbacks=list(view.readbacks), lanes=view.lanes, hosts=view.hosts, lane_limits=view.lane_limits)

    def overview_stream(self, goal: str | None = None, agent: str | None = None, automation: str | None = None) -> OverviewStream:
        """``overview`` for a renderer that writes each readback as it comes: the same readbacks,
        in the same order, from one context; memory holds the automations not yet read back."""
        ctx = self.context()
        listed, held, broken = self._scanned(goal, agent, automation)
        covered = {x.lane for x in listed}
        own = any(capabilities(x.timer).armed_by_runtime for x in listed)
        listed_lanes = self.lanes_with_limits(goal, agent, automation, covered)
        del covered
        return OverviewStream(
            now=ctx.now,
            readbacks=self._streamed(listed, held, broken, ctx),
            lanes=[e for e, _ in listed_lanes],
            hosts=ctx.hosts,
            own_timers=own,
            lane_limits={(e.goal_id, e.agent_id, e.automation_id): x for e, x in listed_lanes if x is not None},
        )

    def many(
        self, goal: str | None = None, agent: str | None = None, automation: str | None = None, *, ctx: ReadContext | None = None
    ) -> list[AutomationReadback]:
        """Readbacks of every automation (narrowed to a goal, agent or one id); an unreadable
        row is reported held, never hidden, and never hides the others."""
        ctx = ctx if ctx is not None else self.context()
        return list(self._streamed(*self._scanned(goal, agent, automation), ctx))

    def _scanned(
        self, goal: str | None, agent: str | None, automation: str | None
    ) -> tuple[list[Listed], dict[str, Automation] | None, dict[str, str]]:
        """What a readback of many needs of each automation (``Listed``), the decoded automations
        themselves only while there are at most ``_PAGE`` (more are read again a page at a time, as
        their turn comes), and ``{automation_id: reason}`` for the rows that do not decode."""
        listed: list[Listed] = []
        held: dict[str, Automation] | None = {}
        broken: dict[str, str] = {}
        with _collector_paused():
            for aid, found, reason in self.automations.decoded(goal=goal, agent=agent):
                if automation is not None and aid != automation:
                    continue
                if found is None:
                    broken[aid] = reason
                    continue
                listed.append(listed_of(found))
                if held is not None:
                    held[aid] = found
                    held = held if len(held) <= _PAGE else None
        return listed, held, broken

    def _streamed(
        self, listed: list[Listed], held: dict[str, Automation] | None, broken: dict[str, str], ctx: ReadContext
    ) -> Iterator[AutomationReadback]:
        """Each readback in order (goal, then id; an unreadable row, whose goal is unknown, first),
        made as it is asked for; an automation is let go once read back. Unless ``held``, the
        automations are read again ``_PAGE`` at a time, in that order: one that is gone since is
        left out, one that no longer decodes is held in its place, and one whose lane changed is
        read back on its own (the bulk reads were asked for the lane it had)."""
        with _collector_paused():
            # (goal, id) is unique: the third and fourth items are never compared.
            order: list[tuple[str, str, tuple[str, str, str] | None, str]] = [(x.lane[0], x.lane[2], x.lane, "") for x in listed]
            order += [("", aid, None, reason) for aid, reason in broken.items()]
            order.sort(key=lambda item: (item[0], item[1]))
            listed.sort(key=lambda x: (x.lane[0], x.lane[2]))  # the order the bulk reads are asked in
            sources: _Direct | _Bulk = _Bulk(self, listed) if len(listed) > 1 else _Direct(self)
            listed.clear()
            pending = deque(order)
            del order
            page: dict[str, Automation | str] = {}
            while pending:
                _, aid, lane, reason = pending.popleft()
                if lane is None:
                    yield _unreadable(aid, reason)
                    continue
                if held is not None:
                    item: Automation | str | None = held.pop(aid)
                else:
                    if aid not in page:
                        ahead = islice((x[1] for x in pending if x[2] is not None), _PAGE - 1)
                        found, bad = self.automations.scan([aid, *ahead])
                        page = {**found, **bad}
                        del found, bad
                    item = page.pop(aid, None)
                if item is None:
                    continue  # removed since it was listed: there is nothing to read back
                if isinstance(item, str):
                    yield _unreadable(aid, item)
                elif (item.spec.goal_id, item.spec.agent_id, aid) != lane:
                    yield self.of(item, ctx, _Direct(self))
                else:
                    yield self.of(item, ctx, sources)

    def of(self, automation: Automation, ctx: ReadContext, sources: _Direct | _Bulk | None = None) -> AutomationReadback:
        """The readback of a loaded automation in ``ctx``; state of its own that cannot be read (a
        turn, a mission, a binding) holds it, as the host does, and says why."""
        try:
            return self._of(automation, ctx, sources if sources is not None else _Direct(self))
        except StoreUnavailable as exc:
            if not self.store_reachable():
                raise  # the store is down: that is every automation's answer, not this one's
            readback = _unreadable(automation.automation_id, str(exc))
            return replace(readback, automation=automation)

    def store_reachable(self) -> bool:
        try:
            self.automations.revisions()
        except StoreUnavailable:
            return False
        return True

    def _of(self, automation: Automation, ctx: ReadContext, src: _Direct | _Bulk) -> AutomationReadback:

        now, policy = ctx.now, ctx.policy
        aid = automation.automation_id
        spec = automation.spec
        lane = (spec.goal_id, spec.agent_id, aid)
        limits = src.limits(lane, automation)
        eligibility = limited(src.eligibility(lane, limits), limits)
        last_turn = src.last_turn(aid)
        binding = src.binding(aid)
        mission = src.mission(aid)
        promise = self.timers.guarantee(automation, binding, now, answers=src)
        drift = self.timers.drift(automation, binding)
        envelope, problem = src.envelope(lane)
        streak = src.wake(aid)
        failures = streak.failures if streak is not None else 0
        failing_until = failure_wait(streak) if streak is not None else None
        common = dict(
            failures=failures,
            failing_until=failing_until,
            automation_id=aid,
            automation=automation,
            eligibility=eligibility,
            last_turn=last_turn,
            binding=binding,
            drift=drift,
            guarantee=promise.guarantee.value,
            guarantee_why=promise.why,
            hook_answered_at=promise.hook_answered_at,
            mission=mission,
            envelope=envelope,
            limits=limits if limits.states else None,
        )

        def readback(
            state: ReadbackState,
            detail: str,
            hold: HoldKind | None = None,
            *,
            unreadable: bool = False,
            next_fire_at: datetime | None = None,
            plan: PlanInputs | None = None,
            no_timer_host: bool = False,
        ) -> AutomationReadback:
            # Built once, with its final values (not a base copied by ``replace``).
            return AutomationReadback(
                state=state,
                detail=src.text(detail),
                hold=hold,
                unreadable=unreadable,
                next_fire_at=next_fire_at,
                plan=plan,
                no_timer_host=no_timer_host,
                **common,  # type: ignore[arg-type]
            )

        try:
            plan = self._plan(automation, eligibility, binding, policy, src)
            next_fire = first_run_at(plan, now=now, queries=src.queries) if plan is not None else None
        except (InvalidSchedule, StoreUnavailable, ValueError, TypeError, OverflowError) as exc:
            # The host cannot plan this automation either: it holds it, and so does every surface.
            return readback(ReadbackState.HELD, f"unreadable state: {exc}", unreadable=True)
        if automation.state != AutomationState.ACTIVE:
            hold = automation.hold_kind
            if automation.state == AutomationState.HELD and hold is None:
                hold = HoldKind.TIMER
            return readback(ReadbackState(automation.state.value), automation.state_note or "no note given", hold)
        if mission is not None and mission.status == "awaiting_owner":
            asks = self.approvals.pending(mission.mission_id)
            ask = f"floorgate approve {asks[0].approval_id} (or deny)" if asks else "no pending ask (expired?)"
            return readback(ReadbackState.AWAITING_OWNER, f"mission {mission.mission_id} waits for its owner: {ask}")
        unsettled = src.unsettled(aid)  # an unreadable turn raises: held, above
        crashed = [r for r in unsettled if orphaned(r, now)]
        if plan is None and binding is not None and binding.hold_reason:
            state, detail = ReadbackState.HELD, binding.hold_reason
        elif crashed:
            turn = crashed[0].turn_id
            state, detail = ReadbackState.RUNNING, f"turn {turn} lost its runner; the next host poll or 'turn run' recovers it"
        elif unsettled:
            state, detail = ReadbackState.RUNNING, f"turn {unsettled[0].turn_id} is running"
            if plan is not None and next_fire is not None and next_fire <= now and spec.overlap is Overlap.SKIP:
                # Nothing starts beside the running turn: every fire up to now is taken, run or
                # skipped, though its host may not have written those ticks yet.
                plan = replace(plan, last_ticked=_later(plan.last_ticked, src.queries.last_at_or_before(plan.schedule, now)))
                next_fire = first_run_at(plan, now=now, queries=src.queries)
        elif (problem_text := src.host_problem(automation)) is not None:
            state, detail = ReadbackState.HOST_UNAVAILABLE, problem_text
        elif eligibility.status == "unavailable":
            state, detail, next_fire = ReadbackState.UNAVAILABLE, eligibility.detail, None
        elif failures:
            state, detail = ReadbackState.FAILING, _failing_detail(automation, failures, failing_until, src.last_turn(aid), now)
            if failing_until is not None and next_fire is not None and next_fire < failing_until:
                next_fire = failing_until
        else:
            state, detail = ReadbackState(eligibility.status), eligibility.detail
        # One automation's readback names the start that moved its lane (a read of the lane's
        # starts); an overview names the lane's last start: a read per lane would make status
        # quadratic in practice (every lane waiting for a floor is off its phase).
        history = self._lane_starts if isinstance(src, _Direct) else None
        if state in (ReadbackState.ELIGIBLE, ReadbackState.INTERVAL_WAIT) and (
            moved := off_phase(plan, next_fire, eligibility.last_start, history, now=now)
        ):
            detail = f"{detail}; {moved}"
        down = ctx.not_firing(spec.timer) if next_fire is not None else None
        no_host = down is not None
        if down is not None:  # no `floorgate run` is alive, or the host's daemon is not running
            detail, next_fire = f"{detail}; {down}", None
        if drift is not None:  # the host fires what it holds now, not what was applied
            next_fire = None
        if plan is None and state is not ReadbackState.HELD:
            detail = f"{detail}; the timer host has nothing armed (see 'floorgate automation apply {aid}')"
        if plan is not None and plan.trigger_at is not None:  # new work: one wake, never before the floor
            detail = f"{detail}; triggered: new work pending, due {iso(plan.trigger_at)}"
        if mission is not None and mission.latch is not None:
            detail = f"{detail}; ACCOUNTING LATCH on {mission.mission_id}: {mission.latch}"
        if problem is not None:
            detail = f"{detail}; ENVELOPE PROBLEM: {problem}"
        return readback(state, detail, next_fire_at=next_fire, plan=plan, no_timer_host=no_host)

    def _lane_starts(self, start: StartRecord) -> list[StartRecord]:
        """The recent starts of ``start``'s lane, newest first (what moved a lane off its phase)."""
        return self.admission.starts(start.goal_id, start.agent_id, start.automation_id, limit=50)

    def _plan(
        self, automation: Automation, eligibility: Eligibility, binding: TimerBinding | None, policy: HostPolicy, src: _Direct | _Bulk
    ) -> PlanInputs | None:
        """What the automation's timer host arms, and how it meets the floor (None: nothing armed)."""
        spec = automation.spec
        own = parse_canonical(spec.schedule)  # raises on an unreadable schedule: held, never guessed
        meeting, wait = floor_meeting(spec.timer)
        if meeting is FloorMeeting.COALESCE:
            schedule: Schedule | None = own
            wake = src.wake(automation.automation_id)
            last = src.last_ticked(automation.automation_id)
            started = eligibility.last_start  # a fire whose start is admitted is taken (its host may not have written the tick yet)
            if started is not None and started.automation_id == automation.automation_id and started.kind is StartKind.AUTOMATIC:
                last = _later(last, started.trigger_time)
            trigger_at = trigger_due(spec.debounce, src.trigger(automation.automation_id))
        else:
            schedule = Schedule.parse(binding.desired) if binding is not None and binding.desired is not None else None
            wake, last, trigger_at = None, None, None
        if schedule is None:
            return None
        floor = eligibility.floor.floor if eligibility.floor is not None else None
        streak = src.wake(automation.automation_id) if wake is None else wake
        failing = failure_wait(streak) if streak is not None else None  # every timer's automatic starts wait for it
        opens = eligibility.next_eligible_at
        if eligibility.status == "limit_wait" and opens is None:
            opens = NEVER  # no wait frees it: nothing runs until the owner raises the limit
        if failing is not None and (opens is None or failing > opens):
            opens = failing
        return PlanInputs(
            schedule=schedule,
            meeting=meeting,
            floor=floor if floor else None,
            next_eligible_at=opens,
            wait=wait,
            wake=wake,
            last_ticked=last,
            catch_up=catch_up_window(spec, policy),
            since=automation.updated_at,
            when_denied=spec.when_denied,
            trigger_at=trigger_at,
            failing_until=failing,
        )

    # -- dry runs ------------------------------------------------------------------------------
    def preview(self, automation_id: str, count: int) -> Preview:
        """What a saved automation's timer host will fire next, and which fires run."""
        now = read_clock(self.clock)
        rb = self.automation(automation_id)
        floor = rb.eligibility.floor.floor if rb.eligibility is not None and rb.eligibility.floor is not None else None
        status = rb.eligibility.status if rb.eligibility is not None else "unavailable"
        blocked = None
        if (
            rb.state in (ReadbackState.PAUSED, ReadbackState.HELD, ReadbackState.AWAITING_OWNER, ReadbackState.UNAVAILABLE)
            or rb.plan is None
        ):
            blocked = rb.detail
        rows = [] if blocked is not None else self.limited_fires(rb, count, now)
        last = rb.eligibility.last_start if rb.eligibility is not None else None
        moved = off_phase(rb.plan, first_run(rows), last, self._lane_starts, now=now) if blocked is None else None
        effective = rb.eligibility.floor if rb.eligibility is not None else None
        held = rb.eligibility.detail if rb.eligibility is not None and status == "limit_wait" and blocked is None else None
        return Preview(automation_id, rb.plan.schedule if rb.plan else None, floor, status, rows, blocked, moved, effective, held)

    def limited_fires(self, rb: AutomationReadback, count: int, now: datetime) -> list[PreviewRow]:
        """``rb``'s next fires with its counts and budgets checked at each start: a fire before a
        spent limit frees, or one the preview's own earlier starts would push over it, is denied
        naming the limit's reason."""
        if rb.plan is None:
            return []
        if rb.limits is None or rb.eligibility is None:
            return rb.fires(count, now)
        rows = simulate(replace(rb.plan, limits=PreviewLimits(self.store, rb.limits)), count=count, now=now)
        return [limit_denied(r, rb.eligibility) for r in rows]

    def preview_schedule(
        self,
        *,
        goal: str,
        agent: str,
        automation_id: str,
        schedule: Schedule,
        timer: str,
        count: int,
        when_denied: WhenDenied = WhenDenied.WAIT,
        model: str | None = None,
    ) -> Preview:
        """What an unsaved schedule would do on ``timer`` under today's floors, counts and budgets
        (priced by ``model``; writes nothing)."""
        now = read_clock(self.clock)
        limits = self.budgets.of((goal, agent, automation_id), model)
        eligibility = limited(self.admission.eligibility(goal, agent, automation_id, limits=judged(limits)), limits)
        floor = eligibility.floor.floor if eligibility.floor is not None else None
        if eligibility.status == "unavailable":
            return Preview(automation_id, schedule, floor, eligibility.status, [], eligibility.detail, effective=eligibility.floor)
        meeting, wait = floor_meeting(timer)
        plan = PlanInputs(
            schedule=schedule,
            meeting=meeting,
            floor=floor if floor else None,
            next_eligible_at=NEVER
            if eligibility.status == "limit_wait" and eligibility.next_eligible_at is None
            else eligibility.next_eligible_at,
            wait=wait,
            catch_up=self.host_policy().catch_up,
            since=now,  # saved now, it would be created (or changed) now
            when_denied=when_denied,
            limits=PreviewLimits(self.store, limits) if limits.states else None,
        )
        rows = [limit_denied(r, eligibility) for r in simulate(plan, count=count, now=now)]
        held = eligibility.detail if eligibility.status == "limit_wait" else None
        return Preview(automation_id, schedule, floor, eligibility.status, rows, None, effective=eligibility.floor, held_by=held)

    def lane(self, goal: str, agent: str, automation: str | None) -> tuple[Eligibility, LaneLimits | None]:
        """One lane's eligibility with its limits folded in (``limited``), and the limits (None: none)."""
        limits = self.budgets.lane(goal, agent, automation)
        verdict = self.admission.eligibility(goal, agent, automation, limits=judged(limits))
        return limited(verdict, limits), limits if limits.states else None

    def lanes(self, goal: str | None, agent: str | None, automation: str | None, covered: set[tuple[str, str, str]]) -> list[Eligibility]:
        """Eligibility of the floored lanes no automation stands for (``status``'s second table),
        with their limits folded in (``budget_readback.limited``; ``lane_limits`` has the details).
        An agent-wide lane of an agent that has automations is left out of the listing (each of
        them shows it: their eligibility includes the agent's floor), unless asked for by name."""
        return [e for e, _ in self.lanes_with_limits(goal, agent, automation, covered)]

    def lanes_with_limits(
        self, goal: str | None, agent: str | None, automation: str | None, covered: set[tuple[str, str, str]]
    ) -> list[tuple[Eligibility, LaneLimits | None]]:
        """``lanes``, each with its limits (None: it has none): one more read of the rules when
        any lane is listed, and the limits' reads only for the lanes that have some."""
        if agent is not None and goal is not None:
            keys: list[tuple[str, str, str | None]] = [(goal, agent, automation)]
        else:
            automated = {(g, a) for g, a, _ in covered}
            keys = [
                k for k in self.admission.lanes() if (goal is None or k[0] == goal) and not (k[2] is None and (k[0], k[1]) in automated)
            ]
        wanted = [k for k in keys if k not in covered]
        if not wanted:
            return []
        limits = self.budgets.listed(wanted)  # first: the verdicts are judged from what is shown
        if len(wanted) < 2:
            found = {k: self.admission.eligibility(*k, limits=judged(limits.get(k))) for k in wanted}
        else:  # one read transaction, the agents' last starts in one query
            given = {k: states for k in wanted if (states := judged(limits.get(k))) is not None}
            found = self.admission.eligibility_many(wanted, limits=given)
        return [(limited(found[k], limits.get(k)), limits.get(k)) for k in wanted]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the readbacks are built: they create few cycles, and
    each collection of the older generations walks every object built so far, so with the
    collector on, a readback of fifty thousand automations spends a fifth of its time (a growing
    share as they grow) finding nothing to free. It runs again as it did before, afterwards."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _failing_detail(automation: Automation, failures: int, until: datetime | None, last: TurnRecord | None, now: datetime) -> str:
    """Why a failing automation waits: the streak, the latest failure, and when it may start."""
    turns = "turn" if failures == 1 else "consecutive turns"
    verdict = last.verdict if last is not None else None
    why = f" (latest: {verdict.status}, {verdict.stop_reason})" if verdict is not None and verdict.status != "succeeded" else ""
    hold = automation.spec.holds_after
    held = f"; held after {hold}" if hold else ""
    if until is not None and until > now:
        wait = f"no automatic start before {iso(until)}"
    elif failures == 1:
        wait = "one early retry, then starts slow down"
    else:
        wait = "its next start may run"
    return f"failing: {failures} {turns} failed{why}; {wait}{held}"


def _unreadable(automation_id: str, reason: str) -> AutomationReadback:
    return AutomationReadback(
        automation_id=automation_id,
        automation=None,
        state=ReadbackState.HELD,
        detail=f"unreadable state: {reason}",
        hold=None,
        unreadable=True,
        eligibility=None,
        next_fire_at=None,
        plan=None,
        guarantee="none (held)",
    )


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    """The later of two instants, either of which may be unknown (None)."""
    return b if a is None else a if b is None else max(a, b)
