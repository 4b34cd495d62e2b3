"""A stuck mission holds its automation: the next turn waits for its owner to resume it."""

from __future__ import annotations

from floorgate.admission import Automation, AutomationState, Automations, HoldKind, Missions, Store
from floorgate.admission.clock import Clock

MISSION_HOLD = "mission "


def hold_for_stuck_mission(store: Store, automation: Automation, clock: Clock | None = None) -> Automation:
    """Hold ``automation`` if its latest mission got stuck after the owner last touched it (a
    resume after a stuck mission starts a new one); returns the automation as it now stands."""
    automation_id = automation.automation_id
    recent = Missions(store, clock).recent(automation_id, 1)
    if not recent or recent[0].status != "stuck" or automation.state != "active":
        return automation
    mission = recent[0]
    if mission.settled_at is not None and mission.settled_at >= automation.updated_at:
        return Automations(store, clock).set_state(
            automation_id,
            AutomationState.HELD,
            hold_kind=HoldKind.MISSION_STUCK,
            note=f"{MISSION_HOLD}{mission.mission_id} is stuck ({mission.stop_reason}); 'floorgate automation resume {automation_id}' starts a new one",
        )
    return automation
