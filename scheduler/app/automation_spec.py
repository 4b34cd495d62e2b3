"""An automation's spec as a document (a JSON body, a table of an apply file) and back.

One decoder, ``spec_from_doc``, for every surface that takes a whole automation at once (the
console's ``PUT /api/automations/{id}``, ``floorgate apply``): the same checks as the CLI's
``automation add`` (a command that exists and runs, a schedule that fires again, no credential
passed through), each refusal one ``InvalidInput`` naming the document's field. ``spec_doc`` is
its inverse: ``spec_from_doc(spec_doc(spec)) == spec``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from floorgate.admission import AutomationSpec, CatchUp, CommandHost, Debounce, InvalidInput, MeterKind, Overlap, TimerKind, WhenDenied
from floorgate.admission.automations import DEFAULT_HOLD_AFTER, MAX_CATCH_UP_WINDOW, MAX_DEBOUNCE, MAX_HOLD_AFTER, check_labels
from floorgate.admission.intervals import format_interval, parse_duration, parse_interval
from floorgate.hosts.registry import capabilities
from floorgate.scheduler.app.automations import AutomationService

DEFAULT_TIMEOUT_SECONDS = 600.0
# field -> what it holds (the API's schema and the apply file's documentation read this)
FIELDS: dict[str, str] = {
    "goal": "goal id (required)",
    "agent": "agent id within the goal (required)",
    "schedule": "RRULE fragment or friendly form, e.g. 'daily at 09:00 Europe/Berlin' (required)",
    "command": "the program and its arguments, a list of strings (required unless timer is external)",
    "cwd": "absolute working directory of the command",
    "env": "names of environment variables to pass through, a list",
    "timeout": "how long a turn may run, e.g. 10m (default 10m)",
    "timer": "apscheduler (default), crontab or external",
    "overlap": "skip (default) or allow",
    "when_denied": "wait (default: a fire a floor denies waits for the floor's end) or skip (to the next fire the floors admit)",
    "meter": "none (default), claude-stream-json, codex-json or jsonl",
    "model": "the model the host is configured to use",
    "backend": "the model backend the host uses",
    "external_id": "your own id for it (a fleet's deduplication key)",
    "labels": "name -> value strings, e.g. {team = 'search'}",
    "hold_after": f"hold it after this many consecutive failed turns, 0..{MAX_HOLD_AFTER} (default {DEFAULT_HOLD_AFTER}; 0: never)",
    "catch_up": "after downtime: skip missed fires, or run the latest (default: the deployment's)",
    "catch_up_window": "how old a missed fire may be to catch up, 0..7d, e.g. 2h (default: the deployment's)",
    "debounce": "QUIET[,MAX_WAIT]: a burst of triggers wakes it once, QUIET after the last, at most MAX_WAIT after the first, e.g. 30s,5m",
}


def parse_debounce(text: str, field: str) -> Debounce | None:
    """``QUIET[,MAX_WAIT]`` (``none``: no debounce, a trigger wakes at once); each 0..1d, MAX_WAIT at
    least QUIET. Anything else is one ``InvalidInput`` naming ``field``."""
    if not isinstance(text, str):
        raise InvalidInput(field, "must be a string, e.g. 30s,5m")
    if text.strip().lower() == "none":
        return None
    parts = text.split(",")
    if len(parts) > 2:
        raise InvalidInput(field, f"{text!r} has more than two parts; give QUIET[,MAX_WAIT], e.g. 30s,5m")
    quiet = parse_interval(parts[0], field)
    max_wait = parse_interval(parts[1], field) if len(parts) == 2 else None
    for value in (quiet, max_wait):
        if value is not None and value > MAX_DEBOUNCE:
            raise InvalidInput(field, f"{text!r}: each part is at most 1d")
    if max_wait is not None and max_wait < quiet:
        raise InvalidInput(field, f"{text!r}: MAX_WAIT is shorter than QUIET; give a MAX_WAIT of at least {parts[0].strip()}")
    return Debounce(quiet=quiet, max_wait=max_wait)


def debounce_text(debounce: Debounce) -> str:
    """The text ``parse_debounce`` reads back as ``debounce``."""
    quiet = format_interval(debounce.quiet).replace(" ", "") if debounce.quiet else "0"
    if debounce.max_wait is None:
        return quiet
    return quiet + "," + (format_interval(debounce.max_wait).replace(" ", "") if debounce.max_wait else "0")


def check_program(host: CommandHost) -> None:
    """Refuse a program path that does not exist or cannot run from the automation's directory
    (every fire would fail, each a paid attempt's worth of retries and alarms). A bare name is
    looked up on the host's PATH when it runs, which may differ from this shell's: only a warning."""
    program = host.argv[0]
    if "/" not in program:
        if shutil.which(program) is None:
            sys.stderr.write(
                f"floorgate: warning: argv: {program!r} is not on this shell's PATH; the timer host must find it on its own PATH "
                "(give its full path to be sure)\n"
            )
        return
    if host.cwd is None and not os.path.isabs(program):
        return  # no recorded directory to resolve it from (an old spec): the host's own
    path = os.path.join(host.cwd or "", program)
    where = f" in {host.cwd} (the directory the automation runs in)" if not os.path.isabs(program) else ""
    if not os.path.exists(path):
        raise InvalidInput("argv", f"program {program!r} does not exist{where}; give its path from there, or --cwd DIR")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise InvalidInput(
            "argv", f"program {program!r}{where} is not executable: chmod +x it, or run it through its interpreter (-- sh {program})"
        )


def doc_text(doc: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    """The string ``name`` of a document (None when absent and not ``required``); anything else
    is one ``InvalidInput`` naming the field. The API's bodies read their strings with it too."""
    value = doc.get(name)
    if value is None:
        if required:
            raise InvalidInput(name, "is required")
        return None
    if not isinstance(value, str):
        raise InvalidInput(name, "must be a string")
    return value


def _strings(doc: Mapping[str, Any], name: str) -> tuple[str, ...] | None:
    value = doc.get(name)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(name, 'must be a list of strings, e.g. ["./triage.sh", "--inbox"]')
    return tuple(value)


def _choice(doc: Mapping[str, Any], name: str, kind: type, default: str) -> str:
    value = doc_text(doc, name)
    if value is None:
        return default
    choices = [m.value for m in kind]  # type: ignore[attr-defined]
    if value not in choices:
        raise InvalidInput(name, f"{value!r} is not one of {', '.join(choices)}")
    return value


def spec_from_doc(doc: Mapping[str, Any], service: AutomationService, *, base_dir: str | None = None) -> AutomationSpec:
    """The spec ``doc`` describes, checked as ``automation add`` checks it (writes nothing).
    A relative ``cwd`` is resolved against ``base_dir`` (an apply file's directory), else refused."""
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field of an automation; use {', '.join(FIELDS)}")
    timer = _choice(doc, "timer", TimerKind, TimerKind.APSCHEDULER.value)
    schedule_text = doc_text(doc, "schedule", required=True) or ""
    try:
        schedule = service.parse_schedule(schedule_text)
    except InvalidInput as exc:
        raise _renamed(exc, "schedule") from None
    except ValueError as exc:
        message = str(exc)
        raise InvalidInput("schedule", message.removeprefix("schedule: ")) from None
    argv = _strings(doc, "command")
    host: CommandHost | None = None
    if argv is None:
        if capabilities(timer).launches_turns:
            raise InvalidInput("command", 'give the program and its arguments, e.g. command = ["./triage.sh", "--inbox"]')
    else:
        cwd = doc_text(doc, "cwd")
        if cwd is not None and not os.path.isabs(cwd):
            if base_dir is None:
                raise InvalidInput("cwd", "give an absolute directory")
            cwd = os.path.normpath(os.path.join(base_dir, cwd))
        if cwd is None and "/" in argv[0] and not os.path.isabs(argv[0]):
            raise InvalidInput("cwd", f"the program {argv[0]!r} is relative: give the absolute directory it runs in (cwd)")
        timeout = doc_text(doc, "timeout")
        seconds = parse_duration(timeout, "timeout").total_seconds() if timeout is not None else DEFAULT_TIMEOUT_SECONDS
        values = {"argv": argv, "cwd": cwd, "env_allow": _strings(doc, "env") or (), "timeout_seconds": seconds}
        try:
            host = CommandHost.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            names = {"timeout_seconds": "timeout", "argv": "command", "cwd": "cwd", "env_allow": "env"}
            raise InvalidInput(names.get(str(first["loc"][0]) if first["loc"] else "", "command"), first["msg"]) from None
        try:
            check_program(host)
        except InvalidInput as exc:
            raise _renamed(exc, "command") from None
    labels = doc.get("labels")
    try:
        spec = AutomationSpec(
            goal_id=doc_text(doc, "goal", required=True),
            agent_id=doc_text(doc, "agent", required=True),
            schedule=schedule,
            host=host,
            model=doc_text(doc, "model"),
            overlap=_choice(doc, "overlap", Overlap, Overlap.SKIP.value),
            timer=timer,
            backend=doc_text(doc, "backend"),
            meter=_choice(doc, "meter", MeterKind, MeterKind.NONE.value),
            when_denied=_choice(doc, "when_denied", WhenDenied, WhenDenied.WAIT.value),
            external_id=doc_text(doc, "external_id"),
            labels=check_labels(labels) if labels is not None else (),
            debounce=parse_debounce(text, "debounce") if (text := doc_text(doc, "debounce")) is not None else None,
            **_failure_fields(doc),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidInput(str(first["loc"][0]) if first["loc"] else "automation", first["msg"]) from None
    try:
        service.check(spec)
    except InvalidInput as exc:  # the CLI's flags, named as this document's fields
        raise _renamed(exc, _FLAG_FIELDS.get(exc.field, exc.field)) from None
    return spec


def _failure_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``hold_after``, ``catch_up`` and ``catch_up_window``, checked as the CLI's flags are (an
    absent one: the default), each refusal naming the document's field."""
    hold_after = doc.get("hold_after")
    if hold_after is not None and (type(hold_after) is not int or not 0 <= hold_after <= MAX_HOLD_AFTER):
        raise InvalidInput("hold_after", f"{hold_after!r} is not a whole number 0..{MAX_HOLD_AFTER} (0: never hold)")
    text = doc_text(doc, "catch_up_window")
    window = parse_interval(text, "catch_up_window") if text is not None else None
    if window is not None and window > MAX_CATCH_UP_WINDOW:
        raise InvalidInput("catch_up_window", f"{text!r} is longer than 7d; give 0..7d")
    catch_up = _choice(doc, "catch_up", CatchUp, "") or None
    if catch_up == CatchUp.LATEST.value and window is not None and not window:
        raise InvalidInput("catch_up_window", "catch_up latest needs a window above 0 (or catch_up skip)")
    return {"hold_after": hold_after, "catch_up": catch_up, "catch_up_window": window}


_FLAG_FIELDS = {"--schedule": "schedule", "--env": "env", "argv": "command", "--timeout": "timeout", "--cwd": "cwd"}


def _renamed(exc: InvalidInput, field: str) -> InvalidInput:
    """``exc`` naming ``field`` instead (its message without the old field's prefix)."""
    message = str(exc)
    prefix = f"{exc.field}: "
    return InvalidInput(field, message[len(prefix) :] if message.startswith(prefix) else message)


def spec_doc(spec: AutomationSpec) -> dict[str, Any]:
    """``spec`` as the document ``spec_from_doc`` reads (defaults and empty values left out)."""
    doc: dict[str, Any] = {"goal": spec.goal_id, "agent": spec.agent_id, "schedule": spec.schedule}
    if spec.host is not None:
        doc["command"] = list(spec.host.argv)
        if spec.host.cwd is not None:
            doc["cwd"] = spec.host.cwd
        if spec.host.env_allow:
            doc["env"] = list(spec.host.env_allow)
        if spec.host.timeout_seconds != DEFAULT_TIMEOUT_SECONDS:
            doc["timeout"] = _duration(spec.host.timeout_seconds)
    for name, value, default in (
        ("timer", spec.timer.value, TimerKind.APSCHEDULER.value),
        ("overlap", spec.overlap.value, Overlap.SKIP.value),
        ("meter", spec.meter.value, MeterKind.NONE.value),
        ("when_denied", spec.when_denied.value, WhenDenied.WAIT.value),
    ):
        if value != default:
            doc[name] = value
    for name, text in (("model", spec.model), ("backend", spec.backend), ("external_id", spec.external_id)):
        if text is not None:
            doc[name] = text
    if spec.labels:
        doc["labels"] = dict(spec.labels)
    if spec.hold_after is not None:
        doc["hold_after"] = spec.hold_after
    if spec.catch_up is not None:
        doc["catch_up"] = spec.catch_up.value
    if spec.catch_up_window is not None:
        doc["catch_up_window"] = format_interval(spec.catch_up_window).replace(" ", "")
    if spec.debounce is not None:
        doc["debounce"] = debounce_text(spec.debounce)
    return doc


def _duration(seconds: float) -> str:
    """A timeout as ``parse_duration`` reads it back exactly (whole seconds as an interval, else seconds)."""
    from datetime import timedelta

    if seconds == int(seconds):
        return format_interval(timedelta(seconds=int(seconds))).replace(" ", "")
    return f"{seconds}s"
