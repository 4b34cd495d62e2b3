"""Alembic revisions of the floorgate schema, applied by ``open_store`` (one file per revision)."""
