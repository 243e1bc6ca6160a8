"""aiotimely: timely dataflow for Python's asyncio.

The public names of the API (see docs/): run computations with :func:`execute` or
``async with Worker()``, build dataflows from :class:`Stream` methods, feed them
with :class:`InputHandle` and watch them with :class:`ProbeHandle`.

The low-level names (the ``"timely"`` log's events, operators' ports, progress
bookkeeping) are in :mod:`aiotimely.lowlevel`.
"""

import typing as _typing
import warnings as _warnings

from .comm.codec import register_type as register_type
from .comm.routing import route as route
from .comm.tls import TLSConfig as TLSConfig
from .dataflow import ActivateCapability as ActivateCapability
from .dataflow import Activator as Activator
from .dataflow import Capability as Capability
from .dataflow import CapabilityRef as CapabilityRef
from .dataflow import Captured as Captured
from .dataflow import FrontierNotificator as FrontierNotificator
from .input import InputHandle as InputHandle
from .dataflow import Messages as Messages
from .dataflow import Notificator as Notificator
from .dataflow import ProbeHandle as ProbeHandle
from .dataflow import Progress as Progress
from .scope import Scope as Scope
from .dataflow import SourceStopped as SourceStopped
from .dataflow import UnorderedHandle as UnorderedHandle
from .dataflow import UnorderedSession as UnorderedSession
from .dataflow.failures import DeadLetter as DeadLetter
from .dataflow.failures import ErrorPolicy as ErrorPolicy
from .dataflow import operator as operator
from .dataflow import replay as replay
from .dataflow import source as source
from .dataflow import to_stream as to_stream
from .dataflow.windowing import Agg as Agg
from .dataflow.windowing import Aggregation as Aggregation
from .dataflow.windowing import Sessions as Sessions
from .dataflow.windowing import Sliding as Sliding
from .dataflow.windowing import Tumbling as Tumbling
from .dataflow.windowing import WindowSpec as WindowSpec
from .errors import AiotimelyError as AiotimelyError
from .errors import CapabilityError as CapabilityError
from .errors import ClusterError as ClusterError
from .errors import DataflowError as DataflowError
from .errors import GraphError as GraphError
from .errors import ProgressError as ProgressError
from .errors import RecoveryError as RecoveryError
from .progress import Antichain as Antichain
from .progress import ChangeBatch as ChangeBatch
from .progress import FrontierInterest as FrontierInterest
from .progress import MutableAntichain as MutableAntichain
from .progress import PathSummary as PathSummary
from .progress import Product as Product
from .progress import Timestamp as Timestamp
from .execution import Worker as Worker
from .execution import execute as execute
from .execution import execute_async as execute_async
from .execution import execute_from_args as execute_from_args
from .stream import Stream as Stream
from .stream import concatenate as concatenate
from .observe.dot import to_dot as to_dot
from .observe.dot import to_mermaid as to_mermaid
from .dataflow.sequencer import Barrier as Barrier
from .dataflow.sequencer import Sequencer as Sequencer
from . import lowlevel as lowlevel

__version__ = "0.3.0"

__all__ = [
    "ActivateCapability", "UnorderedHandle", "UnorderedSession", "operator",
    "Activator", "AiotimelyError", "Antichain", "Capability", "CapabilityError", "CapabilityRef", "Captured",
    "ChangeBatch", "ClusterError", "DataflowError", "DeadLetter", "ErrorPolicy", "FrontierInterest",
    "FrontierNotificator", "GraphError", "InputHandle", "Messages", "MutableAntichain", "Notificator",
    "PathSummary", "ProbeHandle", "Product", "Progress", "ProgressError", "RecoveryError", "Scope",
    "SourceStopped", "Stream", "Timestamp",
    "Worker", "concatenate", "execute", "execute_async", "execute_from_args", "register_type", "replay",
    "route", "source", "to_stream", "to_dot", "to_mermaid", "TLSConfig",
    "Agg", "Aggregation", "Sessions", "Sliding", "Tumbling", "WindowSpec",
    "Barrier", "Sequencer",
]

_MOVED = frozenset({
    "LogRegistry", "Logger", "TimelyEvent", "StartStop", "OperatesEvent", "ChannelsEvent", "ScheduleEvent",
    "MessagesEvent", "ProgressEvent", "PushProgressEvent", "CapabilityEvent", "ShutdownEvent", "ParkEvent",
    "InputPort", "OperatorOutput", "TimeOrder", "TimedOrder",
})
"""The names that were here before :mod:`aiotimely.lowlevel` (the log and its events, operators' ports): still
here, deprecated."""


def _attribute(name: str) -> object:
    """``aiotimely.from_arrow`` (imported on first use: it imports Polars), or, for a name that moved to
    :mod:`aiotimely.lowlevel`, the same object with a ``DeprecationWarning`` naming its new place (for the
    caller's line)."""
    if name == "from_arrow":
        from .columnar import from_arrow

        return from_arrow
    if name in _MOVED:
        _warnings.warn(f"aiotimely.{name} is deprecated: use aiotimely.lowlevel.{name}", DeprecationWarning,
                       stacklevel=2)
        return getattr(lowlevel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not _typing.TYPE_CHECKING:  # type checkers see the moved names below, and no catch-all attribute
    __getattr__ = _attribute
else:
    from .columnar import from_arrow as from_arrow
    from .lowlevel import CapabilityEvent as CapabilityEvent
    from .lowlevel import ChannelsEvent as ChannelsEvent
    from .lowlevel import InputPort as InputPort
    from .lowlevel import LogRegistry as LogRegistry
    from .lowlevel import Logger as Logger
    from .lowlevel import MessagesEvent as MessagesEvent
    from .lowlevel import OperatesEvent as OperatesEvent
    from .lowlevel import OperatorOutput as OperatorOutput
    from .lowlevel import ParkEvent as ParkEvent
    from .lowlevel import ProgressEvent as ProgressEvent
    from .lowlevel import PushProgressEvent as PushProgressEvent
    from .lowlevel import ScheduleEvent as ScheduleEvent
    from .lowlevel import ShutdownEvent as ShutdownEvent
    from .lowlevel import StartStop as StartStop
    from .lowlevel import TimedOrder as TimedOrder
    from .lowlevel import TimelyEvent as TimelyEvent
    from .lowlevel import TimeOrder as TimeOrder
