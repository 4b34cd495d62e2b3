"""Files floorgate writes outside its store (agent settings, their backups, turn logs), written so
that nobody else can redirect or read them.

Every such file lies below an *anchor*: a directory its user named (a project, ``$HOME/.claude``,
``$CODEX_HOME``, the state directory), whose own symbolic links are followed once, resolved.
Below the anchor nothing is followed: each directory is opened with ``O_NOFOLLOW`` relative to
the one above it (a missing one is created 0700), so a link a repository commits (``.claude ->
~/.ssh``) or another user plants (``state/logs -> /home/victim``) is refused, never used. The
file itself is never opened through a link either: a replacement is a new file made with
``O_EXCL`` beside it, synced, then renamed over the old name (a rename replaces a link, it never
writes through it); a backup is made the same way and keeps at most 0600 of the original's mode;
a replaced file keeps its mode (0600 when new). A path that is a symbolic link or not a regular
file is refused with one line, and so is writing into a directory that another user owns or may
write to (a sticky world-writable anchor such as ``/tmp`` is accepted: everything below it is ours).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from floorgate.admission import InvalidInput

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
BACKUP_MAX_MODE = 0o600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_MAX_READ = 16 * 1024 * 1024  # settings files are small; a bigger one is not what we think it is


class UnsafePath(InvalidInput):
    """A file or directory floorgate was to write is a link, not a regular file, or lies where
    another user could redirect or read it."""


@dataclass(frozen=True)
class Existing:
    """A regular file as read: its bytes and permission bits."""

    data: bytes
    mode: int


def split(anchor: Path, path: Path) -> tuple[Path, tuple[str, ...], str]:
    """(anchor, the directories from it to ``path``'s directory, ``path``'s name); ``path`` must lie
    below ``anchor`` (both made absolute first)."""
    anchor, path = anchor.absolute(), path.absolute()
    try:
        parts = path.parent.relative_to(anchor).parts
    except ValueError:
        raise ValueError(f"{path} is not below {anchor}") from None
    if any(p in ("..", ".") for p in parts):
        raise ValueError(f"{path} is not below {anchor}")
    return anchor, parts, path.name


def _refuse(field: str, path: Path | str, why: str) -> UnsafePath:
    return UnsafePath(field, f"{path} {why}; floorgate writes nothing there")


def _private_group(st: os.stat_result) -> bool:
    """A group that holds only the directory's owner (a user private group, umask 002 setups)."""
    try:
        group = grp.getgrgid(st.st_gid)
        owner = pwd.getpwuid(st.st_uid)
    except KeyError:
        return False
    if owner.pw_gid != st.st_gid or any(m != owner.pw_name for m in group.gr_mem):
        return False
    return not any(u.pw_gid == st.st_gid and u.pw_uid != st.st_uid for u in pwd.getpwall())


def check_dir(st: os.stat_result, where: Path, field: str, *, anchor: bool = False) -> None:
    """Refuse a directory that another user owns (root excepted) or may write to; an anchor may
    be world-writable with the sticky bit (``/tmp``), since what floorgate makes below it is its own."""
    if st.st_uid not in (os.geteuid(), 0):
        raise _refuse(field, where, f"is owned by another user (uid {st.st_uid})")
    mode = stat.S_IMODE(st.st_mode)
    sticky = anchor and bool(mode & stat.S_ISVTX)
    if mode & stat.S_IWOTH and not sticky:
        raise _refuse(field, where, "is writable by other users (chmod o-w it, or choose a private directory)")
    if mode & stat.S_IWGRP and not sticky and not _private_group(st):
        raise _refuse(field, where, "is writable by its group (chmod g-w it, or choose a private directory)")


def _open_anchor(anchor: Path, field: str, *, create: bool) -> tuple[int, Path, tuple[str, ...]] | None:
    """The anchor's deepest existing directory, opened (its links resolved: the user named it), and
    the names still missing below it; None when missing and not ``create``."""
    existing, missing = anchor, []
    while not existing.exists() and existing != existing.parent:
        missing.append(existing.name)
        existing = existing.parent
    if missing and not create:
        return None
    real = os.path.realpath(existing)
    try:
        fd = os.open(real, _DIR_FLAGS)
    except NotADirectoryError:
        raise _refuse(field, existing, "is not a directory") from None
    return fd, Path(real), tuple(reversed(missing))


@contextlib.contextmanager
def directory(anchor: Path, parts: tuple[str, ...], field: str, *, create: bool, check: bool) -> Iterator[int | None]:
    """An open descriptor of ``anchor/parts...``: nothing below the anchor followed as a link,
    missing directories made 0700 when ``create``; None when one is missing and not ``create``.
    With ``check``, each directory from the anchor down must be safe to write in (``check_dir``)."""
    opened = _open_anchor(anchor, field, create=create)
    if opened is None:
        yield None
        return
    fd, where, missing = opened
    try:
        if check:
            check_dir(os.fstat(fd), where, field, anchor=True)
        for name in (*missing, *parts):
            where = where / name
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, PRIVATE_DIR, dir_fd=fd)
            try:
                child = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise
                yield None
                return
            except (NotADirectoryError, OSError) as exc:
                if _is_link(fd, name):
                    raise _refuse(field, where, "is a symbolic link (floorgate never follows one it did not choose)") from None
                if isinstance(exc, NotADirectoryError):
                    raise _refuse(field, where, "is not a directory") from None
                raise
            os.close(fd)
            fd = child
            if check:
                check_dir(os.fstat(fd), where, field)
        yield fd
    finally:
        os.close(fd)


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_at(dir_fd: int, name: str, where: Path, field: str) -> Existing | None:
    """The regular file ``name`` (None when absent); a link, FIFO, device or directory is refused."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError:
        if _is_link(dir_fd, name):
            raise _refuse(field, where, "is a symbolic link (floorgate never reads or writes through one)") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(field, where, "is not a regular file")
        data = fh.read(_MAX_READ + 1)
    if len(data) > _MAX_READ:
        raise _refuse(field, where, f"is larger than {_MAX_READ} bytes")
    return Existing(data, stat.S_IMODE(st.st_mode))


def read(anchor: Path, path: Path, field: str) -> Existing | None:
    """``path`` (below ``anchor``) as it is, never through a link; None when it or a directory
    on its way is absent."""
    root, parts, name = split(anchor, path)
    with directory(root, parts, field, create=False, check=False) as fd:
        return None if fd is None else _read_at(fd, name, path, field)


def _replace_at(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """``name`` in the directory becomes ``data`` with ``mode``: a fresh file, synced, renamed over."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)


def _check_replaceable(dir_fd: int, name: str, where: Path, field: str) -> None:
    """A name about to be replaced must be absent or a regular file of ours: a link planted there
    is refused rather than silently removed, so its owner hears of it."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(field, where, "is a symbolic link (floorgate never writes through one): remove it and run again")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(field, where, "is not a regular file")
    if st.st_uid != os.geteuid():
        raise _refuse(field, where, f"is owned by another user (uid {st.st_uid})")


@dataclass(frozen=True)
class Replaced:
    """What ``replace`` did: the backup it kept of the previous content (None: there was none)."""

    backup: Path | None


def replace(anchor: Path, path: Path, data: bytes, field: str, *, backup_suffix: str | None = None, make_dirs: bool = True) -> Replaced:
    """Write ``data`` to ``path`` (below ``anchor``) atomically, keeping its mode (0600 when new);
    with ``backup_suffix``, the previous content is kept first as ``<name><suffix>`` (0600 or the
    original's mode, the stricter). Missing directories are made (0700) unless ``make_dirs`` is
    False: then a missing one is refused (a path the user typed: a typo makes no directories).
    Raises ``UnsafePath`` (nothing written) as the module says."""
    root, parts, name = split(anchor, path)
    with directory(root, parts, field, create=make_dirs, check=True) as fd:
        if fd is None:
            raise _refuse(field, path.parent, "does not exist (make the directory first, or give another path)")
        _check_replaceable(fd, name, path, field)
        before = _read_at(fd, name, path, field)
        backup = None
        if before is not None and backup_suffix is not None:
            backup = path.with_name(name + backup_suffix)
            _check_replaceable(fd, backup.name, backup, field)
            _replace_at(fd, backup.name, before.data, before.mode & BACKUP_MAX_MODE)
        _replace_at(fd, name, data, before.mode if before is not None else PRIVATE_FILE)
        return Replaced(backup)


def private_dir(anchor: Path, parts: tuple[str, ...], field: str) -> Path:
    """Make (0700) and check ``anchor/parts...`` for files only its owner may read (turn logs):
    no link below the anchor, nothing another user owns or may write to. Returns its path."""
    with directory(anchor.absolute(), parts, field, create=True, check=True):
        return anchor.absolute().joinpath(*parts)
