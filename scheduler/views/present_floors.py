"""JSON documents of floor settings (the console's API and settings page render the same ones)."""

from __future__ import annotations

from typing import Any

from floorgate.admission import Envelope
from floorgate.admission.intervals import format_interval

from ..app.floors import FloorApplied, FloorChange, FloorView, Inherited
from .present import eligibility_state_doc, envelope_bounds_doc, floor_doc, rule_doc
from .present_limits import limits_doc


def envelope_doc(e: Envelope, problem: str | None = None) -> dict[str, Any]:
    """A merged compute envelope and the scopes whose blocks made it (None fields: unbounded)."""
    return {**envelope_bounds_doc(e), "bounded": e.bounded, "problem": problem}


def inherited_doc(i: Inherited) -> dict[str, Any]:
    return {
        "scope": str(i.scope),
        "effective_floor": floor_doc(i.floor),
        "envelope": envelope_doc(i.envelope, i.envelope_problem),
        "eligibility": eligibility_state_doc(i.eligibility),
        "limits": limits_doc(i.limits),
    }


def floor_view_doc(v: FloorView) -> dict[str, Any]:
    """A target: its stored rule and revision, and what it and the agents below it inherit."""
    return {
        "scope": str(v.scope),
        "scope_kind": v.scope.kind.value,
        "revision": v.revision,
        "rule": rule_doc(v.rule) if v.rule is not None else None,
        # The stored rule's counts and budgets in one line (None: it carries none).
        "rule_limits": v.rule.limits.summary() if v.rule is not None and not v.rule.limits.is_empty() else None,
        "inherited": [inherited_doc(i) for i in v.below],
    }


def floor_change_doc(c: FloorChange) -> dict[str, Any]:
    """A previewed change: before -> after at a revision, and whether (and how) it reduces."""
    return {
        "scope": str(c.scope),
        "revision": c.revision,
        "before": format_interval(c.before) if c.before is not None else None,
        "after": format_interval(c.after),
        "before_seconds": c.before.total_seconds() if c.before is not None else None,
        "after_seconds": c.after.total_seconds(),
        "compute_before": c.compute_before.doc() if c.compute_before is not None else None,
        "compute_after": c.compute_after.doc() if c.compute_after is not None else None,
        "reduction": c.reduction,
        "reduction_what": c.reduction_what,
        "reduction_key": c.reduction_key,
        "effective": [{"scope": str(e.scope), "before": floor_doc(e.before), "after": floor_doc(e.after)} for e in c.effective],
    }


def floor_applied_doc(a: FloorApplied) -> dict[str, Any]:
    """An applied change, the rule written, the readback taken after it and whether they agree."""
    return {
        "change": floor_change_doc(a.change),
        "rule": rule_doc(a.rule),
        "readback": floor_view_doc(a.readback),
        "confirmed": a.confirmed,
    }
