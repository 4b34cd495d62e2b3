"""``python -m floorgate`` runs the floorgate CLI (crontab lines use it)."""

from floorgate.scheduler.cli.entry import main

main()
