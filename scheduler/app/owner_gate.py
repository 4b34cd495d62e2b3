"""Who may change limits from the CLI: every command declares its ``Access``; owner writes are gated.

Once the store has an owner (an unrevoked principal with role ``owner``), an owner write needs that
owner's token (``fgo_<name>.<secret>``), from ``$FLOORGATE_TOKEN`` or a private token file, and the
write is recorded under the principal's name. Inside a managed turn (``$FLOORGATE_TURN_ID`` set) an
owner write is refused whatever credential it carries, and the refusal is recorded as an
``owner_write_refused`` event: an agent never loosens its own limits or decides its own asks. A
store without owners behaves as before (``--owner-ref`` is asserted, not checked).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.errors import FloorgateError

if TYPE_CHECKING:
    from floorgate.admission import Principal, Store

# What $FLOORGATE_DB is called (admission.store's ENV_URL; a test holds them equal): named here so
# that every command's start does not import the store (SQLAlchemy) to read one constant.
STORE_URL_ENV = "FLOORGATE_DB"

ENV_TOKEN = "FLOORGATE_TOKEN"
ENV_TOKEN_FILE = "FLOORGATE_TOKEN_FILE"
ENV_TURN_ID = "FLOORGATE_TURN_ID"
# Never passed to a managed turn's host, whatever its env_allow says: an owner's token, and the
# store's URL (its hooks reach the store through the runner's turn broker, scoped to the turn).
CREDENTIAL_ENV = (ENV_TOKEN, ENV_TOKEN_FILE, STORE_URL_ENV)
_MAX_TOKEN_FILE = 4096


class Access(StrEnum):
    """What a command does, declared once per command (``set_defaults(access=...)``)."""

    READ = "read"  # reads the store (or nothing)
    OPERATE = "operate"  # launch paths, hooks and host upkeep: they cannot loosen a limit
    OWNER = "owner"  # changes what owners decide: needs an owner credential once the store has owners


class OwnerWriteRefused(FloorgateError, PermissionError):
    """An owner write was refused: no usable owner credential, or it came from inside a managed turn."""


def default_token_file() -> Path:
    """Where the CLI looks for an owner token when neither a flag nor the environment names one."""
    return Path.home() / ".config" / "floorgate" / "token"


def read_token_file(path: Path) -> str:
    """The token in ``path``: a regular file of this user, not a symlink, private (no group or other bits)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise OwnerWriteRefused(f"token file {path} does not exist; write the owner token there (chmod 600)") from None
    except OSError as exc:
        if os.path.islink(path):
            raise OwnerWriteRefused(f"token file {path} is a symlink; refusing it: name the file itself") from None
        raise OwnerWriteRefused(f"cannot read token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OwnerWriteRefused(f"token file {path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise OwnerWriteRefused(f"token file {path} belongs to uid {st.st_uid}, not to you; refusing it")
        if st.st_mode & 0o077:
            mode = stat.S_IMODE(st.st_mode)
            raise OwnerWriteRefused(f"token file {path} is open to group or others (mode {mode:04o}); refusing it: chmod 600 {path}")
        data = f.read(_MAX_TOKEN_FILE + 1)
    if len(data) > _MAX_TOKEN_FILE:
        raise OwnerWriteRefused(f"token file {path} is too large to hold a token")
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise OwnerWriteRefused(f"token file {path} does not hold a token (not ASCII text)") from None


def credential(environ: Mapping[str, str], token_file: str | None) -> str | None:
    """The presented owner token: ``--token-file``, else ``$FLOORGATE_TOKEN``, else
    ``$FLOORGATE_TOKEN_FILE``, else the default token file when it exists (None: none presented)."""
    if token_file is not None:
        return read_token_file(Path(token_file))
    if ENV_TOKEN in environ:
        return environ[ENV_TOKEN]
    if ENV_TOKEN_FILE in environ:
        return read_token_file(Path(environ[ENV_TOKEN_FILE]))
    default = default_token_file()
    if os.path.lexists(default):
        return read_token_file(default)
    return None


def _printable(text: str, limit: int) -> str:
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


class OwnerGate:
    """Checks an owner write against the store's owners (and records refusals from managed turns)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        from floorgate.admission import Principals

        self.store = store
        self.clock = clock
        self.principals = Principals(store, clock)

    def has_owners(self) -> bool:
        """Whether the store has an owner that can sign: from then on owner writes need a credential."""
        return any(p.can_write for p in self.principals.list())

    def authorize(self, command: str, *, turn_id: str | None, token: Callable[[], str | None], owner_ref: str | None) -> Principal | None:
        """The principal an owner write runs as, or None when the store has no owners (as before).

        Raises ``OwnerWriteRefused`` inside a managed turn (recorded as an event), and, once the
        store has owners, without a live owner's token or with an ``owner_ref`` that is not its name.
        ``token`` is called only when a credential is needed, so a store without owners never reads one.
        """
        if turn_id is not None:
            self.refuse_in_turn(turn_id, command)
        if not self.has_owners():
            return None
        presented = token()
        if presented is None:
            raise OwnerWriteRefused(
                f"'{command}' is an owner write and this store has owners: "
                f"give an owner token in ${ENV_TOKEN} or --token-file (default {default_token_file()})"
            )
        principal = self.principals.authenticate(presented)
        if principal is None:
            raise OwnerWriteRefused("the owner token is not a live token (unknown, wrong or revoked); see 'floorgate owner list'")
        from floorgate.admission import Role

        if principal.role is not Role.OWNER:
            raise OwnerWriteRefused(f"principal {principal.name!r} is a {principal.role.value}; '{command}' needs an owner's token")
        if owner_ref is not None and owner_ref != principal.name:
            raise OwnerWriteRefused(
                f"--owner-ref {owner_ref!r} is not the token's principal {principal.name!r}; omit --owner-ref (the token says who you are)"
            )
        return principal

    def refuse_in_turn(self, turn_id: str, command: str) -> None:
        """Record that a managed turn tried an owner write, then refuse it."""
        from floorgate.admission.events import EventKind, record

        turn = _printable(turn_id, 200)
        with self.store.write(lock_key="events:owner_write_refused") as conn:
            event_id = record(conn, EventKind.OWNER_WRITE_REFUSED, turn, {"turn_id": turn, "command": command}, read_clock(self.clock))
        raise OwnerWriteRefused(
            f"'{command}' is an owner write and this process runs inside managed turn {turn!r} "
            f"(${ENV_TURN_ID} is set): a turn never changes owner limits; refused and recorded as {event_id}"
        )
