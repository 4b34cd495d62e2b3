"""The error tree of floorgate.

``FloorgateError`` is the root for every package of the project; each error also subclasses the
built-in it resembles, so callers may catch either. Messages name the ids involved and, for user
errors, the field and the fix.
"""

from __future__ import annotations


class FloorgateError(Exception):
    """Root of every error floorgate raises on purpose."""


class InvalidInput(FloorgateError, ValueError):
    """A caller passed a value floorgate cannot accept; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class NotFound(FloorgateError, LookupError):
    """A record the caller named does not exist."""


class RevisionConflict(FloorgateError):
    """An exact-revision write lost: the stored revision is not the one the caller read.

    Nothing was written. ``current_revision`` is what the store holds now; re-read, then retry
    deliberately (never automatically).
    """

    def __init__(self, scope: str, expected: int, current: int) -> None:
        self.scope = scope
        self.expected_revision = expected
        self.current_revision = current
        super().__init__(
            f"revision conflict on {scope}: you passed revision {expected}, the store holds "
            f"revision {current}; re-read the policy and pass --revision {current}"
        )


class ReductionNotAuthorized(FloorgateError, PermissionError):
    """Lowering or disabling a floor (or loosening a limit, a bound, a price) was attempted
    without explicit reduction authorization. The message names the CLI's flag, as the other
    errors' fixes do; the console words its own (``console.errors.fix_message``)."""

    def __init__(self, scope: str, before: str, after: str, *, what: str | None = None) -> None:
        self.scope = scope
        change = what if what is not None else f"lowering the floor on {scope} from {before} to {after}"
        super().__init__(f"{change} needs explicit reduction authorization: pass --allow-reduction to apply it")


class StoreUnavailable(FloorgateError, RuntimeError):
    """The durable store cannot be opened, read or written. Admission fails closed on it."""


class CorruptState(StoreUnavailable):
    """A stored value floorgate did not write (a hand edit, a bad restore): what depends on it
    fails closed, and only that."""


class SchemaTooNew(StoreUnavailable):
    """The database was written by a newer floorgate; it is refused and never written to."""


class NoStore(StoreUnavailable, FileNotFoundError):
    """A read found no floorgate store where it looked (reads never create one); ``where``: the
    path it looked at."""

    where: str = ""
