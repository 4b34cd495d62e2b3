"""What changed since a running host's last poll, read in one transaction.

A host keeps every automation's timer armed from facts it read before; on each poll it asks only
which of those facts may have changed since then (rows stamped at or after a mark), so a poll with
nothing changed reads a handful of rows, not every table. Stamps come from the writers' clocks and
are taken before their commits, so callers look again a margin before their last poll, and
reconcile everything now and then.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, Connection, func, select, type_coerce

from . import _schema as s
from ._repository import Repository
from .clock import to_us

DAMAGED = -1  # what a value the feed cannot read becomes: never a revision, stamp or anchor written


@dataclass(frozen=True)
class Changes:
    """What was written at or after a mark."""

    revisions: dict[str, int]  # automation id -> revision, of the rows updated (or added) since
    automations: int  # how many automation rows exist now (fewer than known: some were removed)
    woken: dict[str, int]  # automation id -> when its wake state was last written (microseconds), if since
    started: dict[tuple[str, str], int]  # (goal, agent) -> its latest start's anchor (microseconds), if since
    rules: frozenset[tuple[str, str, str, int]]  # every floor rule's scope and revision (a small table)


class ChangeFeed(Repository):
    """Reads ``Changes`` for a host's sync loop."""

    def since(self, mark: datetime) -> Changes:
        """Everything stamped at or after ``mark`` (an aware instant), in one read transaction."""
        a, w, t = s.automations, s.wake_state, s.starts
        # Stamps stay microseconds, undecoded: a damaged one is its automation's hold, not this read's.
        since = to_us(mark)
        stamp, anchor = type_coerce(w.c.updated_at_us, BigInteger), type_coerce(t.c.anchor_us, BigInteger)
        with self.store.read() as conn:
            revisions = {
                str(aid): _int(rev) for aid, rev in conn.execute(select(a.c.automation_id, a.c.revision).where(a.c.updated_at_us >= mark))
            }
            count = conn.execute(select(func.count()).select_from(a)).scalar_one()
            woken = {str(aid): _int(at) for aid, at in conn.execute(select(w.c.automation_id, stamp).where(stamp >= since))}
            # A trigger is a change of the automation's wake too (its own table: a turn's settlement never overwrites it).
            tr = s.triggers
            came = type_coerce(tr.c.at_us, BigInteger)
            for aid, at in conn.execute(select(tr.c.automation_id, func.max(came)).where(came >= since).group_by(tr.c.automation_id)):
                woken[str(aid)] = max(woken.get(str(aid), -1), _int(at))
            latest = select(t.c.goal_id, t.c.agent_id, func.max(anchor)).where(anchor >= since).group_by(t.c.goal_id, t.c.agent_id)
            started = {(str(goal), str(agent)): _int(at) for goal, agent, at in conn.execute(latest)}
            rules = _rules(conn)
        return Changes(revisions=revisions, automations=int(count), woken=woken, started=started, rules=rules)


def _rules(conn: Connection) -> frozenset[tuple[str, str, str, int]]:
    r = s.rules
    return frozenset(
        (str(g), str(a), str(x), _int(rev))
        for g, a, x, rev in conn.execute(select(r.c.goal_id, r.c.agent_id, r.c.automation_id, r.c.revision))
    )


def _int(value: object) -> int:
    """A stored integer as written, else ``DAMAGED``: the feed only says what to look at again, and
    a damaged value is a change to look at (planning it decodes the row and holds what is damaged)."""
    return value if type(value) is int else DAMAGED
