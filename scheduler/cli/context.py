"""What every command module shares: exit codes, the handler's ``Context`` and the common options.

``main`` wires the commands (``commands/``) and runs them; the commands import only this module
of the CLI, so neither imports the other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

# Only the light modules here: every command's start pays for what this file imports.
from floorgate.admission.errors import InvalidInput

from ..app.owner_gate import Access

if TYPE_CHECKING:
    from floorgate.admission import Principal, Store
    from floorgate.admission.clock import Clock
    from floorgate.admission.policies import Provenance

    from ..app.root import Floorgate, Settings

EXIT_OK = 0
EXIT_UNAVAILABLE = 1
EXIT_INVALID = 2
EXIT_DENIED = 3
EXIT_CONFLICT = 4

_ENCODER = json.JSONEncoder(indent=2, sort_keys=False)  # what ``json.dumps(doc, indent=2)`` encodes with


_Item = TypeVar("_Item")


class UsageError(Exception):
    """A command line argparse could not accept."""


class Runner(Protocol):
    """``main.run``: one command line run to its exit code (the demo runs its steps through it)."""

    def __call__(self, argv: Sequence[str] | None = None, out: Any = ..., err: Any = ...) -> int: ...


class Context:
    """What a command handler gets: parsed options, the store (opened on first use) and output."""

    def __init__(self, args: argparse.Namespace, out=sys.stdout, *, run: Runner | None = None, err=sys.stderr) -> None:  # type: ignore[no-untyped-def]
        self.args = args
        self._err = err
        self._run = run
        self.json = bool(getattr(args, "json", False))
        self._store: Store | None = None
        self._app: Floorgate | None = None
        self._out = out
        self.principal: Principal | None = None  # the owner whose token authorized this write, if any
        self._clock: Clock | None = None
        self.missing = ""  # where ``has_store`` found no store (a path a write would create one at)

    def run(self, argv: Sequence[str], **streams: Any) -> int:
        """Run another command line (``main.run``), as the demo does for its steps."""
        if self._run is None:
            raise RuntimeError("this Context was built without a runner")
        return self._run(argv, **streams)

    def owner(self) -> tuple[str, Provenance]:
        """Who an owner write is recorded as: the token's principal (authenticated), else the
        ``--owner-ref`` the caller asserted (a store without owners)."""
        from floorgate.admission.policies import Provenance

        if self.principal is not None:
            return self.principal.name, Provenance.AUTHENTICATED
        owner_ref = getattr(self.args, "owner_ref", None)
        if owner_ref is None:
            raise InvalidInput("--owner-ref", "give who asked, e.g. --owner-ref alice (a short non-sensitive id)")
        return str(owner_ref), Provenance.ASSERTED

    @property
    def store(self) -> Store:
        if self._store is None:
            from floorgate.admission import open_store

            # A read, or a change to something a store holds, never creates a store (in the wrong
            # directory it says there is none).
            args = self.args
            self._store = open_store(
                getattr(args, "db", None), create=not (getattr(args, "reads_only", False) or getattr(args, "existing_only", False))
            )
        return self._store

    def note_created(self) -> None:
        """After a command that completed: say so when it created the store (a mistyped --db would
        keep what it wrote where nothing reads it). A refused command's one error line stays alone."""
        if self._store is not None and self._store.created:
            where = self._store.engine.url.database if self._store.dialect == "sqlite" else self._store.safe_url
            self._err.write(f"floorgate: created a new store at {where}; if you meant an existing one, give its --db (or $FLOORGATE_DB)\n")

    @property
    def clock(self) -> Clock:
        """The services' clock (``app``), and what a command parses against before the store opens."""
        if self._clock is None:
            from floorgate.admission.clock import SystemClock

            self._clock = SystemClock()
        return self._clock

    def has_store(self) -> bool:
        """Whether a store exists where this command looks (opened if so, created never): an owner
        write's authorization reads a store's owners only where one exists, so a command refused
        for its input creates no store file."""
        from floorgate.admission import NoStore, open_store

        if self._store is None:
            try:
                self._store = open_store(getattr(self.args, "db", None), create=False)
            except NoStore as exc:
                self.missing = exc.where
                return False
        return True

    @property
    def app(self) -> Floorgate:
        """The application services, configured from the parsed flags and the environment."""
        if self._app is None:
            from ..app.root import Floorgate

            self._app = Floorgate(self.store, clock=self.clock, settings=self._settings())
        return self._app

    @contextlib.contextmanager
    def scratch_app(self) -> Iterator[Floorgate]:
        """The services over an empty store of their own in a private temporary directory, removed
        after: what a command plans against where no store exists yet (a plan, or input refused,
        then creates none where the owner may have mistyped the path)."""
        import tempfile

        from floorgate.admission import open_store

        from ..app.root import Floorgate

        with tempfile.TemporaryDirectory(prefix="floorgate-plan-") as scratch:
            app = Floorgate(open_store(f"{scratch}/plan.db"), clock=self.clock, settings=self._settings())
            try:
                yield app
            finally:
                app.close()

    def _settings(self) -> Settings:
        from ..app.root import Settings

        a = self.args
        return Settings.resolve(
            db=getattr(a, "db", None),
            state_dir=getattr(a, "state_dir", None),
            envelope_mode=getattr(a, "envelope_mode", None),
            crontab_user=getattr(a, "crontab_user", None),
        )

    def emit(self, doc: Any, text: str | Callable[[], str | Iterable[str]]) -> None:
        """Print ``doc`` as one JSON document with --json, else the readable ``text`` (or its
        lines, written as they come)."""
        if self.json:
            # Written as encoded, in pieces of ~64k chunks (the bytes dumps would write): ``dumps``
            # holds every chunk of the document and then the whole of it, ~100 MB more for a
            # status of ten thousand automations.
            chunks: list[str] = []
            for chunk in _ENCODER.iterencode(doc):
                chunks.append(chunk)
                if len(chunks) == 65536:
                    self._out.write("".join(chunks))
                    chunks.clear()
            self._out.write("".join(chunks) + "\n")
        else:
            from ..views.present import terminal_safe  # here: the hooks' start-up never imports the renderers

            rendered = text() if callable(text) else text
            for line in [rendered] if isinstance(rendered, str) else rendered:
                self._out.write(terminal_safe(line) + "\n")
        self._out.flush()

    def emit_table(
        self,
        key: str,
        items: Sequence[_Item],
        doc: Callable[[_Item], Any],
        headers: Sequence[str],
        row: Callable[[_Item], Sequence[object]],
        empty: str,
    ) -> None:
        """A list command's answer: ``{key: [doc(item), ...]}`` with --json, else a table of
        ``headers`` with ``row(item)`` for each item, or ``empty`` when there is none."""

        def text() -> str:
            from ..views.present import table  # here: the hooks' start-up never imports the renderers

            return table(headers, [row(item) for item in items]) if items else empty

        self.emit({key: [doc(item) for item in items]}, text)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def revision(text: str) -> int:
    """A ``--revision`` value: the whole revision number you read, 0 when nothing is stored yet."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a revision: pass the revision you read (0 when none exists)")
    return int(text)


def listed(text: str) -> int:
    """A ``--limit`` value: how many records to list, 1..``MAX_LIMIT``, named by its flag (the
    store's check would name its ``limit`` argument)."""
    from floorgate.admission.scope import MAX_LIMIT  # only when the flag is given: start-up stays light

    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of records; give 1..{MAX_LIMIT}")
    return int(text)


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """--db and --json, accepted before or after the subcommand."""
    default: Any = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--db",
        default=default,
        metavar="URL",
        help="database: a SQLite file path or postgresql://... (default: $FLOORGATE_DB or ./floorgate.db)",
    )
    parser.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS, help="print one JSON document")


def actions(sub: argparse._SubParsersAction, name: str, help: str, *, metavar: str = "ACTION") -> argparse._SubParsersAction:
    """``floorgate NAME ACTION``: the command ``name`` and its required actions, each parsed with
    the top parser's class (so a bad action is one line and exit code like any other)."""
    top = sub.add_parser(name, help=help)
    group = top.add_subparsers(dest=f"{name}_command", metavar=metavar, parser_class=type(top))
    group.required = True
    return group


def reads(parser: argparse.ArgumentParser, handler: Callable[..., int]) -> None:
    """Finish a command that only reads: --db and --json after its own arguments, then its handler."""
    add_common(parser)
    parser.set_defaults(handler=handler, reads_only=True, access=Access.READ)


def writes(parser: argparse.ArgumentParser, handler: Callable[..., int], access: Access, *, existing: bool = False) -> None:
    """Finish a command that writes, as ``access`` allows: --db and --json, then its handler.
    ``existing``: it changes something a store must already hold (an automation, a webhook), so it
    never creates a store (where there is none it says so, as a read does, and leaves no file)."""
    add_common(parser)
    parser.set_defaults(handler=handler, access=access, existing_only=existing)


def add_lane(parser: argparse.ArgumentParser, *, agent_required: bool = True) -> None:
    parser.add_argument("--goal", required=True, help="goal id")
    parser.add_argument("--agent", required=agent_required, help="agent id within the goal")
    parser.add_argument("--automation", help="automation id within the agent (omit for agent-wide)")
