"""Layer 5: connectors — how data gets in and out.

``aiter`` (async iterators and async callables), ``threads`` (blocking callables) and ``events``
(captured streams over TCP, ``EventWriter``/``EventReader``) need nothing more; ``kafka``,
``websockets`` and ``spark`` need their extras: ``pip install 'aiotimely[kafka]'``,
``[websockets]``, ``[spark]``, or ``[all]``.
"""

from .aiter import EventTime as EventTime
from .aiter import EveryBatch as EveryBatch
from .aiter import TimePolicy as TimePolicy
from .aiter import WallClock as WallClock
from .aiter import from_aiter as from_aiter
from .aiter import to_async as to_async
from .events import EventReader as EventReader
from .events import EventWriter as EventWriter
from .threads import to_thread as to_thread

__all__ = ["EventReader", "EventTime", "EventWriter", "EveryBatch", "TimePolicy", "WallClock", "from_aiter",
           "to_async", "to_thread"]
