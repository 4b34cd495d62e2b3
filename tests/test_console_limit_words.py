"""The console words a spent or unreadable lane as the CLI does, on both backends: a lane no wait
frees is "not by waiting" (never the "now" of an eligible one), and a fire a count denies says
which limit denies it, not "floor"."""

from __future__ import annotations

from basics import T0

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window

from console_kit import console, sign_in
from helpers import add_automation


def limit(store: Store, clock: FixedClock, path: str, change: LimitsChange) -> None:
    Policies(store, clock).configure(Scope.parse(path), expected_revision=0, owner_ref="owner", limits=change)


def test_a_lane_no_wait_frees_is_not_by_waiting_on_the_dashboard_and_its_page(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    unchecked = LimitsChange(budget_tokens=1000, per=parse_window("1d"))  # no estimate: it cannot be checked
    limit(store, clock, "g/a", unchecked)
    limit(store, clock, "g/b", unchecked)  # a lane no automation stands for
    add_automation(store, clock, "x")
    sign_in(c)
    assert c.get("/api/status").json()["automations"][0]["eligibility"]["status"] == "limit_wait"
    page = c.client.get("/dashboard").text
    assert '<span data-testid="next-eligible">not by waiting</span>' in page
    assert '<span data-testid="lane-next-eligible">not by waiting</span>' in page
    assert ">now</span>" not in page
    assert '<span data-testid="next-eligible">not by waiting</span>' in c.client.get("/automations/x").text


def test_a_fire_a_count_denies_names_the_count_on_the_automations_page(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    limit(store, clock, "g/a", LimitsChange(max_starts=1, per=parse_window("week@UTC")))
    add_automation(store, clock, "x")  # daily at 09:00 from Tuesday 2026-12-01
    assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=T0).admitted
    sign_in(c)
    page = c.client.get("/automations/x").text
    assert "<td>no (count_exhausted)</td>" in page  # the rest of the week's fires
    assert "no (floor)" not in page  # the lane has no floor at all


def test_the_settings_page_says_what_a_limits_only_rule_stores(store: Store, clock: FixedClock) -> None:
    """A rule with a count and no floor is not "disabled": its limits are stored there."""
    c = console(store, clock)
    limit(store, clock, "g/a", LimitsChange(max_starts=3, per=parse_window("1h")))
    sign_in(c)
    page = c.client.get("/settings?target=g/a").text
    stored = page.split('<span id="stored">')[1].split("</span>")[0]
    assert stored == "no floor; limits 3 starts per 1h (changed with floorgate policy set)"
