"""CLI command groups; each module's ``register(subparsers)`` adds its commands."""
