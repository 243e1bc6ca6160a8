"""The worker's log registry (timely's ``worker.log_register()``) and the events of the ``"timely"`` log.

A consumer binds a name to a callback: ``worker.log_register().insert("timely", callback)``.
The callback gets batches, ``callback(elapsed, [(elapsed, worker, event), ...])``,
as timely's ``|time, data|`` does: ``elapsed`` is seconds since the worker started
(``time.perf_counter``), ``worker`` the worker's index. Events are buffered and
handed over once per scheduling round (sooner if :data:`BUFFER` events pile up);
a last call with an empty batch says the log is closed (removed, replaced, or the
worker stopped). With nobody listening, every place that could log costs one
``None`` check and allocates nothing.

The ``"timely"`` events are plain records (named tuples), so that a consumer can
rebuild the graph (:class:`OperatesEvent`, :class:`ChannelsEvent`) and follow what
runs on it. An operator or scope is named by ``addr``, its path (dataflow index,
then child indices): unique on a worker and the same on every worker, it plays
the part of timely's operator ``id``. The events are defined here, though most are
produced by the dataflow layer: they are only tuples of numbers and names.
"""

from __future__ import annotations

import enum
import time as _time
from typing import Any, Callable, Generic, NamedTuple, TypeVar, Union

from ..errors import DataflowError
from ..progress import ProgressBatch, Source

__all__ = [
    "BUFFER",
    "TIMELY",
    "Action",
    "CapabilityEvent",
    "ChannelsEvent",
    "LogRegistry",
    "Logger",
    "MessagesEvent",
    "OperatesEvent",
    "ParkEvent",
    "ProgressEvent",
    "PushProgressEvent",
    "ScheduleEvent",
    "ShutdownEvent",
    "StartStop",
    "TimelyEvent",
    "progress_event",
]

E = TypeVar("E")

TIMELY = "timely"
"""The name of the log the runtime writes :data:`TimelyEvent` s to."""

BUFFER = 1024
"""Events a logger holds before it hands them over, even in the middle of a round."""

Action = Callable[[float, list[tuple[float, int, Any]]], None]
"""A log's consumer: ``action(elapsed, batch)``, ``batch`` a list of ``(elapsed, worker, event)``."""


class StartStop(enum.Enum):
    """Whether a :class:`ScheduleEvent` marks the start or the end of an activation."""

    START = "start"
    STOP = "stop"


class OperatesEvent(NamedTuple):
    """An operator, or a scope (``region``, ``iterative``, a dataflow's root), was created."""

    addr: tuple[int, ...]
    name: str


class ChannelsEvent(NamedTuple):
    """A channel was connected in the scope at ``scope_addr``: from output ``source = (child, port)`` to input
    ``target = (child, port)`` (child ``0`` is the scope itself: its inputs are sources, its outputs targets)."""

    id: tuple[int, int]
    scope_addr: tuple[int, ...]
    source: tuple[int, int]
    target: tuple[int, int]


class ScheduleEvent(NamedTuple):
    """An operator or scope at ``addr`` starts or stops one activation."""

    addr: tuple[int, ...]
    start_stop: StartStop


class MessagesEvent(NamedTuple):
    """A batch of ``length`` records at ``time`` on channel ``channel``.

    Sent (``is_send``): by worker ``source`` to worker ``target``, once per destination. Received: taken by an
    operator of worker ``target`` during one activation, all its batches at one time together; ``source`` is
    ``None`` (a mailbox does not say who filled it).
    """

    is_send: bool
    channel: tuple[int, int]
    source: int | None
    target: int
    time: Any
    length: int


class ProgressEvent(NamedTuple):
    """A progress batch of the scope at ``addr``, sent by this worker or received from worker ``source``.

    ``messages`` are changes at operator inputs (records in flight), ``internal`` at operator outputs
    (capabilities), each ``(child, port, time, diff)``.
    """

    is_send: bool
    source: int
    channel: tuple[int, int]
    seq_no: int
    addr: tuple[int, ...]
    messages: list[tuple[int, int, Any, int]]
    internal: list[tuple[int, int, Any, int]]


class PushProgressEvent(NamedTuple):
    """The operator at ``addr`` is told that its input frontiers changed."""

    addr: tuple[int, ...]


class CapabilityEvent(NamedTuple):
    """The operator at ``addr`` holds ``diff`` more (or fewer) capabilities for ``output`` at ``time``."""

    addr: tuple[int, ...]
    output: int
    time: Any
    diff: int


class ShutdownEvent(NamedTuple):
    """The operator or scope at ``addr`` is complete: it will not run again."""

    addr: tuple[int, ...]


class ParkEvent(NamedTuple):
    """The worker goes to sleep (``parked``), having nothing to run, or wakes up."""

    parked: bool


def progress_event(batch: ProgressBatch, is_send: bool, channel: tuple[int, int]) -> ProgressEvent:
    """The :class:`ProgressEvent` of ``batch``, sent or received on a scope's progress ``channel``."""
    messages: list[tuple[int, int, Any, int]] = []
    internal: list[tuple[int, int, Any, int]] = []
    for location, time, diff in batch.changes:
        (internal if type(location) is Source else messages).append((location[0], location[1], time, diff))
    return ProgressEvent(is_send, batch.sender, channel, batch.seq, batch.path, messages, internal)


TimelyEvent = Union[OperatesEvent, ChannelsEvent, ScheduleEvent, MessagesEvent, ProgressEvent, PushProgressEvent,
                    CapabilityEvent, ShutdownEvent, ParkEvent]
"""What the runtime writes to the ``"timely"`` log (timely's ``TimelyEvent``)."""


class Logger(Generic[E]):
    """One named log of one worker: buffers ``(elapsed, worker, event)`` and hands batches to its action."""

    __slots__ = ("name", "_worker", "_action", "_start", "_buffer", "_closed", "_fail")

    def __init__(self, name: str, worker: int, action: Action, start: float,
                 fail: Callable[[BaseException], None]) -> None:
        self.name = name
        self._worker = worker
        self._action = action
        self._start = start
        self._buffer: list[tuple[float, int, Any]] = []
        self._closed = False
        self._fail = fail

    def log(self, event: E) -> None:
        """Record ``event`` now."""
        buffer = self._buffer
        buffer.append((_time.perf_counter() - self._start, self._worker, event))
        if len(buffer) >= BUFFER:
            self.flush()

    def flush(self) -> None:
        """Hand the events recorded so far to the action (nothing if there are none)."""
        if self._buffer:
            batch, self._buffer = self._buffer, []
            if not self._closed:
                self._call(batch)

    def close(self) -> None:
        """Flush, then tell the action that nothing more will come (an empty batch)."""
        if not self._closed:
            self.flush()
            self._call([])
            self._closed = True

    @property
    def closed(self) -> bool:
        """True once the log was removed or replaced: what is logged after that is dropped."""
        return self._closed

    def _call(self, batch: list[tuple[float, int, Any]]) -> None:
        try:
            self._action(_time.perf_counter() - self._start, batch)
        except Exception as exc:  # the consumer's fault: stop calling it, and stop the computation, saying so
            self._closed = True
            error = DataflowError(f"the {self.name!r} log callback of worker {self._worker} failed: "
                                  f"{type(exc).__name__}: {exc}", worker=self._worker)
            error.__cause__ = exc
            self._fail(error)

    def __repr__(self) -> str:
        return f"Logger({self.name!r}, worker={self._worker}{', closed' if self._closed else ''})"


class LogRegistry:
    """A worker's logs by name (timely's ``Registry``): ``insert(name, action)``, ``remove(name)``, ``get(name)``.

    ``"timely"`` (:data:`TIMELY`) is the runtime's own log of :data:`TimelyEvent` s; other names are the
    application's, written through :meth:`get`. Events of one log reach its action in the order logged.
    """

    def __init__(self, worker: int, fail: Callable[[BaseException], None],
                 on_timely: Callable[[Logger[TimelyEvent] | None], None]) -> None:
        self._worker = worker
        self._fail = fail
        self._on_timely = on_timely
        self._start = _time.perf_counter()
        self._loggers: dict[str, Logger[Any]] = {}

    def insert(self, name: str, action: Action) -> Action | None:
        """Send the events of log ``name`` to ``action(elapsed, batch)`` from now on; returns the action this
        replaces (which gets what was logged before, then its closing empty batch), or ``None``."""
        if not isinstance(name, str):
            raise TypeError(f"a log's name is a str, not {name!r}")
        if not callable(action):
            raise TypeError(f"the action of log {name!r} must be callable as action(elapsed, batch), "
                            f"not {action!r}")
        previous = self.remove(name)
        logger: Logger[Any] = Logger(name, self._worker, action, self._start, self._fail)
        self._loggers[name] = logger
        if name == TIMELY:
            self._on_timely(logger)
        return previous

    def remove(self, name: str) -> Action | None:
        """Stop log ``name``: its action gets what is buffered, then an empty batch. Returns that action, or
        ``None`` if no action was bound to ``name``."""
        logger = self._loggers.pop(name, None)
        if logger is None:
            return None
        if name == TIMELY:
            self._on_timely(None)
        logger.close()
        return logger._action

    def get(self, name: str) -> Logger[Any] | None:
        """The logger of ``name``, to write an application's own events to, or ``None`` if none is bound."""
        return self._loggers.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._loggers

    def __bool__(self) -> bool:
        return bool(self._loggers)

    def elapsed(self) -> float:
        """Seconds since the worker started, as log events are stamped."""
        return _time.perf_counter() - self._start

    def flush(self) -> None:
        """Hand every log's buffered events to its action (the scheduler does so after each round)."""
        for logger in list(self._loggers.values()):
            logger.flush()

    def close(self) -> None:
        """The worker stops: flush and close every log (each action gets its closing empty batch)."""
        for name in list(self._loggers):
            self.remove(name)

    def __repr__(self) -> str:
        return f"LogRegistry(worker={self._worker}, logs={sorted(self._loggers)})"
