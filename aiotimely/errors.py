"""The exceptions aiotimely raises, in one tree.

::

    AiotimelyError
    ├── GraphError          a dataflow graph that cannot run (bad port, cycle that does not advance time)
    ├── ProgressError       progress information that breaks the protocol (lost, repeated or reordered batch)
    ├── CapabilityError     an operator used a capability wrongly (wrong time, already dropped)
    ├── DataflowError       an operator failed; names the dataflow, operator, worker and time
    ├── ClusterError        a peer process failed, disconnected or could not be reached
    └── RecoveryError       saved state that cannot be resumed from: foreign, corrupt, or not movable
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AiotimelyError",
    "GraphError",
    "ProgressError",
    "CapabilityError",
    "DataflowError",
    "ClusterError",
    "RecoveryError",
]


class AiotimelyError(Exception):
    """Base class of every error aiotimely raises on purpose."""


class GraphError(AiotimelyError, ValueError):
    """The dataflow graph is malformed: a missing node or port, a doubly fed input, or a
    cycle whose path summaries do not strictly advance timestamps."""


class ProgressError(AiotimelyError):
    """Progress information broke the protocol (for example a batch arrived twice or out of order)."""


class _Located(AiotimelyError):
    """An error in one operator: where it happened, as attributes besides the message.

    ``dataflow`` (its name), ``operator`` (the operator's name), ``path`` (the operator's
    indices from the dataflow down), ``worker`` (the worker's index) and ``time`` (the
    time of the batch the operator was handling, if any); ``None`` where unknown.
    """

    def __init__(self, message: str, *, dataflow: str | None = None, operator: str | None = None,
                 path: tuple[int, ...] | None = None, worker: int | None = None, time: Any = None) -> None:
        super().__init__(message)
        self.dataflow = dataflow
        self.operator = operator
        self.path = path
        self.worker = worker
        self.time = time

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), str(self), self.__dict__.copy())


def _rebuild(cls: type[_Located], message: str, attributes: dict[str, Any]) -> _Located:
    error = cls(message)
    error.__dict__.update(attributes)
    return error


class CapabilityError(_Located):
    """A capability was used wrongly: for a time it does not cover, or after it was dropped."""


class DataflowError(_Located):
    """An operator (or a helper task it started) raised, or the computation cannot complete.

    The message names the dataflow, the operator, the worker and the time; so do the
    attributes ``dataflow``, ``operator``, ``path``, ``worker`` and ``time``.
    """


class ClusterError(AiotimelyError):
    """A peer process failed, closed its connection, or could not be reached."""


class RecoveryError(AiotimelyError):
    """A recovery directory cannot be resumed from: another program's, another dataflow shape's, a
    corrupt file, or per-worker state that cannot move to a different number of workers."""
