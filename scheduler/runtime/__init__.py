"""The host runtime: ticking, the turn pool, sync, heartbeat, recovery, and the managed-turn executor."""
