"""Text ``status`` names a host that was lost (its beats stopped without a clean stop) and since
when, beside the live ones; a host that stopped cleanly is not called lost."""

from __future__ import annotations

from datetime import timedelta

from basics import T0

from floorgate.admission import FixedClock, Store
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime._heartbeat import Heartbeat
from floorgate.scheduler.views.present_status import status_text

from helpers import add_automation


def test_text_status_names_the_lost_host_and_when(store: Store) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock, "x")
    poll = timedelta(seconds=1)
    h1, h2, h3 = (Heartbeat(store, clock, f"{name}:1", poll) for name in ("h1", "h2", "h3"))
    for h in (h1, h2, h3):
        h.beat()
    clock.advance(timedelta(minutes=3))
    h1.beat()  # h1 keeps beating; h2 was killed
    h3.stopped()  # h3 stopped cleanly
    text = status_text(Floorgate(store, clock=clock).readback.overview(None, None, None))
    hosts = next(line for line in text.splitlines() if line.startswith("hosts:"))
    assert f"{h1.host_id} alive" in hosts and f"host {h2.host_id} lost 3 min ago" in hosts and h3.host_id not in hosts, hosts


def test_with_no_live_host_the_lost_one_is_still_named(store: Store) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock, "x")
    h2 = Heartbeat(store, clock, "h2:1", timedelta(seconds=1))
    h2.beat()
    clock.advance(timedelta(minutes=10))
    text = status_text(Floorgate(store, clock=clock).readback.overview(None, None, None))
    assert f"host {h2.host_id} lost 10 min ago" in text, text
