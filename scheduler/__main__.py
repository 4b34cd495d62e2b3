"""``python -m floorgate.scheduler`` runs the floorgate CLI too (``python -m floorgate`` is the usual form)."""

from .cli.main import main

main()
