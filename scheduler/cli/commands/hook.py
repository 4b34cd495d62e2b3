"""``floorgate hook user-prompt-submit``: a pre-model admission hook for agent CLIs.

Claude Code and Codex run UserPromptSubmit hooks as commands with a JSON object on stdin and
block the prompt when the command exits with code 2, showing its stderr. This hook reserves an
admission for the named lane: admitted, it confirms the start and exits 0 (the model wakes);
denied, it exits 2 with the exact next eligible time. It fails closed: an unreadable payload,
store or state blocks the prompt. Whether the wake is automatic or manual comes from the host's
configuration (--wake), never from the prompt text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from floorgate.admission import FloorgateError, InvalidInput
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval, parse_interval

from ...app.owner_gate import Access
from ...runtime._proc_start import hook_age
from ...runtime.turn_wire import Op, ask, credential_from, tool_call_refusal, tool_refused
from ..context import EXIT_OK, EXIT_UNAVAILABLE, Context, actions, add_common
from . import _hook_serve

EXIT_ALLOW = 0
EXIT_BLOCK = 2  # what Claude Code and Codex read as "block this prompt"
# Claude Code kills a UserPromptSubmit hook after 30 s unless its "timeout" says otherwise, and a
# killed hook lets the prompt through: the wait stays well inside that.
DEFAULT_PROMPT_WAIT = timedelta(seconds=20)
MAX_PROMPT_WAIT = timedelta(seconds=25)
# Claude Code's default hook timeout, the shortest of the supported apps': what a hook assumes when
# its command does not say (installed hooks do, with --hook-timeout).
DEFAULT_HOOK_TIMEOUT = timedelta(seconds=30)


def deadline_of(timeout: timedelta) -> timedelta:
    """When the hook blocks on its own: a little before the app would kill it (and let it through)."""
    margin = max(timedelta(seconds=1), min(timedelta(seconds=5), timeout / 10))
    return timeout - margin


def register(sub: argparse._SubParsersAction) -> None:
    hsub = actions(sub, "hook", "hooks for agent CLIs (Claude Code, Codex): admission before the model wakes", metavar="EVENT")
    p = hsub.add_parser("user-prompt-submit", help="admit or block a prompt (JSON on stdin); exit 0 allow, 2 block")
    p.add_argument("--goal", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--automation", required=True)
    p.add_argument("--wake", required=True, choices=["automatic", "manual"], help="set by the host's configuration, not by the prompt")
    p.add_argument("--manual-reason", help="required with --wake manual")
    p.add_argument(
        "--wait-eligible",
        default=format_interval(DEFAULT_PROMPT_WAIT),
        metavar="DURATION",
        help=f"if the floor opens within this long, wait and admit instead of blocking (default {format_interval(DEFAULT_PROMPT_WAIT)}, "
        f"at most {format_interval(MAX_PROMPT_WAIT)}; the hook's timeout in the agent app must be longer)",
    )
    _add_hook_timeout(p)
    add_common(p)  # --db means the same before and after the subcommand
    p.set_defaults(handler=_user_prompt_submit, raw_handler=True, access=Access.OPERATE)

    _register_install(hsub)
    _hook_serve.register(hsub, ServedHooks())

    p = hsub.add_parser("stop", help="record the usage of the app turn that just ended (Claude Code's Stop hook); never blocks")
    p.add_argument("--goal", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--automation", required=True)
    p.add_argument("--app", choices=["claude", "codex"], default="claude", help="whose transcript the payload names")
    _add_hook_timeout(p)
    add_common(p)
    p.set_defaults(handler=_stop_hook, raw_handler=True, access=Access.OPERATE)

    p = hsub.add_parser("pre-tool-use", help="count a tool call against the mission's max_tool_calls; exit 0 allow, 2 refuse")
    p.add_argument("--mission", help="mission id (default $FLOORGATE_MISSION_ID, set for the host by 'floorgate turn run')")
    _add_hook_timeout(p)
    add_common(p)
    p.set_defaults(handler=_pre_tool_use, raw_handler=True, access=Access.OPERATE)


def _add_hook_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hook-timeout",
        default=format_interval(DEFAULT_HOOK_TIMEOUT),
        metavar="DURATION",
        help="the agent app's timeout for this hook: floorgate blocks on its own just before it, since a hook the app kills "
        f"lets the prompt through (default {format_interval(DEFAULT_HOOK_TIMEOUT)})",
    )


def _hook_timeout(args: argparse.Namespace) -> timedelta:
    timeout = parse_interval(args.hook_timeout, "--hook-timeout")
    if timeout < timedelta(seconds=2):
        raise InvalidInput("--hook-timeout", "at least 2s: give the agent app's timeout for this hook")
    return timeout


@contextlib.contextmanager
def _deadline(
    timeout: timedelta, failed: str, age: Callable[[], timedelta] = hook_age, *, code: int = EXIT_BLOCK, then: str = ""
) -> Iterator[None]:
    """Exit ``code`` (a block by default) with a line on stderr, ``failed`` and why, ``then`` after
    it, when no answer is ready just before the app's timeout: a store that never answers (an
    unreachable PostgreSQL host) must not outlive the hook's timeout, which lets the prompt
    through. The app's clock started with this process, so its ``age`` (start-up, imports) is
    spent already."""
    after = deadline_of(timeout)

    def expire() -> None:
        # Only this exit can race the answer: any answer but a block would come from the main
        # thread's exit, which os._exit pre-empts (for the prompt hook, a late admission is then a start that did not run).
        os.write(
            2,
            f"floorgate: {failed}: no answer after {format_interval(after)}, just inside the "
            f"app's {format_interval(timeout)} hook timeout (is the store reachable?){then}\n".encode(),
        )
        os._exit(code)

    timer = threading.Timer(max(0.0, (after - age()).total_seconds()), expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _why(exc: BaseException) -> str:
    """One line: floorgate's own errors say what to fix; anything else is named by its type."""
    if isinstance(exc, (KeyboardInterrupt, _Signalled)):
        return f"interrupted ({exc or 'SIGINT'}) before the admission answered"
    if isinstance(exc, (FloorgateError, OSError)):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"internal error {type(exc).__name__}"


class _Signalled(BaseException):
    """The hook was told to stop (SIGTERM, SIGHUP) before it answered."""


@contextlib.contextmanager
def _answering() -> Iterator[None]:
    """While the hook works, a termination signal is a failure like any other: it blocks (a
    process killed by its default handler exits 143, which an agent app reads as "go ahead")."""

    def stop(signum: int, _frame: object) -> None:
        raise _Signalled(signal.Signals(signum).name)

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    saved = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


# How a served hook opens its store: from its arguments and its caller's environment.
OpenApp = Callable[[argparse.Namespace, Mapping[str, str]], object]


@dataclass(frozen=True)
class Call:
    """What one hook call reads and writes besides its arguments: this process's own by default;
    a hook server's request carries the calling hook's (``floorgate hook serve``)."""

    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    stdin: TextIO | None = None  # None: sys.stdin, read when the hook runs
    err: TextIO | None = None  # None: sys.stderr
    open_app: OpenApp | None = None  # None: open the store for this call

    def app(self, args: argparse.Namespace):  # type: ignore[no-untyped-def]
        """The services over the hook's store; the caller closes it when ``owns_app``."""
        return _app(args) if self.open_app is None else self.open_app(args, self.env)

    @property
    def owns_app(self) -> bool:
        return self.open_app is None


_OWN = Call()


def _block(message: str, call: Call = _OWN) -> int:
    err = call.err or sys.stderr
    err.write(message.rstrip() + "\n")
    err.flush()
    return EXIT_BLOCK


def read_payload(stream=None) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """The hook's JSON object from stdin; anything else is refused (fail closed)."""
    text = (stream or sys.stdin).read()
    try:
        payload = json.loads(text) if text.strip() else None
    except (json.JSONDecodeError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        raise InvalidInput("stdin", "expected the hook's JSON object on standard input")
    return payload


def _app(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from ...app.root import Floorgate, Settings

    return Floorgate.open(Settings.resolve(db=args.db), create=False)  # a hook never creates a store: it blocks


def _blocking(args: argparse.Namespace, refused: str, what: str, work: Callable[[argparse.Namespace, timedelta], int]) -> int:
    """Run a hook that may block: a bad --hook-timeout, a termination signal or its own deadline
    block like any other failure (``refused`` and ``what`` name the block on stderr)."""
    with _answering():
        try:
            timeout = _hook_timeout(args)
        except FloorgateError as exc:
            return _block(f"floorgate: {refused} (fail closed): {_why(exc)}")
        with _deadline(timeout, f"{what} blocked (fail closed)"):
            return work(args, timeout)


def _user_prompt_submit(args: argparse.Namespace) -> int:
    return _blocking(args, "blocked", "prompt", _admit_prompt)


class ServedHooks:
    """The decision code a hook server answers with (``runtime.hook_server.HookDecider``): the
    same parsing and ``answer`` as the hook run in-process."""

    def parse(self, argv: list[str]) -> argparse.Namespace | None:
        from ...runtime import hook_wire
        from ..context import UsageError
        from ..entry import served_event
        from ..main import build_parser

        if "--" in argv or served_event(argv) is None:
            return None
        try:
            args = build_parser(argv).parse_args(argv)
        except (UsageError, SystemExit):
            return None  # the in-process hook names the error
        return args if getattr(args, "hook_command", None) in hook_wire.SERVED_EVENTS else None

    def answer(self, args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO, err: TextIO, open_app: OpenApp) -> int:
        return answer(args, Call(env=env, stdin=stdin, err=err, open_app=open_app))


def answer(args: argparse.Namespace, call: Call) -> int:
    """A served hook's exit code (its stderr written to ``call.err``): the same decision code as
    the hook run in-process, without the process's own signal handlers and deadline (the calling
    hook keeps its deadline and blocks on it)."""
    if args.hook_command == "stop":
        return _stop(args, call)
    refused, work = ("blocked", _admit_prompt) if args.hook_command == "user-prompt-submit" else ("tool call refused", _count_tool_call)
    try:
        timeout = _hook_timeout(args)
    except FloorgateError as exc:
        return _block(f"floorgate: {refused} (fail closed): {_why(exc)}", call)
    return work(args, timeout, call)


def _admit_prompt(args: argparse.Namespace, timeout: timedelta, call: Call = _OWN) -> int:
    try:
        payload = read_payload(call.stdin)
        if args.wake == "manual" and not (args.manual_reason and args.manual_reason.strip()):
            raise InvalidInput("--manual-reason", "a manual wake needs an explicit reason in the hook's configuration")
        manual = args.manual_reason.strip() if args.wake == "manual" else None
        wait = parse_interval(args.wait_eligible, "--wait-eligible")
        if wait > MAX_PROMPT_WAIT:
            raise InvalidInput(
                "--wait-eligible",
                f"at most {format_interval(MAX_PROMPT_WAIT)} (the agent app kills a slow hook and lets the prompt through)",
            )
        if wait >= deadline_of(timeout):
            raise InvalidInput("--wait-eligible", "must end before the hook's own deadline: raise --hook-timeout (and the app's timeout)")
        credential = credential_from(call.env)
        if credential is not None:  # a managed turn: its runner answers, for that turn only
            said = ask(credential, Op.ADMIT_PROMPT, {"automation": args.automation}, timeout=deadline_of(timeout).total_seconds())
            return (
                EXIT_ALLOW if said.allow else _block(f"floorgate: {args.goal}/{args.agent}/{args.automation} blocked: {said.reason}", call)
            )
        app = call.app(args)
        try:
            said = app.hooks.admit_prompt(
                goal=args.goal,
                agent=args.agent,
                automation=args.automation,
                manual_reason=manual,
                session_id=payload.get("session_id"),
                wait=wait,
                managed_turn=call.env.get("FLOORGATE_TURN_ID") or None,
            )
        finally:
            if call.owns_app:
                app.close()
    except BaseException as exc:  # a pre-model boundary blocks on every failure, its own and an interruption included
        return _block(f"floorgate: blocked (fail closed): {_why(exc)}", call)
    decision = said.decision
    if not said.recorded:
        (call.err or sys.stderr).write("floorgate: note: this answer could not be recorded; readback will not claim the pre-model hook\n")
    if said.admitted or decision is None:
        return EXIT_ALLOW
    # No next eligible time (a limit no window frees, an unreadable state): what its check says ends
    # it. Imported here: the table loads the store's modules, which the tool hook never needs.
    from floorgate.admission.decide.checks import until

    when = iso(decision.next_eligible_at) if decision.next_eligible_at is not None else until(decision.reason)
    rb = said.readback
    then = f"; its next fire that may run: {iso(rb.next_fire_at)}" if rb is not None and rb.next_fire_at is not None else ""
    return _block(
        f"floorgate: {args.goal}/{args.agent}/{args.automation} may not wake the model before {when} "
        f"({decision.reason.value}: {decision.detail}){then}",
        call,
    )


EXIT_NOT_RECORDED = 1  # any exit but 2: the app ends the turn as it would (exit 2 would make it go on)


def _stop_hook(args: argparse.Namespace) -> int:
    """``hook stop`` in its own process: a bad --hook-timeout, and a store that does not answer
    before the hook's own deadline (a little before the app's timeout, as the other hooks), are
    "not recorded" (exit 1), never a block."""
    try:
        timeout = _hook_timeout(args)
    except FloorgateError as exc:
        sys.stderr.write(f"floorgate: turn usage not recorded: {_why(exc)}\n")
        return EXIT_NOT_RECORDED
    with _deadline(timeout, "turn usage not recorded", code=EXIT_NOT_RECORDED, then="; its estimate stays held"):
        return _stop(args)


def _stop(args: argparse.Namespace, call: Call = _OWN) -> int:
    """Record the ended turn's usage for the lane (idempotent). Inside a managed turn its meter
    records it, so this does nothing. A failure says so on stderr and exits 1, never 2."""
    err = call.err or sys.stderr
    try:
        payload = read_payload(call.stdin)
        if call.env.get("FLOORGATE_TURN_ID") or credential_from(call.env) is not None:
            return EXIT_OK
        app = call.app(args)
        try:
            entry, _changed, problem = app.hooks.record_turn_usage(
                goal=args.goal, agent=args.agent, automation=args.automation, payload=payload, app=args.app
            )
        finally:
            if call.owns_app:
                app.close()
    except BaseException as exc:  # the estimate its admission held stays held: conservative
        err.write(f"floorgate: turn usage not recorded: {_why(exc)}\n")
        return EXIT_NOT_RECORDED
    if problem is not None:
        counts = f"{entry.estimate_tokens} tokens, the lane's estimate," if entry.estimate_tokens else "the lane's estimate (none is set)"
        err.write(f"floorgate: turn usage unknown ({problem}); {counts} count against its budgets in its place\n")
    return EXIT_OK


def _pre_tool_use(args: argparse.Namespace) -> int:
    return _blocking(args, "tool call refused", "tool call", _count_tool_call)


def _count_tool_call(args: argparse.Namespace, timeout: timedelta, call: Call = _OWN) -> int:
    try:
        payload = read_payload(call.stdin)
        mission_id = args.mission or call.env.get("FLOORGATE_MISSION_ID")
        credential = credential_from(call.env)
        if credential is not None:  # a managed turn: its runner counts, against that turn's mission only
            refusal = tool_call_refusal(credential, mission_id, timeout=deadline_of(timeout).total_seconds())
        elif not mission_id:
            return EXIT_ALLOW  # not inside a floorgate mission: nothing to bound
        else:
            app = call.app(args)
            try:
                refusal = app.hooks.count_tool_call(mission_id)
            finally:
                if call.owns_app:
                    app.close()
    except BaseException as exc:  # refuse on every failure, its own and an interruption included
        return _block(f"floorgate: tool call refused (fail closed): {_why(exc)}", call)
    if refusal is None:
        return EXIT_ALLOW
    return _block(tool_refused(payload, refusal), call)


def _register_install(hsub: argparse._SubParsersAction) -> None:
    def where(p: argparse.ArgumentParser) -> None:
        p.add_argument("client", choices=["claude", "codex"], help="the agent app: Claude Code or Codex")
        group = p.add_mutually_exclusive_group()
        group.add_argument(
            "--project",
            metavar="DIR",
            help="the agent's project: DIR/.claude/settings.json or DIR/.codex/hooks.json (default: the current directory)",
        )
        group.add_argument(
            "--user", action="store_true", help="the user's settings (~/.claude/settings.json, $CODEX_HOME/hooks.json): every project"
        )
        add_common(p)

    p = hsub.add_parser(
        "install", help="write floorgate's prompt, tool and end-of-turn hooks into the agent app's settings (merged; idempotent)"
    )
    where(p)
    p.add_argument("--goal", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--automation", required=True)
    p.add_argument("--wake", required=True, choices=["automatic", "manual"], help="automatic: the prompts are scheduled wakes")
    p.add_argument("--manual-reason", help="required with --wake manual")
    p.add_argument("--wait-eligible", default=format_interval(DEFAULT_PROMPT_WAIT), metavar="DURATION", help="the prompt hook's wait")
    p.add_argument("--floorgate", metavar="PATH", help="the floorgate executable the hooks run (default: this installation's)")
    p.add_argument(
        "--trust",
        action="store_true",
        help="Codex: you, its owner, trust these hooks: record that in $CODEX_HOME/config.toml (merged, backed up) "
        "instead of printing what to add",
    )
    p.set_defaults(handler=_install, access=Access.OPERATE)  # the agent app's files, not the store
    p = hsub.add_parser("uninstall", help="remove floorgate's hooks from the agent app's settings (others stay)")
    where(p)
    p.set_defaults(handler=_uninstall, access=Access.OPERATE)
    p = hsub.add_parser(
        "status", help="whether floorgate's hooks are installed, for which lane and store, and whether the app runs them; exit 1 if not"
    )
    where(p)
    p.set_defaults(handler=_status, reads_only=True, access=Access.READ)


def _target(ctx: Context):  # type: ignore[no-untyped-def]
    from ...agents.hook_clients import installer
    from ...agents.hook_install import Target, project_dir

    a = ctx.args
    svc = installer(a.client)
    project = project_dir(Path(a.project) if a.project else None)
    return svc, svc.settings_file(Target.USER if a.user else Target.PROJECT, project), project


def _install(ctx: Context) -> int:
    from floorgate.admission.clock import SystemClock, read_clock
    from floorgate.admission.store import redact_url

    from ...agents.hook_install import plan

    a = ctx.args
    svc, path, project = _target(ctx)
    if a.trust and not svc.client.owner_trust:
        raise InvalidInput("--trust", f"{svc.client.title} runs its hooks without an owner's trust record; leave --trust out")
    spec = plan(
        floorgate=a.floorgate,
        db=a.db,
        goal=a.goal,
        agent=a.agent,
        automation=a.automation,
        wake=a.wake,
        manual_reason=a.manual_reason,
        wait=parse_interval(a.wait_eligible, "--wait-eligible"),
        max_wait=MAX_PROMPT_WAIT,
    )
    store = ctx.store  # opened before anything is written: an unusable store is refused first
    result = svc.install(path, spec, trust=a.trust, project=project)
    done, steps, granted = result.settings, result.steps, result.granted
    svc.record(store, spec, path, project, read_clock(SystemClock()))
    lane = f"{spec.goal}/{spec.agent}/{spec.automation}"
    text = (
        f"{'installed' if done.changed else 'already installed, unchanged:'} floorgate hooks in {path}: "
        f"UserPromptSubmit admits {lane} ({spec.wake.value}) in {redact_url(spec.db)}, waiting up to {format_interval(spec.wait)} "
        f"(hook timeout {spec.prompt_timeout_seconds}s); PreToolUse counts tool calls of managed turns; Stop records each turn's usage (never blocks); "
        f"any failure to run {spec.floorgate[0]} blocks the prompt or tool call"
    )
    if done.backup is not None:
        text += f"\nprevious settings kept in {done.backup}"
    if steps is not None and granted is not None:
        kept = f" (previous file kept in {granted.backup})" if granted.backup else ""
        text += f"\nrecorded your trust in them for {svc.client.title} in {steps.file}{kept}"
    elif steps is not None:
        text += (
            f"\n{svc.client.title} will NOT run them yet: {steps.why}. As its owner, add to {steps.file}:\n{steps.text.rstrip()}\n"
            "(or run this install again with --trust to have floorgate add it)"
        )
    status = svc.status(path, project=project)
    why_not = [why for _, why in svc.runs(status, project) if why is not None]
    text += f"\n{svc.client.title} runs them now" if not why_not else f"\nnot running yet: {why_not[0]}"
    unbound = ctx.app.floors.unbound(spec.goal, spec.agent, spec.automation)
    if unbound is not None:
        text += f"\nnote: {unbound}"
    ctx.emit(
        {
            "path": str(path),
            "changed": done.changed,
            "backup": str(done.backup) if done.backup else None,
            "db": redact_url(spec.db),
            "owner_steps": {"file": str(steps.file), "toml": steps.text} if steps is not None and granted is None else None,
            "trusted_in": str(steps.file) if steps is not None and granted is not None else None,
            "runs": not why_not,
            "why_not": why_not[0] if why_not else None,
            "unbound": unbound,
        },
        text,
    )
    return EXIT_OK


def _uninstall(ctx: Context) -> int:
    svc, path, project = _target(ctx)
    done = svc.uninstall(path, project=project)
    text = f"removed {done.removed} floorgate hook(s) from {path}" if done.changed else f"no floorgate hooks in {path}; nothing changed"
    if done.backup is not None:
        text += f"\nprevious settings kept in {done.backup}"
    ctx.emit(
        {"path": str(path), "changed": done.changed, "removed": done.removed, "backup": str(done.backup) if done.backup else None}, text
    )
    return EXIT_OK


def _status(ctx: Context) -> int:
    from floorgate.admission.store import redact_url  # here: a hook's answer never imports the store's driver layer

    svc, path, project = _target(ctx)
    st = svc.status(path, project=project)
    runs = svc.runs(st, project)
    lines = [f"{path}: {'no floorgate hooks' if not st.hooks else f'{len(st.hooks)} floorgate hook(s)'}"]
    for h, why in runs:
        lane = h.lane
        wake = f" ({lane['wake']})" if lane.get("wake") else ""  # the Stop hook has no wake
        named = f" for {lane.get('goal')}/{lane.get('agent')}/{lane.get('automation')}{wake}" if lane.get("goal") else ""
        store = redact_url(h.db) if h.db is not None else "$FLOORGATE_DB"
        lines.append(f"  {h.event}{named}: store {store}, runs {h.floorgate}, timeout {h.timeout}")
        lines += [f"  problem: {p}" for p in h.problems()]
        if why is None:
            lines.append(f"  {svc.client.title} runs it now")
        elif h.modified() is not None:
            lines.append(f"  problem: modified, does not enforce: {why}")
        else:
            lines.append(f"  problem: {svc.client.title} will not run it: {why}")
    unserved = _hook_serve.why_not_served()
    lines.append(
        "  served by the hook server (floorgate hook serve)" if unserved is None else f"  answered in-process (slower): {unserved}"
    )
    doc = {
        "path": str(path),
        "served": unserved is None,
        "why_not_served": unserved,
        "exists": st.exists,
        "installed": bool(st.hooks),
        "runs": bool(runs) and all(why is None for _, why in runs),
        "hooks": [
            {
                "event": h.event,
                "floorgate": h.floorgate,
                "db": redact_url(h.db) if h.db is not None else None,
                "modified": h.modified() is not None,
                "lane": h.lane,
                "timeout": h.timeout,
                "problems": h.problems(),
                "runs": why is None,
                "why_not": why,
            }
            for h, why in runs
        ],
    }
    ctx.emit(doc, "\n".join(lines))
    return EXIT_OK if st.hooks and not st.problems and all(why is None for _, why in runs) else EXIT_UNAVAILABLE
