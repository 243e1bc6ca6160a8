"""Timely's ``UnorderedInput``: an input that sends at any time it holds a capability for.

An :class:`~aiotimely.dataflow.input.InputHandle` has one current time that only
moves forward. An unordered input instead hands its user a capability at the
minimum time, to send, keep, copy (``delayed``), move on (``downgrade``) or
drop, from outside the dataflow::

    (handle, cap), stream = scope.new_unordered_input()
    handle.session(cap.delayed(5)).give("late")      # at time 5 ...
    handle.session(cap).give("early")                # ... and then at time 0
    cap.downgrade(3)                                 # nothing more before 3

Its stream's frontier is the least time of the capabilities still held (and of
records waiting in the handle); once all are dropped, the stream is complete.
Capabilities still held when the worker's build ends are dropped then, as an
``InputHandle`` is closed.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Generic, Iterable

from ..errors import CapabilityError
from ..worker import wake_all
from .builder import OperatorBuilder
from .capability import Capability
from .operator import OperatorRuntime
from .input import BUFFERED, refusal
from .ports import BATCH_SIZE, OutputPort
from .stream import S

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from .scope import ScopeCore

    R = TypeVar("R", default=Any)
else:  # the default (PEP 696) is for type checkers: a bare UnorderedHandle is UnorderedHandle[Any]
    from typing import TypeVar

    R = TypeVar("R")

__all__ = ["ActivateCapability", "UnorderedHandle", "UnorderedSession", "new_unordered_input", "BUFFERED"]



class ActivateCapability(Capability):
    """A capability of an unordered input, held outside the dataflow (timely's ``ActivateCapability``):
    copying, moving or dropping it wakes the input's operator, whose activation is what tells the dataflow."""

    __slots__ = ("_handle",)

    def __init__(self, handle: UnorderedHandle[Any], time: Any, *, minted: bool = False) -> None:
        super().__init__(handle._op, 0, time, minted=minted)
        self._handle = handle
        handle._caps.add(self)

    def delayed(self, time: Any, output: int | None = None) -> ActivateCapability:
        """Another capability of the input, at ``time`` (not earlier than this one's)."""
        self._check_live("delay")
        if output not in (None, 0):
            raise CapabilityError(f"{self._op.describe()}: an unordered input has one output (0), not {output!r}")
        self._check_later(time, "delay")
        cap = ActivateCapability(self._handle, time)
        self._handle._wake()
        return cap

    def downgrade(self, time: Any) -> None:
        super().downgrade(time)
        self._handle._wake()

    def drop(self) -> None:
        super().drop()
        self._handle._wake()


class UnorderedHandle(Generic[R]):
    """Sends records into a dataflow at the time of any capability of its input that is still held:
    ``handle.session(cap).give(x)``. Each worker has its own; a time is complete once every worker's
    capabilities (and the records waiting in its handle) have passed it."""

    def __init__(self, op: OperatorRuntime, port: OutputPort) -> None:
        self._op = op
        self._port = port
        self._activator = op.activator()  # woken from outside: never taken for stuck while it waits
        self._open: dict[Any, tuple[Capability, list[Any]]] = {}   # records being given, by time
        self._ready: deque[tuple[Capability, list[Any]]] = deque()   # full batches, in the order given
        self._caps: weakref.WeakSet[ActivateCapability] = weakref.WeakSet()
        self._buffered = 0
        self._room: list[asyncio.Future[None]] = []
        self._failure: BaseException | None = None
        """The computation's failure: nothing is sent from then on."""

    def _computation_failed(self, error: BaseException) -> None:
        self._failure = error
        wake_all(self._room)

    def _check_running(self, action: str) -> None:
        if self._failure is not None:
            raise refusal(self._failure, f"{action} through the unordered input of {self._op.describe()}")

    def session(self, cap: Capability) -> UnorderedSession[R]:
        """A session sending at ``cap.time``; ``cap`` must be a capability of this input, still held."""
        op = self._op
        self._check_running("open a session")
        if not isinstance(cap, ActivateCapability) or cap._handle is not self:
            raise CapabilityError(f"{op.describe()}: session() needs a capability of this unordered input (the one "
                                  f"new_unordered_input() gave, or one delayed from it), got {cap!r}")
        cap._check_live("send with")
        return UnorderedSession(self, cap)

    async def wait_room(self) -> None:
        """Wait until at most :data:`BUFFERED` records wait in the handle for the dataflow to take them."""
        while self._buffered > BUFFERED:
            self._check_running("wait for room")
            fut = self._op.worker.waiter()
            self._room.append(fut)
            await fut

    def _records(self, cap: ActivateCapability, time: Any) -> list[Any]:
        """Where records given at ``time`` under ``cap`` wait: a batch that holds its time until it is sent."""
        if self._failure is not None:  # (_check_running, inline: once per record given)
            self._check_running("send")
        if not cap._live or cap._time != time or self._op.done:
            what = "dropped" if not cap._live or self._op.done else f"downgraded to {cap._time!r}"
            raise self._op.located(f"{self._op.describe()}: cannot send at time {time!r}: the session's "
                                   f"capability was {what} (open a session with a capability still held)",
                                   CapabilityError, time)
        entry = self._open.get(time)
        if entry is None:
            entry = self._open[time] = (Capability(self._op, 0, time), [])
            self._wake()
        return entry[1]

    def _given(self, time: Any, records: list[Any], count: int) -> None:
        self._buffered += count
        if len(records) >= BATCH_SIZE:
            self._ready.append(self._open.pop(time))

    def _wake(self) -> None:
        self._activator.activate()

    def _flush(self) -> None:
        """The operator's activation: send what waits, batch by batch, while there is room downstream."""
        ready, port, op = self._ready, self._port, self._op
        if self._open:
            ready.extend(self._open.values())
            self._open.clear()
        while ready:
            hold, batch = ready.popleft()
            port.push(hold.time, batch)
            self._buffered -= len(batch)
            hold.drop()
            if ready and op.wait_for_room():
                break  # the rest waits: the operator runs again when there is room
        if self._room and self._buffered <= BUFFERED:
            wake_all(self._room)

    def _close_at_build_end(self) -> None:
        """The worker's build is over: drop every capability still held (what was given is still sent)."""
        for cap in list(self._caps):
            if not cap.dropped and not self._op.done:
                cap.drop()

    def __repr__(self) -> str:
        held = sorted({cap.time for cap in self._caps if not cap.dropped}, key=repr)
        return f"UnorderedHandle(held at {held!r})"


class UnorderedSession(Generic[R]):
    """Sends records at one time through an :class:`UnorderedHandle`, while its capability stays there."""

    __slots__ = ("_handle", "_cap", "_time")

    def __init__(self, handle: UnorderedHandle[R], cap: ActivateCapability) -> None:
        self._handle = handle
        self._cap = cap
        self._time = cap.time

    @property
    def time(self) -> Any:
        return self._time

    def give(self, record: R) -> None:
        """Send one record."""
        handle = self._handle
        records = handle._records(self._cap, self._time)
        records.append(record)
        handle._given(self._time, records, 1)

    def give_many(self, records: Iterable[R]) -> None:
        """Send every record of an iterable."""
        handle = self._handle
        waiting = handle._records(self._cap, self._time)
        before = len(waiting)
        waiting.extend(records)
        handle._given(self._time, waiting, len(waiting) - before)


def new_unordered_input(scope: ScopeCore[S], name: str = "UnorderedInput") -> tuple[
        tuple[UnorderedHandle[Any], ActivateCapability], S]:
    """An unordered input of ``scope``: ``(handle, capability at the minimum time)`` and its stream."""
    builder = OperatorBuilder(scope, name)
    port, stream = builder.new_output()
    handle: UnorderedHandle[Any] = UnorderedHandle(builder.op, port)
    op = builder.build_raw(handle._flush)   # it holds the minimum time, as a count: the capability takes it
    cap = ActivateCapability(handle, op.ttype.minimum, minted=True)
    scope.worker.at_build_end(handle._close_at_build_end, scope.dataflow.index)
    scope.worker.watch_failure(handle, UnorderedHandle._computation_failed)
    result: S = stream
    return (handle, cap), result
