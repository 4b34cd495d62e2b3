"""The composition root (``root.Floorgate``) and the application services it builds: the only place that builds repositories."""
