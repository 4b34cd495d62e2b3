"""floorgate: durable admission for scheduled AI agents.

This folder is installed as the ``floorgate`` package itself: the namespace that holds
``floorgate.admission``, ``floorgate.hosts`` and ``floorgate.scheduler`` (pyproject.toml maps each
folder to its name), so that no other distribution's ``scheduler`` or ``hosts`` can shadow ours.
"""
