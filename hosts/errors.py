"""Errors of the hosts package; ``HostError`` is its root."""

from __future__ import annotations

from floorgate.admission import FloorgateError


class HostError(FloorgateError):
    """Root of errors raised by host adapters and schedules."""


class InvalidSchedule(HostError, ValueError):
    """A schedule floorgate refuses; the message names the part and the rule it breaks."""


class UnsupportedSchedule(InvalidSchedule):
    """A valid RFC 5545 schedule floorgate will not run, rather than risk a wrong fire time."""


class HostUnavailable(HostError, RuntimeError):
    """A host could not be reached or read."""
