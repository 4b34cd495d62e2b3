"""``floorgate usage`` rendered: a ledger row and a state's total as JSON (exact instants, amounts as
decimal text) and as text (instants to the second, UTC)."""

from __future__ import annotations

from typing import Any

from floorgate.admission.clock import iso
from floorgate.admission.usage import UsageState
from floorgate.admission.windows import format_usd, micros_to_usd

from ..app.usage_ledger import CostBasis, LedgerPage, LedgerRow, StateTotal
from .present import lane_keys, past_second, table

HEADERS = ("AT", "TURN", "LANE", "STATE", "TOKENS", "USD", "MODEL", "SOURCE")


def _usd(micros: int) -> str:
    return format(micros_to_usd(micros).normalize(), "f")


def ledger_row_doc(row: LedgerRow) -> dict[str, Any]:
    """One entry as JSON: ``tokens`` as reported (None while held or unknown), the estimate held,
    and ``usd`` with its ``usd_basis`` (reported, priced, unpriced: ``usd`` None)."""
    e = row.entry
    return {
        "at": iso(e.at),
        "turn": e.turn_id,
        **lane_keys(e),
        "state": e.state.value,
        "tokens": e.tokens,
        "estimate_tokens": e.estimate_tokens,
        "counted_tokens": e.counted_tokens,
        "usd": _usd(row.usd_micros) if row.usd_micros is not None else None,
        "usd_basis": row.basis.value,
        "model": e.model,
        "source": e.source.value,
    }


def ledger_row_cells(row: LedgerRow) -> tuple[object, ...]:
    """One entry as a table row: tokens as reported, else ``est N``; USD as reported, else priced
    at the owner's price (marked ``(priced)``), else ``unpriced``."""
    e = row.entry
    settled = e.state is UsageState.SETTLED and e.tokens is not None
    tokens = str(e.tokens) if settled else f"est {e.counted_tokens}"
    if row.usd_micros is None:
        usd = "unpriced"
    else:
        usd = format_usd(micros_to_usd(row.usd_micros)) + (" (priced)" if row.basis is CostBasis.PRICED else "")
    lane = f"{e.goal_id}/{e.agent_id}" + (f"/{e.automation_id}" if e.automation_id else "")  # a lane without an automation: goal/agent
    return (past_second(e.at), e.turn_id, lane, e.state.value, tokens, usd, e.model, e.source.value)


def total_doc(total: StateTotal) -> dict[str, Any]:
    """A state's total as JSON: ``usd`` sums the priced turns; ``unpriced_turns`` are left out of it."""
    return {
        "state": total.state.value,
        "turns": total.turns,
        "tokens": total.tokens,
        "usd": _usd(total.usd_micros),
        "unpriced_turns": total.unpriced,
    }


def total_line(total: StateTotal) -> str:
    """``total settled: 3 turns, 4200 tokens, $0.12`` (``est`` tokens when held; unpriced turns named)."""
    est = "" if total.state is UsageState.SETTLED else "est "
    unpriced = f" (+{total.unpriced} unpriced)" if total.unpriced else ""
    turns = "turn" if total.turns == 1 else "turns"
    return f"total {total.state.value}: {total.turns} {turns}, {est}{total.tokens} tokens, {format_usd(micros_to_usd(total.usd_micros))}{unpriced}"


def ledger_doc(page: LedgerPage) -> dict[str, Any]:
    """The page as one JSON document."""
    return {
        "entries": [ledger_row_doc(r) for r in page.rows],
        "totals": [total_doc(t) for t in page.totals],
        "since": iso(page.since),
        "limit": page.limit,
    }


def ledger_text(page: LedgerPage) -> str:
    """The page as a table, newest first, then one total line per state."""
    if not page.rows:
        return "no usage recorded" + (f" since {past_second(page.since)}" if page.since is not None else "")
    lines = [table(HEADERS, [ledger_row_cells(r) for r in page.rows])]
    lines += [total_line(t) for t in page.totals]
    if len(page.rows) == page.limit:
        lines.append(f"(the newest {page.limit}; --limit N or --since for more or fewer)")
    return "\n".join(lines)
