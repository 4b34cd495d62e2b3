"""Agent apps: installing floorgate's hooks (Claude Code, Codex), the hook decision, Codex trust, TOML edits and safe file writes."""
