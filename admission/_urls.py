"""The store's database URLs: which database a command means, and how to print one safely.

``resolve_url`` turns what the user gave (a path, a URL, nothing) into the URL to open;
``absolute_url`` is the form to hand to another process; ``redact_url`` hides a password.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from .errors import InvalidInput

DEFAULT_URL = "sqlite:///floorgate.db"
ENV_URL = "FLOORGATE_DB"


def resolve_url(url: str | None) -> str:
    """The database URL: the argument, else ``$FLOORGATE_DB``, else ``./floorgate.db``.

    A bare path means a SQLite file; ``postgresql://`` selects the psycopg 3 driver.
    """
    if url is None or url == "":
        url = os.environ.get(ENV_URL) or DEFAULT_URL
    if "://" not in url:
        # A plain path is a path: '%41' or '?' in it are characters of the name, not URL syntax.
        return URL.create("sqlite", database=url).render_as_string(hide_password=False)
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*):(.*)@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` fit to print: a password in it (``user:pw@``, or ``?password=``) becomes ``***``.
    Works on text that is not a valid URL too (an error may quote what the user typed)."""
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", url))


def absolute_url(url: str | None) -> str:
    """``resolve_url``, with a SQLite path made absolute against the working directory: the form
    to hand to another process (a hook, a crontab line) that may run anywhere."""
    resolved = resolve_url(url)
    try:
        parsed = make_url(resolved)
    except ArgumentError:
        raise InvalidInput("db", f"{redact_url(str(url))!r} is not a database URL; use a file path or postgresql://host/db") from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser().resolve()
        return parsed.set(database=str(path)).render_as_string(hide_password=False)
    return resolved
