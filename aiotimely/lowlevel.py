"""The low-level names: what the engine is made of, for code that looks inside it (as ``trio.lowlevel``).

A program that builds and runs dataflows needs only the top-level :mod:`aiotimely`
names. Here is what tools, tests and hand-written operators reach for below that:

* the ``"timely"`` log (timely's logging stream, ``worker.log_register().insert(TIMELY,
  action)``): :class:`LogRegistry` and :class:`Logger`, and the events it carries —
  :data:`TimelyEvent` is any of :class:`OperatesEvent`, :class:`ChannelsEvent`,
  :class:`ScheduleEvent` (with its :class:`StartStop`), :class:`MessagesEvent`,
  :class:`ProgressEvent`, :class:`PushProgressEvent`, :class:`CapabilityEvent`,
  :class:`ShutdownEvent` and :class:`ParkEvent`;
* progress bookkeeping: :class:`ChangeBatch` and :class:`MutableAntichain` (also at
  the top level, where the API contract has them);
* an operator's insides: :class:`OperatorBuilder` (declare ports, then build: the raw
  builder the generic ones stand on), its ports :class:`InputPort` and
  :class:`OperatorOutput`, the :class:`Session` an output sends through, and the
  :class:`TimeOrder` / :class:`TimedOrder` an input hands complete times over by.

The names that moved here from the top level (``InputPort``, ``OperatesEvent``, ...)
still work there, with a ``DeprecationWarning`` naming this module.
"""

from .dataflow.builder import OperatorBuilder as OperatorBuilder
from .dataflow.ports import InputPort as InputPort
from .dataflow.ports import OperatorOutput as OperatorOutput
from .dataflow.ports import Session as Session
from .dataflow.ports import TimedOrder as TimedOrder
from .dataflow.ports import TimeOrder as TimeOrder
from .progress import ChangeBatch as ChangeBatch
from .progress import MutableAntichain as MutableAntichain
from .worker.logging import TIMELY as TIMELY
from .worker.logging import CapabilityEvent as CapabilityEvent
from .worker.logging import ChannelsEvent as ChannelsEvent
from .worker.logging import LogRegistry as LogRegistry
from .worker.logging import Logger as Logger
from .worker.logging import MessagesEvent as MessagesEvent
from .worker.logging import OperatesEvent as OperatesEvent
from .worker.logging import ParkEvent as ParkEvent
from .worker.logging import ProgressEvent as ProgressEvent
from .worker.logging import PushProgressEvent as PushProgressEvent
from .worker.logging import ScheduleEvent as ScheduleEvent
from .worker.logging import ShutdownEvent as ShutdownEvent
from .worker.logging import StartStop as StartStop
from .worker.logging import TimelyEvent as TimelyEvent

__all__ = [
    "TIMELY", "LogRegistry", "Logger", "TimelyEvent", "StartStop", "OperatesEvent", "ChannelsEvent", "ScheduleEvent",
    "MessagesEvent", "ProgressEvent", "PushProgressEvent", "CapabilityEvent", "ShutdownEvent", "ParkEvent",
    "ChangeBatch", "MutableAntichain",
    "OperatorBuilder", "InputPort", "OperatorOutput", "Session", "TimeOrder", "TimedOrder",
]
