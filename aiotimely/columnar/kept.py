"""Columnar kept state through the recovery layer: the rows an operator keeps, as ``keyed_state``.

The recovery layer keeps a dict by key and, on a resume with another number of workers, gives each key's
entry to the worker ``aiotimely.route(key, peers)`` picks. A columnar operator keeps its rows in a few frames,
not a dict per key, so :class:`KeptRows` is that dict only when pickled: each row's key is the hash of its key
columns (column :data:`HASH`, a ``UInt64``), the very hash the columnar exchange routes by (``hash % peers``,
which is what ``route`` gives a non-negative int), so the rows of a key come back on the worker its rows now go
to. While the dataflow runs the dict stays empty and the operator's frames are the state: they are partitioned
by hash only when a snapshot is cut (once per snapshot, in one call).
"""

from __future__ import annotations

from typing import Any, Callable

import polars as pl

__all__ = ["HASH", "KeptRows"]

HASH = "__aiotimely_key_hash__"
"""The column of a kept row's key hash (0 for an operator without key columns: all on worker 0)."""


class KeptRows(dict[int, pl.DataFrame]):
    """A ``keyed_state`` value holding rows: ``key hash -> frame`` as a snapshot has it (see the module).

    The operator :meth:`bind` s the function giving its rows as one frame (with a :data:`HASH` column): that is
    what a snapshot pickles, partitioned by hash. Restored, the dict holds the entries of this worker's keys;
    :meth:`take` gives them as one frame (and empties the dict)."""

    _live: Callable[[], pl.DataFrame | None] | None = None

    def bind(self, live: Callable[[], pl.DataFrame | None]) -> None:
        """Snapshots pickle ``live()``, the operator's rows (``None``: none)."""
        self._live = live

    def take(self) -> pl.DataFrame | None:
        """The restored rows as one frame (``None`` if there are none), taken out of the dict."""
        frames = list(self.values())
        self.clear()
        return pl.concat(frames, how="vertical") if frames else None

    def __reduce__(self) -> tuple[Any, ...]:
        frame = self._live() if self._live is not None else None
        if frame is None or frame.height == 0:
            entries: dict[int, pl.DataFrame] = dict(self)
        else:
            parts = frame.partition_by(HASH, as_dict=True, maintain_order=True)
            entries = {int(h): part for (h,), part in parts.items()}
        return KeptRows, (), None, None, iter(entries.items())
