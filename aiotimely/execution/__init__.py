"""Running a computation: :class:`Worker`, ``execute(build, workers=W)`` and ``execute_from_args``.

All the workers of one process share one event loop. Python runs one thread of
bytecode at a time, so threads would add locking and hand-off costs without adding
parallelism; on one loop, records pass between workers by reference, without
locks or copies, and the workers take turns round by round. Parallelism comes from
processes (``processes=N``), which talk over TCP (:mod:`aiotimely.comm.cluster`).

The package's modules, each building on the ones before: :mod:`.stopping` (the grace period, the words of
the line that says how a stop went), :mod:`.signals` (the signals :func:`execute` takes over), :mod:`.servers`
(a process's metrics and live page), :mod:`.worker` (the :class:`Worker` facade), :mod:`.supervisor` (the
tasks of a process's workers, and how they stop), :mod:`.run` (``execute``, ``execute_async``,
``execute_from_args``). The command line's options are :mod:`aiotimely.options`'s, re-exported here.
"""

from ..options import add_options as add_options
from ..options import execute_options as execute_options
from ..options import parse_args as parse_args
from .run import execute as execute
from .run import execute_async as execute_async
from .run import execute_from_args as execute_from_args
from .stopping import STOP_GRACE as STOP_GRACE
from .stopping import stop_grace as stop_grace
from .worker import Worker as Worker

__all__ = ["Worker", "execute", "execute_async", "execute_from_args", "parse_args", "execute_options", "add_options",
           "stop_grace", "STOP_GRACE"]
