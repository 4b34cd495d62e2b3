"""Who writes a rule: the recorded owner, who vouches for it, and whether it may loosen a limit.

Every surface that writes a rule (``policy set``, the fleet apply, the console's floor apply) writes
through one ``Writer``; this module imports only admission, so a command that writes a rule does not
load the services that read floors back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict, Unpack

from floorgate.admission import ComputeBlock, Policies, Provenance, Rule, Scope
from floorgate.admission.limits import LimitsChange


class RuleWrite(TypedDict, total=False):
    """What a rule write sets (``Policies.configure``'s keywords of the same names)."""

    min_interval: timedelta | None
    compute: ComputeBlock | None
    limits: LimitsChange | None
    note: str | None


@dataclass(frozen=True)
class Writer:
    """Who a rule write is recorded as (and who vouches for that), and whether it may loosen a limit."""

    owner_ref: str
    provenance: Provenance
    allow_reduction: bool

    def configure(self, policies: Policies, scope: Scope, revision: int, **change: Unpack[RuleWrite]) -> Rule:
        """Write ``scope``'s rule at ``revision`` as this writer (``Policies.configure``: what is not given is kept)."""
        return policies.configure(
            scope,
            expected_revision=revision,
            owner_ref=self.owner_ref,
            provenance=self.provenance,
            allow_reduction=self.allow_reduction,
            **change,
        )
