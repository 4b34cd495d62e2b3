"""``floorgate run``: the host runtime in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from datetime import datetime, timezone

from floorgate.admission import InvalidInput
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval, parse_duration, parse_interval

from ...app.envelope_gate import EnvelopeMode
from ...app.owner_gate import Access
from ...runtime.host import HostRuntime, RuntimeConfig
from ..context import EXIT_OK, Context, add_common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="keep a timer for every active automation and run their turns (until SIGINT/SIGTERM)")
    p.add_argument("--state-dir", help="where per-turn logs go (default $FLOORGATE_STATE_DIR or ./floorgate-state)")
    p.add_argument("--poll", default="2s", help="how often to pick up automation changes (default 2s)")
    p.add_argument("--workers", type=int, default=8, help="turns that may run at once (default 8)")
    for flag in ("--catch-up", "--backoff-initial", "--backoff-cap"):
        # The host policy is the deployment's, in the store: a host never plans differently.
        p.add_argument(flag, help="must equal the stored host policy; change it with 'floorgate settings set'")
    p.add_argument("--envelope-mode", choices=[m.value for m in EnvelopeMode], help="default $FLOORGATE_ENVELOPE_MODE, else enforce")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="what the host logs on stderr (default info)")
    add_common(p)
    # A host never creates its store: a typo in --db would run zero timers on a new empty file.
    p.set_defaults(handler=_run, reads_only=True, access=Access.OPERATE)


LOG_LEVELS = ["debug", "info", "warning", "error"]
_SHOWN = 20  # armed timers named at start; the rest are counted


def _say_what_is_armed(runtime: HostRuntime) -> None:
    """At start: which timers are armed and their next fires, and which automations are held."""
    say = logging.getLogger("floorgate.run")
    armed = sorted(runtime.armed().items(), key=lambda kv: (kv[1] is None, kv[1] or datetime.max.replace(tzinfo=timezone.utc)))
    holds = runtime.holds()
    say.info("armed %d timer(s), held %d automation(s)", len(armed), len(holds))
    for automation_id, nxt in armed[:_SHOWN]:
        say.info("  %s: next fire %s", automation_id, iso(nxt) if nxt is not None else "none (its schedule has ended)")
    if len(armed) > _SHOWN:
        say.info("  ... and %d more ('floorgate status' lists them all)", len(armed) - _SHOWN)
    for automation_id, why in sorted(holds.items())[:_SHOWN]:
        say.warning("  %s: held: %s", automation_id, why)


def _run(ctx: Context) -> int:
    a = ctx.args
    poll = parse_duration(a.poll, "--poll")
    stored = ctx.app.host_policy.get()
    for flag, name in (("--catch-up", "catch_up"), ("--backoff-initial", "backoff_initial"), ("--backoff-cap", "backoff_cap")):
        given = getattr(a, name)
        if given is not None and parse_interval(given, flag) != getattr(stored.policy, name):
            raise InvalidInput(
                flag,
                f"the deployment's host policy has {format_interval(getattr(stored.policy, name))} (revision {stored.revision}); "
                f"every host and readback uses it: change it with 'floorgate settings set {flag} {given} --revision {stored.revision} --owner-ref \"$(id -un)\"'",
            )
    if not 1 <= a.workers <= 256:
        raise InvalidInput("--workers", "give 1..256")
    logging.basicConfig(
        level=getattr(logging, a.log_level.upper()), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    settings = ctx.app.settings
    config = RuntimeConfig(
        state_dir=settings.state_dir,
        poll=poll,
        workers=a.workers,
        envelope_mode=settings.envelope_mode,
        webhook_ranges=settings.webhook_ranges(),
    )
    runtime = ctx.app.host_runtime(config)

    def stop(signum, _frame):  # type: ignore[no-untyped-def]
        logging.getLogger("floorgate.run").info("%s received: stopping (running turns settle first)", signal.Signals(signum).name)
        runtime._stop.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    runtime.start()
    logging.getLogger("floorgate.run").info(
        "host %s running on %s (poll %s; host policy r%d: catch-up %s, backoff %s..%s)",
        runtime.host,
        ctx.store.safe_url,
        format_interval(poll),
        stored.revision,
        format_interval(stored.policy.catch_up),
        format_interval(stored.policy.backoff_initial),
        format_interval(stored.policy.backoff_cap),
    )
    _say_what_is_armed(runtime)
    while not runtime.wait(1.0):
        pass
    runtime.stop()
    ctx.emit({"stopped": True, "host": runtime.host}, f"host {runtime.host} stopped")
    return EXIT_OK
