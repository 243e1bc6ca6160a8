"""Where a columnar operator is, in words, and the frame of a batch it got: what every columnar module shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from .batch import as_arrow

if TYPE_CHECKING:
    from ..dataflow.scope import ScopeCore

__all__ = ["frame_of", "where"]


def frame_of(batch: Any, operator: str) -> pl.DataFrame:
    """The Polars frame of a columnar stream's ``batch`` (to read only)."""
    return as_arrow(batch, operator).frame


def where(scope: ScopeCore[Any], name: str) -> str:
    """Where a new operator ``name`` is, in words, as errors say it as the dataflow is built."""
    return f"operator {name!r} in {scope.describe()} on worker {scope.worker.index}"
