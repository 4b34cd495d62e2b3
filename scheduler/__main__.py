"""``python -m scheduler`` runs the floorgate CLI."""

from .cli import main

main()
