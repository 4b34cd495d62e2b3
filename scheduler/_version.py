"""The installed floorgate version (what ``--version`` prints and a host's heartbeat records)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def floorgate_version() -> str:
    """The version of the installed distribution; 'unknown' when run from an uninstalled tree."""
    try:
        return version("floorgate")
    except PackageNotFoundError:
        return "unknown"
