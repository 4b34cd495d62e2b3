"""The console API's whole-automation writes: ``PUT /api/automations/{id}`` creates or replaces one
(idempotent by id: the same body twice writes once), ``DELETE`` removes it; ``POST .../trigger``
wakes it for new work (idempotent by the body's ``id``).

A body is the document ``automation_spec.spec_from_doc`` reads, checked as ``automation add``
checks it (one error naming the field, nothing written). Changing an existing automation needs
the ``revision`` the caller read: the write happens only at exactly that revision (409 with the
current one otherwise); a body equal to what is stored writes nothing, whatever its revision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from floorgate.admission import AutomationConflict, InvalidInput, Principal
from floorgate.admission.scope import check_id
from floorgate.scheduler.app.automation_spec import FIELDS, doc_text, spec_from_doc
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.views.present import automation_doc, readback_doc
from floorgate.scheduler.views.present_automation import trigger_doc


@dataclass(frozen=True)
class Created:
    """A handler's answer for a resource it created (201)."""

    doc: dict[str, Any]


BODY: dict[str, tuple[str, bool, str]] = {
    **{name: ("array" if name in ("command", "env") else "object" if name == "labels" else "string", name in ("goal", "agent", "schedule"), d)
       for name, d in FIELDS.items()},
    "revision": ("integer", False, "the revision you read; required to change an existing automation (0 or absent: create)"),
}  # fmt: skip


def _revision(body: dict[str, Any]) -> int | None:
    value = body.get("revision")
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise InvalidInput("revision", "must be a whole number: the revision you read (0 to create)")
    return value


def put(fg: Floorgate, p: Principal, r: Request, b: dict[str, Any]) -> Any:
    """Create the automation, or change it at exactly the revision sent; unchanged writes nothing."""
    aid = check_id(r.path_params["automation"], "automation")
    result, doc = save(fg, aid, {k: v for k, v in b.items() if k != "revision"}, _revision(b))
    return Created(doc) if result == "created" else doc


def save(fg: Floorgate, aid: str, body: dict[str, Any], revision: int | None) -> tuple[str, dict[str, Any]]:
    """Create ``aid`` from the document ``body``, or change it at exactly ``revision``: (created,
    changed or unchanged; the automation's document). The API's PUT and the console's forms."""
    spec = spec_from_doc(body, fg.automations)
    service = fg.automations
    if not service.repo.exists(aid):
        if revision not in (None, 0):
            raise InvalidInput("revision", f"automation {aid!r} does not exist; send revision 0 (or none) to create it")
        done = service.add(aid, spec)
        return "created", {**automation_doc(done.automation), "result": "created", "readback": readback_doc(done.readback)}
    current = service.get(aid)
    if current.spec == spec:
        return "unchanged", {**automation_doc(current), "result": "unchanged"}
    if revision is None:
        raise InvalidInput("revision", f"automation {aid!r} exists at revision {current.revision}; send that revision to change it")
    if revision != current.revision:
        raise AutomationConflict(aid, revision, current.revision)
    done = service.edit(aid, spec, expected_revision=revision)
    return "changed", {**automation_doc(done.automation), "result": "changed", "readback": readback_doc(done.readback)}


def delete(fg: Floorgate, p: Principal, r: Request, b: dict[str, Any]) -> Any:
    """Remove the automation (its timer line first; its starts and turns are kept). It always goes:
    ``delete_by_hand`` names an armed line the host could not confirm removing (else null);
    ``running``, its turns still running (removing stops none)."""
    aid = check_id(r.path_params["automation"], "automation")
    removed = fg.automations.remove(aid)
    return {"removed": aid, "delete_by_hand": removed.delete_by_hand, "running": list(removed.running)}


TRIGGER_BODY: dict[str, tuple[str, bool, str]] = {
    "key": ("string", False, "what the work is about (shown in the event), one line"),
    "id": ("string", False, "your id for this trigger: the same id twice is one trigger (repeated: true)"),
}


def trigger(fg: Floorgate, p: Principal, r: Request, b: dict[str, Any]) -> Any:
    """New work: one pending wake after the automation's debounce; floors and budgets decide it as
    any automatic start. A repeated ``id`` records nothing and says so (``repeated``)."""
    aid = check_id(r.path_params["automation"], "automation")
    unknown = sorted(set(b) - set(TRIGGER_BODY))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field of a trigger; use {', '.join(TRIGGER_BODY)}")
    answer = fg.automations.trigger(aid, key=doc_text(b, "key"), trigger_id=doc_text(b, "id"))
    return trigger_doc(answer)
