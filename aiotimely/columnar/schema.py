"""A columnar stream's schema: its columns' names and Polars types, however the user writes them."""

from __future__ import annotations

from typing import Any

import polars as pl

__all__ = ["as_schema"]


def as_schema(schema: Any) -> pl.Schema:
    """``schema`` as a Polars ``Schema``: one already, a mapping of column names to Polars types
    (``{"user": pl.String, "n": pl.Int64}``), or a pyarrow ``Schema``."""
    if isinstance(schema, pl.Schema):
        return schema
    if type(schema).__module__.startswith("pyarrow"):
        return pl.DataFrame(schema.empty_table()).schema
    try:
        return pl.Schema(schema)
    except Exception as exc:
        raise TypeError(f"a columnar schema maps column names to Polars types, e.g. {{'user': pl.String, 'n': "
                        f"pl.Int64}} (or is a pyarrow Schema); got {schema!r:.200} ({type(exc).__name__}: {exc})"
                        ) from exc
