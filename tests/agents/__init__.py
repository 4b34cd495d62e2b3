"""The qualification suite is a package, so that its conftest.py is ``agents.conftest`` and does not
take the module name ``conftest`` from tests/conftest.py (whose constants the other tests import).
Its modules import each other by bare name (``from agents_harness import agent_cli``)."""

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
