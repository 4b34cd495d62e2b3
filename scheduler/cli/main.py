"""The ``floorgate`` command line: argument wiring, output and exit codes.

Exit codes: 0 ok or admitted, 1 store unavailable, 2 invalid input, 3 denied (an admission, or an
owner write refused: no owner credential, or from inside a managed turn), 4 revision conflict.
A user error prints one line naming the field and the fix; never a traceback.

Every command declares its ``Access`` (``set_defaults(access=...)``); ``run`` checks an owner write
in one place, before its handler runs (``owner_gate``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

# Only the light modules here: every command's start pays for what this file imports (a command's
# own module, its services and the store load when it runs; see ``build_parser``).
from floorgate.admission.errors import (
    FloorgateError,
    InvalidInput,
    NotFound,
    ReductionNotAuthorized,
    RevisionConflict,
    StoreUnavailable,
)

from ..app.owner_gate import ENV_TURN_ID, Access, OwnerWriteRefused, credential
from ..runtime._proc_start import mark_own
from .context import (
    EXIT_CONFLICT,
    EXIT_DENIED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    Context,
    UsageError,
    add_common,
)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # '--allow' must never mean '--allow-reduction'
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        choice = _INVALID_CHOICE.search(message)
        if choice is not None:  # "invalid choice: 'stauts' (choose from ...)": name the nearest instead of all
            value, choices = choice.group(2), re.findall(r"'([^']*)'", choice.group(3))
            near = difflib.get_close_matches(value, choices, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; choose from {', '.join(choices)}"
            what = choice.group(1).lower()
            message = f"{value!r} is not {'an' if what[:1] in 'aeiou' else 'a'} {what}{hint}"
        elif (needs := _NEEDS_VALUE.search(message)) is not None:
            message += f" (a value that starts with '-' is written {needs.group(1)}=VALUE)"
        raise UsageError(f"{message} (see '{self.prog} --help')")


_NEEDS_VALUE = re.compile(r"argument (--[\w-]+)(?:/\S+)?: expected one argument")
_INVALID_CHOICE = re.compile(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)")


def _path(parser: argparse.ArgumentParser, argv: list[str]) -> list[argparse.ArgumentParser] | None:
    """The parsers ``argv`` goes through: the root and each (sub)command its words name, past the
    options before them (None when a word is not a command: argparse names the nearest one)."""
    path = [parser]
    tokens = iter(argv)
    for token in tokens:
        if token.startswith("-"):  # an option of the parser so far (and its value, unless =VALUE)
            action = next((a for a in parser._actions if token.split("=", 1)[0] in a.option_strings), None)
            if action is not None and action.nargs != 0 and "=" not in token:
                next(tokens, None)
            continue
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            break
        if token not in subs[0].choices:
            return None
        parser = subs[0].choices[token]
        path.append(parser)
    return path


def _check_options(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """An option the command does not have is named first (argparse would first report the
    required options that the misspelt one was meant to be), with the nearest it does have.
    An option's value is never taken for an option, even one that starts with '--'."""
    path = _path(parser, argv)
    if path is None:
        return
    leaf = path[-1]
    actions = {o: a for p in path for a in p._actions for o in a.option_strings}
    known = sorted(o for o in actions if o.startswith("--"))
    tokens = iter(argv)
    for token in tokens:
        name = token.split("=", 1)[0]
        if name in actions:
            if actions[name].nargs != 0 and "=" not in token:
                next(tokens, None)  # its value, whatever it looks like
            continue
        if name.startswith("--") and len(name) > 2 and " " not in token:
            longer = [o for o in known if o.startswith(name)]  # an abbreviation: never accepted
            near = longer[:1] or difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            raise UsageError(f"{leaf.prog} has no option {name}{hint} (see '{leaf.prog} --help')")


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (reading the distribution's
    metadata costs more than the rest of a command's start)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        from .._version import floorgate_version

        sys.stdout.write(f"floorgate {floorgate_version()}\n")
        parser.exit()


# Each command word and the module of commands/ that registers it, in --help's order.
COMMANDS: dict[str, str] = {
    "init": "init",
    "policy": "policy",
    "admit": "admit",
    "confirm": "admit",
    "report": "admit",
    "starts": "admit",
    "status": "status",
    "automation": "automation",
    "turn": "turn",
    "usage": "usage",
    "run": "run",
    "settings": "settings",
    "prune": "settings",
    "hook": "hook",
    "approve": "envelope",
    "deny": "envelope",
    "reconcile": "envelope",
    "mission": "envelope",
    "demo": "demo",
    "owner": "owner",
    "notify": "notify",
    "serve": "serve",
    "apply": "fleet",
    "export": "fleet",
    "doctor": "doctor",
    "service": "service",
}
_ROOT_VALUED = ("--db",)  # the root's options that take a value


def _named_modules(argv: Sequence[str] | None) -> list[str]:
    """The command modules a command line needs: only its command's (none for --version), so a
    hook or a read does not import every command's services; all of them for anything else
    (--help, a misspelt command: argparse lists them or names the nearest)."""
    every = list(dict.fromkeys(COMMANDS.values()))
    if argv is None:
        return every
    tokens = iter(argv)
    for token in tokens:
        if token in ("-h", "--help"):
            return every
        if token == "--version":
            return []
        if token in _ROOT_VALUED:
            next(tokens, None)
        elif not token.startswith("-"):
            return [COMMANDS[token]] if token in COMMANDS else every
    return every


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``argv``, only the parts that command line can reach."""
    import importlib

    parser = _Parser(
        prog="floorgate",
        description="Durable interval admission for scheduled AI agents.",
        epilog="exit codes: 0 ok/admitted, 1 store unavailable, 2 invalid input, 3 denied (or an owner write refused), "
        "4 revision conflict, "
        "5 a managed turn failed, timed out or got stuck",
    )
    add_common(parser, top=True)
    parser.add_argument("--version", action=_Version, help="show floorgate's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in _named_modules(argv):
        importlib.import_module(f".commands.{module}", __package__).register(sub)
    for words, leaf in leaf_parsers(parser):
        leaf.set_defaults(command_name=" ".join(words))
        if leaf.get_default("access") is Access.OWNER:
            leaf.add_argument(
                "--token-file",
                metavar="PATH",
                help="owner token file (private, not a symlink; default: $FLOORGATE_TOKEN, $FLOORGATE_TOKEN_FILE, "
                "~/.config/floorgate/token); needed once the store has owners",
            )
    return parser


def leaf_parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command that runs a handler, with the words that name it (``("policy", "set")``)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(words, parser)]
    return [leaf for name, sub in subs[0].choices.items() for leaf in leaf_parsers(sub, (*words, name))]


def _authorize(ctx: Context) -> None:
    """Gate an owner write (see ``owner_gate``); a command that does not declare its access is one."""
    args = ctx.args
    if getattr(args, "access", Access.OWNER) is not Access.OWNER:
        return
    turn_id = os.environ.get(ENV_TURN_ID)
    if turn_id is None and not getattr(args, "reads_only", False) and not ctx.has_store():
        return  # a store this write would create has no owners yet; none is made before the command checks its input
    token_file = getattr(args, "token_file", None)
    ctx.principal = ctx.app.owner_gate.authorize(
        str(getattr(args, "command_name", args.command)),
        turn_id=turn_id,
        token=lambda: credential(os.environ, token_file),
        owner_ref=getattr(args, "owner_ref", None),
    )


def run(argv: Sequence[str] | None = None, out=sys.stdout, err=sys.stderr) -> int:  # type: ignore[no-untyped-def]
    """Run one command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:  # no command: say what there is
        out.write(build_parser().format_help())
        return EXIT_OK
    command: list[str] | None = None
    if "--" in argv:  # everything after the first "--" is a host command line, never our options
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    try:
        parser = build_parser(argv)
        _check_options(parser, argv)
        args = parser.parse_args(argv)
        if command is not None and not hasattr(args, "command_argv"):
            raise UsageError("this command takes no '-- COMMAND...'")
        if command is not None:
            args.command_argv = command
    except UsageError as exc:
        err.write(f"floorgate: error: {_one_line(exc)}\n")
        _json_error(out, "--json" in argv, "usage", str(exc))
        return EXIT_INVALID
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if getattr(args, "raw_handler", False):
        # Hooks speak their host's protocol (exit codes, stderr) and handle every error themselves.
        return int(args.handler(args))
    ctx = Context(args, out, run=run, err=err)
    try:
        _authorize(ctx)
        code = int(args.handler(ctx))
        ctx.note_created()
        return code
    except OwnerWriteRefused as exc:
        err.write(f"floorgate: refused: {_one_line(exc)}\n")
        _json_error(out, ctx.json, "owner_write_refused", str(exc))
        return EXIT_DENIED
    except RevisionConflict as exc:
        err.write(f"floorgate: conflict: {_one_line(exc)}\n")
        _json_error(out, ctx.json, "revision_conflict", str(exc), current_revision=exc.current_revision)
        return EXIT_CONFLICT
    except StoreUnavailable as exc:
        err.write(f"floorgate: store unavailable: {_one_line(exc)}\n")
        _json_error(out, ctx.json, "store_unavailable", str(exc))
        return EXIT_UNAVAILABLE
    except FloorgateError as exc:
        # Bad values, unknown ids and missing authorization are the caller's to fix.
        user_error = isinstance(exc, (InvalidInput, ReductionNotAuthorized, NotFound, ValueError, LookupError))
        if isinstance(exc, InvalidInput):
            exc = _as_flag(exc, argv)
        err.write(f"floorgate: error: {_one_line(exc)}\n")
        kind = {InvalidInput: "invalid_input", ReductionNotAuthorized: "reduction_not_authorized", NotFound: "not_found"}
        name = next((v for k, v in kind.items() if isinstance(exc, k)), "invalid_input" if user_error else "error")
        _json_error(out, ctx.json, name, str(exc), field=getattr(exc, "field", None))
        return EXIT_INVALID if user_error else EXIT_UNAVAILABLE
    finally:
        ctx.close()


def _as_flag(exc: InvalidInput, argv: Sequence[str]) -> InvalidInput:
    """``exc`` naming the flag the caller typed for its field (``manual_reason`` -> ``--manual-reason``,
    ``turn_id`` -> ``--turn``) when a domain check refused a value given on the command line."""
    field = exc.field
    for name in (field, field.removesuffix("_id")):
        flag = "--" + name.replace("_", "-")
        if flag != field and any(a == flag or a.startswith(flag + "=") for a in argv):
            return InvalidInput(flag, str(exc).removeprefix(f"{field}: "))
    return exc


def _one_line(exc: BaseException) -> str:
    """An error message as one line: a value quoted in it may hold a newline or a NUL."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))


def _json_error(out, wanted: bool, kind: str, message: str, **extra: object) -> None:  # type: ignore[no-untyped-def]
    """With --json, an error is one JSON document on stdout too (the line on stderr stays)."""
    if not wanted:
        return
    doc = {"error": {"kind": kind, "message": message, **{k: v for k, v in extra.items() if v is not None}}}
    out.write(json.dumps(doc) + "\n")
    out.flush()


def main() -> None:
    """Console entry point. A reader that closes the pipe early (``floorgate status | head -1``)
    ends the output, quietly: what the command did is done."""
    mark_own()  # a hook's deadline counts from this process's start
    try:
        code = run()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_OK
    sys.exit(code)
