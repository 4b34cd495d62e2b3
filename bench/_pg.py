"""A throwaway PostgreSQL schema per benchmark run, so runs never see each other's rows."""

from __future__ import annotations

import uuid


def _plain(base: str) -> str:
    return base.replace("postgresql+psycopg://", "postgresql://")


def pg_schema(base: str, prefix: str) -> tuple[str, str]:
    """Create a fresh schema named ``<prefix>_<8 hex>``; return the URL that selects it, and its name."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_plain(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}", schema


def drop_schema(base: str, schema: str) -> None:
    """Drop a schema made by :func:`pg_schema`, with everything in it."""
    import psycopg

    with psycopg.connect(_plain(base), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
