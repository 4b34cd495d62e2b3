"""``floorgate run``: the host runtime in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from admission.intervals import format_interval, parse_interval

from ..cli import EXIT_OK, Context, add_common, state_dir
from ..runtime import HostRuntime, RuntimeConfig
from ..wake import BackoffPolicy


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="keep a timer for every active automation and run their turns (until SIGINT/SIGTERM)")
    p.add_argument("--state-dir", help="where per-turn logs go (default $FLOORGATE_STATE_DIR or ./floorgate-state)")
    p.add_argument("--poll", default="2s", help="how often to pick up automation changes (default 2s)")
    p.add_argument("--catch-up", default="1h", help="a missed tick at most this old fires once after downtime (default 1h)")
    p.add_argument("--workers", type=int, default=8, help="turns that may run at once (default 8)")
    p.add_argument("--backoff-initial", default="3m", help="first wake after a failure or poke (default 3m)")
    p.add_argument("--backoff-cap", default="60m", help="longest backoff wake (default 60m)")
    p.add_argument("--envelope-mode", choices=["disabled", "observe", "enforce"], help="default $FLOORGATE_ENVELOPE_MODE, else enforce")
    add_common(p)
    p.set_defaults(handler=_run)


def _run(ctx: Context) -> int:
    a = ctx.args
    poll = parse_interval(a.poll, "--poll")
    catch_up = parse_interval(a.catch_up, "--catch-up")
    initial = parse_interval(a.backoff_initial, "--backoff-initial")
    cap = parse_interval(a.backoff_cap, "--backoff-cap")
    from admission import InvalidInput

    if not poll or not initial or cap < initial:
        raise InvalidInput("--poll/--backoff", "poll and backoff must be positive and the cap at least the initial wait")
    if not 1 <= a.workers <= 256:
        raise InvalidInput("--workers", "give 1..256")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    config = RuntimeConfig(state_dir=state_dir(a), poll=poll, catch_up=catch_up, workers=a.workers, backoff=BackoffPolicy(initial, cap))
    if a.envelope_mode is not None:
        import os

        os.environ["FLOORGATE_ENVELOPE_MODE"] = a.envelope_mode  # the executor and hosted hooks read it
    runtime = HostRuntime(ctx.store, config)

    def stop(signum, _frame):  # type: ignore[no-untyped-def]
        logging.getLogger("floorgate.run").info("%s received: stopping (running turns settle first)", signal.Signals(signum).name)
        runtime._stop.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    runtime.start()
    logging.getLogger("floorgate.run").info(
        "host %s running on %s (poll %s, catch-up %s)", runtime.host, ctx.store.safe_url, format_interval(poll), format_interval(catch_up)
    )
    while not runtime.wait(1.0):
        pass
    runtime.stop()
    ctx.emit({"stopped": True, "host": runtime.host}, f"host {runtime.host} stopped")
    return EXIT_OK
