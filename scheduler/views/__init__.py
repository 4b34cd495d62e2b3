"""JSON and text renderers shared by the CLI and the owner console."""
