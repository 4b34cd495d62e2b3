"""Instants as the text surfaces show them: coming instants rounded up to the whole second
(``ceil_second``, kept with the clock so admission's own texts round the same way)."""

from __future__ import annotations

from floorgate.admission.clock import ceil_second

__all__ = ["ceil_second"]
