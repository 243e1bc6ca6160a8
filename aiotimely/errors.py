"""The exceptions aiotimely raises, in one tree.

::

    AiotimelyError
    ├── GraphError          a dataflow graph that cannot run (bad port, cycle that does not advance time)
    ├── ProgressError       progress information that breaks the protocol (lost, repeated or reordered batch)
    ├── CapabilityError     an operator used a capability wrongly (wrong time, already dropped)
    ├── DataflowError       an operator failed; names the dataflow, operator, worker and time
    └── ClusterError        a peer process failed, disconnected or could not be reached
"""

from __future__ import annotations

__all__ = [
    "AiotimelyError",
    "GraphError",
    "ProgressError",
    "CapabilityError",
    "DataflowError",
    "ClusterError",
]


class AiotimelyError(Exception):
    """Base class of every error aiotimely raises on purpose."""


class GraphError(AiotimelyError, ValueError):
    """The dataflow graph is malformed: a missing node or port, a doubly fed input, or a
    cycle whose path summaries do not strictly advance timestamps."""


class ProgressError(AiotimelyError):
    """Progress information broke the protocol (for example a batch arrived twice or out of order)."""


class CapabilityError(AiotimelyError):
    """A capability was used wrongly: for a time it does not cover, or after it was dropped."""


class DataflowError(AiotimelyError):
    """An operator raised; the message names the dataflow, the operator, the worker and the time."""


class ClusterError(AiotimelyError):
    """A peer process failed, closed its connection, or could not be reached."""
