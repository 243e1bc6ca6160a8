"""An operator's ports: counted inputs, outputs with sessions, and activators.

Records move in batches: ``(time, list)``. An :class:`InputPort` is the only
thing that takes batches out of an operator's mailbox, and it counts every batch
it hands out as consumed; an :class:`OutputPort` counts every batch it sends as
produced. Those counts are the progress the scope reports for the operator, so an
operator cannot forget them: it only ever sees the ports.
"""

from __future__ import annotations

import asyncio
from _thread import get_ident as _get_ident
from bisect import bisect_left, bisect_right
from operator import itemgetter
from typing import (TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine, Generator, Iterable, Iterator, Protocol,
                    Sequence, TypeVar)

from ..comm.local import Mailbox
from ..errors import CapabilityError
from ..progress import Antichain, ChangeBatch, MutableAntichain
from .capability import Capability, CapabilityOwner, CapabilityRef
from .channels import Pusher, push_to_all
from .containers import nbytes

if TYPE_CHECKING:
    from ..errors import DataflowError
    from .recovering import OperatorRecovery
    from .roles import SnapshotterRole


class _Dataflow(Protocol):
    @property
    def snapshotter(self) -> SnapshotterRole | None: ...


class _Scope(Protocol):
    @property
    def dataflow(self) -> _Dataflow: ...


class PortOwner(CapabilityOwner, Protocol):
    """What an operator's ports, sessions and activators use of it
    (:class:`~aiotimely.dataflow.operator.OperatorRuntime`)."""

    current_time: Any
    poked: bool

    @property
    def index(self) -> int: ...

    @property
    def path(self) -> tuple[int, ...]: ...

    @property
    def scope(self) -> _Scope: ...

    @property
    def running(self) -> int: ...

    @property
    def inputs(self) -> Sequence[InputPort]: ...

    @property
    def outputs(self) -> Sequence[OutputPort]: ...

    @property
    def recovery(self) -> OperatorRecovery: ...

    @property
    def pacts(self) -> Sequence[str]: ...

    @property
    def routed(self) -> Sequence[bool]: ...

    def start_soon(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]: ...

    def activator(self) -> Activator: ...

    def passes_unchanged(self, input: int, output: int) -> bool: ...

    def inputs_complete(self) -> bool: ...

    def news(self) -> int: ...

    def refresh_frontiers(self) -> bool: ...

    def buffered(self, port: OutputPort) -> None: ...

    def located(self, message: str, kind: type[DataflowError] | type[CapabilityError] = ...,
                time: Any = None, stage: str | None = None) -> DataflowError | CapabilityError: ...

__all__ = [
    "BATCH_SIZE",
    "ACTIVATION",
    "NEXT_ACTIVATION",
    "InputPort",
    "OperatorInput",
    "TimeOrder",
    "TimedOrder",
    "OutputPort",
    "Session",
    "OperatorOutput",
    "Activator",
]

T = TypeVar("T")

BATCH_SIZE = 1024
"""Records a session buffers before it hands them on as one batch."""

ACTIVATION = object()
"""What an operator's coroutine yields to wait for its next activation."""


class _NextActivation:
    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield ACTIVATION


NEXT_ACTIVATION = _NextActivation()

_UNBOUND = ChangeBatch[Any]()


class InputPort:
    """An operator's input: the batches that arrived, counted as they are taken, and the input's frontier.

    Built-in operators take ``(time, records)`` with :meth:`batches`; logic that may
    keep a time takes ``(CapabilityRef, records)`` with :meth:`drain`. Either way the
    batch is counted as consumed when it is handed out.
    """

    __slots__ = ("_op", "port", "_mailbox", "_queue", "_frontier", "_consumed", "_watch", "changes", "taken",
                 "records")

    def __init__(self, op: PortOwner, port: int, mailbox: Mailbox) -> None:
        self._op = op
        self.port = port
        self._mailbox = mailbox
        self._queue = mailbox.queue
        ttype = op.ttype
        self._frontier = MutableAntichain(less_equal=ttype.less_equal, totally_ordered=ttype.totally_ordered)
        self._consumed: ChangeBatch[Any] = _UNBOUND
        self._watch: list[tuple[Any, int]] | None = None
        self.changes = 0
        """How many times the frontier has changed (so the logic can tell whether it saw the latest)."""
        self.taken = 0
        """How many batches have been taken from this input."""
        self.records = 0
        """How many records have been taken from this input (a statistic: see :mod:`aiotimely.observe.metrics`)."""

    def bind(self, consumed: ChangeBatch[Any]) -> None:
        """(For the operator's runtime.) Count into ``consumed`` (the operator's progress books), once the operator
        is built."""
        self._consumed = consumed

    def listen(self, activate: Callable[[], None]) -> None:
        """(For the operator's runtime.) Call ``activate`` whenever a batch arrives (and now, if some wait
        already)."""
        self._mailbox.listen(activate)

    # -- taking batches --------------------------------------------------------------

    def batches(self) -> Iterator[tuple[Any, list[Any]]]:
        """Take every batch waiting at this input, as ``(time, records)``."""
        queue, consumed, op = self._queue, self._consumed, self._op
        while queue:
            time, batch = queue.popleft()
            if type(batch) is not list:
                self._mailbox.weigh(-nbytes(batch))
            n = len(batch)
            consumed.update(time, n)
            self.taken += 1
            self.records += n
            op.current_time = time
            yield time, batch

    def count_fed(self, time: Any, n: int) -> None:
        """Count a batch of ``n`` records at ``time`` handed to the operator by its producer's push, not through
        the mailbox (a fused chain: see :mod:`.fusion`) as taken here."""
        self._consumed.update(time, n)
        self.taken += 1
        self.records += n

    def drain(self) -> Iterator[tuple[CapabilityRef, list[Any]]]:
        """Take every batch waiting at this input, as ``(time, records)``; ``time`` is a :class:`CapabilityRef`."""
        op, port = self._op, self.port
        for time, batch in self.batches():
            yield CapabilityRef(op, port, time), batch

    def next(self) -> tuple[CapabilityRef, list[Any]] | None:
        """The next waiting batch, or ``None``."""
        for time, batch in self.batches():
            return CapabilityRef(self._op, self.port, time), batch
        return None

    def discard(self) -> None:
        """Take and forget everything waiting (the operator has finished)."""
        for _ in self.batches():
            pass

    # -- the frontier ------------------------------------------------------------------

    @property
    def frontier(self) -> Antichain[Any]:
        """The times that may still arrive here (as of this activation)."""
        return self._frontier.frontier

    def less_equal(self, time: Any) -> bool:
        """True if records at ``time`` may still arrive (``frontier.less_equal(time)``)."""
        return self._frontier.less_equal(time)

    def frontier_changed(self, changes: dict[Any, int]) -> None:
        """(For the operator's runtime.) Apply the frontier changes progress tracking pushed, ``{time: ±n}``."""
        frontier = self._frontier
        if frontier._total:
            frontier.update_total(changes.items())
        else:
            frontier.update_iter(changes.items())
        self.changes += 1
        if self._watch is not None:
            self._watch.extend(changes.items())

    def watch_frontier(self) -> Callable[[], list[tuple[Any, int]]]:
        """Record how this input's frontier changes; the function returned takes the changes since its
        last call, starting from ``{minimum}`` (its first call retracts that initial element)."""
        self._watch = [(self._op.ttype.minimum, -1)]

        def take() -> list[tuple[Any, int]]:
            changes = self._watch
            if changes:
                self._watch = []
            return changes or []

        return take

    def is_complete(self) -> bool:
        """True once nothing more can arrive and nothing waits: the input is done."""
        return not self._frontier._frontier and not self._queue

    def pending(self) -> int:
        """How many batches wait to be taken."""
        return len(self._queue)

    def queued(self) -> tuple[int, int, int]:
        """What waits to be taken: batches, records, and what the containers among them weigh in bytes."""
        queue = self._queue
        return len(queue), sum(len(batch) for _, batch in queue), self._mailbox.bytes

    def make_room(self) -> None:
        """(For the operator's runtime.) The operator took from this input: wake the producers waiting for room
        in its mailbox, if it is down to half its bound."""
        self._mailbox.room()

    def queued_times(self) -> list[Any]:
        """The time of each batch waiting to be taken, oldest first."""
        return [time for time, _ in self._queue]

    def start_soon(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a helper task of the operator, owned by its worker (see
        :meth:`OperatorOutput.start_soon`)."""
        return self._op.start_soon(coro, name=name)

    def state(self, name: str, initial: Callable[[], T]) -> T:
        """A value this operator keeps on this worker (see :meth:`OperatorOutput.state`)."""
        return self._op.recovery.keep(name, initial)

    def keyed_state(self, name: str, initial: Callable[[], T]) -> T:
        """A dict this operator keeps by key (see :meth:`OperatorOutput.keyed_state`): this input must be routed
        by key (``exchange=`` on the operator, or ``.exchange(key)`` before it) when there are several workers."""
        _check_routed(self._op, name, [self.port])
        return self._op.recovery.keep(name, initial, keyed=True)

    def time_order(self) -> TimeOrder:
        """Hold what arrives until its time is complete, then hand it over time by time, in order::

            order = input.time_order()
            async for _ in input.activations():
                for cap, records in order.ready():
                    ...                                  # apply the records of time cap.time

        Applying times in order is what makes an operator's kept state (``state``, ``keyed_state``)
        snapshot-able: between two times it is the state as of a cut, and that is when it is saved."""
        return TimeOrder([self])

    def timed_order(self) -> TimedOrder:
        """For a timed stream (records ``(time, record)`` sent with :meth:`Session.give_at`): hold the records
        until their own time is complete, then hand them over time by time, in order, with one capability
        to send timed output at those times::

            order = input.timed_order()
            async for _ in input.activations():
                for time, records in order.ready():
                    order.session(output).give_many_at(time, ...)   # timed output, at the record's time

        It holds a capability exactly while records wait: declare the operator with
        ``interest=FrontierInterest.IF_CAPABILITY``, and frontier changes wake it only then.
        """
        return TimedOrder(self)

    def activations(self) -> AsyncIterator[None]:
        """Iterate once per activation of the operator; stops after the operator saw every input complete.

        The first iteration is the activation in progress. The loop ends when, at the
        end of an iteration, every input of the operator is complete and drained, so
        the last iteration sees the empty frontier and can flush what it holds.
        """
        return _Activations(self._op)

    def __repr__(self) -> str:
        return f"InputPort({self._op.name!r}, port={self.port}, frontier={self.frontier})"


OperatorInput = InputPort
"""The name an operator's logic knows its inputs by."""


class TimeOrder:
    """:meth:`InputPort.time_order`: records held until their time is complete, then handed over time by time,
    in order, with the operator's kept state cut between times (which is what snapshots are made of).

    Over several inputs (:meth:`joint`), a time is handed over once it is complete on all of them, with the
    records of each.
    """

    __slots__ = ("_ports", "_pending")

    def __init__(self, ports: list[InputPort]) -> None:
        self._ports = ports
        self._pending: dict[Any, tuple[Capability, list[list[Any]]]] = {}

    @classmethod
    def joint(cls, ports: list[InputPort]) -> TimeOrder:
        """One order over several inputs of an operator: use :meth:`ready_all`."""
        return cls(ports)

    def ready(self) -> Iterator[tuple[Capability, list[Any]]]:
        """Take what arrived; then each complete time, in order, with its records (``cap`` is a capability
        at that time, dropped when the loop moves on). Before each time the operator's state is cut (it is
        the state as of that time), and once the times are done it is cut at the frontier: do what the
        frontier alone completes (closing windows) after this loop, not before."""
        for cap, records in self.ready_all():
            yield cap, records[0]

    def ready_all(self) -> Iterator[tuple[Capability, list[list[Any]]]]:
        """:meth:`ready` over every input of the order: the records of each input at that time."""
        ports, pending = self._ports, self._pending
        op = ports[0]._op
        for i, port in enumerate(ports):
            for ref, batch in port.drain():
                entry = pending.get(ref.time)
                if entry is None:
                    entry = pending[ref.time] = (ref.retain(), [[] for _ in ports])
                entry[1][i].extend(batch)
        for time in sorted(t for t in pending if not any(port.less_equal(t) for port in ports)):
            cap, records = pending.pop(time)
            op.recovery.cut(time)  # every time before this one is applied, and none after
            try:
                yield cap, records
            finally:
                if not cap.dropped:
                    cap.drop()
        lows = [min(frontier) for frontier in (list(port.frontier) for port in ports) if frontier]
        if lows:
            op.recovery.cut(min(lows))
        elif not pending:
            op.recovery.finish()  # nothing more will come: the state stands for every later snapshot

    def pending(self) -> list[Any]:
        """The times held, not yet complete."""
        return sorted(self._pending)


class TimedOrder:
    """:meth:`InputPort.timed_order`: a timed stream's records by their own times, handed over once complete.

    Every record of a timed stream carries its time, not earlier than the time of the batch it came in; so
    once the input frontier has passed a record's time, no record at that time can come any more. The
    order keeps one capability per minimal pending time (one, for totally ordered times), moved once per
    activation to the earliest time still pending: many record times cost one capability, one batch and
    one progress update, not one each. With totally ordered times the records wait in one list, sorted by
    time when the frontier moves (stable: records of one time stay in arrival order), so a record costs the
    same whether it shares its time with others or has one of its own.
    """

    __slots__ = ("_port", "_pending", "_flat", "_held", "_le", "_total", "_sessions", "_unchanged")

    def __init__(self, port: InputPort) -> None:
        self._port = port
        self._pending: dict[Any, list[Any]] = {}          # partially ordered times: time -> records
        self._flat: list[tuple[Any, Any]] = []            # totally ordered times: the (time, record) pairs
        self._held: list[Capability] = []
        self._sessions: dict[tuple[int, int], Session] = {}   # (output, held index) -> session, until it moves
        ttype = port._op.ttype
        self._le = ttype.less_equal
        self._total = ttype.totally_ordered
        self._unchanged: bool | None = None   # the input reaches output 0 unchanged (known once built)

    def ready(self) -> Iterator[tuple[Any, list[Any]]]:
        """Take what arrived; then each complete record time, in order, with its records. Inside the loop,
        :meth:`session` sends timed output at the times handed over; after it, the capability moves to the
        earliest time still pending (or is dropped).

        When what it just took may be all that holds the input frontier back (a batch at a time of the
        frontier), it holds a capability for it and brings the frontier up to date at once
        (:meth:`OperatorRuntime.refresh_frontiers`), so the times that completes are handed over in this
        activation rather than the next."""
        if self._total:
            due = self._due_total()
            participant = self._port._op.recovery.participant
            i, n = 0, len(due)
            try:
                while i < n:
                    time = due[i][0]
                    j = bisect_right(due, time, lo=i, key=_first)
                    records = [record for _, record in due[i:j]]
                    i = j
                    if participant is not None:
                        participant.cut(time)  # every time before this one is applied, and none after
                    yield time, records
            finally:
                if i < n:  # the loop stopped early: what it did not get stays pending
                    self._flat[:0] = due[i:]
        else:
            yield from self._ready_partial()
        self._done()

    def records(self) -> Iterator[tuple[Any, Any]]:
        """Like :meth:`ready`, one record at a time: every complete ``(time, record)``, in time order (records of
        one time in the order they came). The cheapest way through many distinct times: a record costs the
        same whether it shares its time or not. Inside the loop, a session from :meth:`session` sends timed
        output (``give_at(time, ...)``) at the times handed over."""
        if not self._total:
            for time, records in self._ready_partial():
                rest = iter(records)
                try:
                    for record in rest:
                        yield time, record
                finally:
                    left = list(rest)
                    if left:  # the loop stopped early: what it did not get stays pending
                        self._pending[time] = left
        else:
            rest = iter(self._due_total())
            participant = self._port._op.recovery.participant
            try:
                if participant is None:
                    yield from rest
                else:
                    last = _NOTHING
                    for pair in rest:
                        if pair[0] != last:
                            last = pair[0]
                            participant.cut(last)
                        yield pair
            finally:
                left = list(rest)
                if left:  # the loop stopped early: what it did not get stays pending
                    self._flat[:0] = left
        self._done()

    def _take(self) -> None:
        """Take every waiting batch, holding a capability for its time; bring the frontier up to date at once
        when what it took may be all that held it back (see :meth:`ready`)."""
        port, pending, held, le, total = self._port, self._pending, self._held, self._le, self._total
        op = port._op
        first = not port._consumed.diffs  # nothing was taken from this input before, in this activation
        taken: list[Any] = []
        flat = self._flat
        unchanged = self._unchanged
        if unchanged is None:
            unchanged = self._unchanged = op.passes_unchanged(port.port, 0)
        for batch_time, batch in port.batches():
            if not (held and le(held[0].time, batch_time) if total else
                    any(le(cap.time, batch_time) for cap in held)):
                for cap in [cap for cap in held if le(batch_time, cap.time)]:
                    held.remove(cap)
                    cap.drop()
                # (a batch's time is valid, and an input that reaches output 0 unchanged justifies it there)
                held.append(Capability(op, 0, batch_time) if unchanged else
                            CapabilityRef(op, port.port, batch_time).retain())
                self._sessions.clear()
            taken.append(batch_time)
            if total:
                flat.extend(batch)
                continue
            for time, record in batch:
                records = pending.get(time)
                if records is None:
                    pending[time] = [record]
                else:
                    records.append(record)
        if not taken or not first:
            return
        frontier = port._frontier._frontier
        # What was just taken may be all that holds the frontier: every record taken is held by a capability
        # now, so report that at once and look again, instead of in the next activation.
        if any(t in frontier for t in taken) and not op.books.consumed_elsewhere(port.port):
            op.refresh_frontiers()

    def _due_total(self) -> list[tuple[Any, Any]]:
        """Totally ordered times: take what arrived, and remove and return the pairs whose time is complete,
        sorted by time."""
        self._take()
        flat = self._flat
        if not flat:
            return []
        frontier = self._port._frontier._frontier
        flat.sort(key=_first)
        if not frontier:
            due = flat[:]
            flat.clear()
            return due
        cut = bisect_left(flat, frontier[0], key=_first)
        due = flat[:cut]
        del flat[:cut]
        return due

    def _ready_partial(self) -> Iterator[tuple[Any, list[Any]]]:
        """Partially ordered times: take what arrived, then each complete time with its records."""
        self._take()
        port, pending = self._port, self._pending
        participant = port._op.recovery.participant
        for time in sorted(t for t in pending if not port.less_equal(t)):
            if participant is not None:
                participant.cut(time)
            yield time, pending.pop(time)

    def _done(self) -> None:
        """After handing over: cut the state at the frontier (or finish it), and move the capabilities."""
        op = self._port._op
        frontier = self._port._frontier._frontier
        if frontier:
            if self._total:
                op.recovery.cut(frontier[0])
        elif not self._flat and not self._pending:
            op.recovery.finish()
        self._settle()

    def _settle(self) -> None:
        """Hold capabilities at the minimal pending times only."""
        held, pending, flat = self._held, self._pending, self._flat
        self._sessions.clear()
        if not pending and not flat:
            for cap in held:
                cap.drop()
            held.clear()
            return
        if self._total:
            least = flat[0][0]   # sorted by _due_total
            if held[0].time != least:
                held[0].downgrade(least)
            return
        le = self._le
        minimal = [t for t in pending if not any(le(u, t) and u != t for u in pending)]
        new = [next(cap for cap in held if le(cap.time, t)).delayed(t) for t in minimal]
        for cap in held:
            cap.drop()
        held[:] = new

    def capability(self, time: Any = None) -> Capability:
        """The capability held at or before ``time`` (with totally ordered times, the one held): valid inside
        the loop over :meth:`ready` for the times handed over; ``cap.delayed(t)`` keeps a time longer."""
        le = self._le
        for cap in self._held:
            if time is None or le(cap.time, time):
                return cap
        raise CapabilityError(f"{self._port._op.describe()}: the timed order holds no time at or before "
                              f"{time!r}: use it inside the loop over ready()")

    def session(self, output: OperatorOutput, time: Any = None) -> Session:
        """A session on ``output`` for timed output at the times being handed over (or later); with times
        that are not totally ordered, say which ``time`` it is for."""
        if time is None and self._held:
            key = (output._port.index, 0)
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = output.session(self._held[0])
            return session
        return output.session(self.capability(time))

    def pending(self) -> list[Any]:
        """The record times held, not yet complete."""
        return sorted(self._pending) if not self._total else sorted({time for time, _ in self._flat})


class _Activations:
    """One step per activation; a step comes at once when something arrived that the logic has not seen
    (input waiting, a frontier change, an activator's call), even if it arrived while the logic awaited
    something else."""

    __slots__ = ("_op", "_first", "_seen")

    def __init__(self, op: PortOwner) -> None:
        self._op = op
        self._first = True
        self._seen = 0

    def __aiter__(self) -> _Activations:
        return self

    async def __anext__(self) -> None:
        op = self._op
        if self._first:
            self._first = False
        else:
            if op.inputs_complete():
                raise StopAsyncIteration
            if not op.poked and op.news() == self._seen:
                await NEXT_ACTIVATION
        op.poked = False
        self._seen = op.news()
        return None


class OutputPort:
    """An operator output: counts records per time, hands batches to the consumers' pushers.

    Records given through sessions are buffered here, one buffer per output, so that
    what an operator sends leaves in the order it was given, whichever session gave it.
    """

    __slots__ = ("op", "index", "pushers", "produced", "tracked", "records", "_buffer", "_time", "_owner")

    def __init__(self, op: PortOwner, index: int) -> None:
        self.op = op
        self.index = index
        self.pushers: list[Pusher] = []
        self.produced: ChangeBatch[Any] = _UNBOUND
        self.tracked = False
        """The operator is a source keeping its position: it is told the times it sends at."""
        self.records = 0
        """How many records this output has sent (a statistic: see :mod:`aiotimely.observe.metrics`)."""
        self._buffer: list[Any] = []
        self._time: Any = None
        self._owner: Session | None = None

    def push(self, time: Any, batch: list[Any]) -> None:
        """Send ``batch`` at ``time`` to every consumer."""
        n = len(batch)
        self.produced.update(time, n)
        self.records += n
        if self.tracked:
            self.op.recovery.sent(time)
        push_to_all(self.pushers, time, batch)

    def _switch(self, session: Session) -> None:
        owner = self._owner
        if self._buffer:
            if owner is not None and owner._cap is session._cap and owner.time == session.time:
                self._owner = session  # another session for the same capability: the batch goes on
                return
            self.flush()
        elif owner is None:
            self.op.buffered(self)
        self._owner = session
        self._time = session.time

    def flush(self) -> None:
        """Hand the buffered records on now."""
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self.push(self._time, batch)

    def release(self) -> None:
        """The operator yielded: flush, and make the next session check its capability again."""
        self.flush()
        self._owner = None

    def retire(self, cap: Capability) -> None:
        """``cap`` is about to be dropped or downgraded: send what its session gave, and make that session
        check its capability again before it gives more (so ``give`` itself need not check)."""
        owner = self._owner
        if owner is not None and owner._cap is cap:
            self.release()


class Session:
    """Sends records at one time on one output, in batches."""

    __slots__ = ("_port", "_time", "_cap")

    def __init__(self, port: OutputPort, time: Any, cap: Capability | CapabilityRef) -> None:
        self._port = port
        self._time = time
        self._cap = cap

    @property
    def time(self) -> Any:
        return self._time

    def _check(self) -> None:
        cap = self._cap
        if isinstance(cap, Capability):
            if cap.dropped or cap._op.done:
                raise CapabilityError(
                    f"{self._port.op.describe()}: cannot send at time {self._time!r}: its capability was dropped"
                )
            if cap.time != self._time:
                raise CapabilityError(
                    f"{self._port.op.describe()}: cannot send at time {self._time!r}: its capability was "
                    f"downgraded to {cap.time!r} (open a new session)"
                )
        else:
            cap._check_valid()

    def _buffer(self) -> list[Any]:
        """The output's buffer, once this session may write to it: the session that owns the buffer is
        valid (the port takes ownership back when its capability is dropped or downgraded)."""
        port = self._port
        if port._owner is not self:
            self._check()
            port._switch(self)
        return port._buffer

    def give(self, record: Any) -> None:
        """Send one record."""
        port = self._port
        buffer = port._buffer if port._owner is self else self._buffer()
        buffer.append(record)
        if len(buffer) >= BATCH_SIZE:
            port.flush()

    def give_many(self, records: Any) -> None:
        """Send every record of an iterable."""
        buffer = self._buffer()
        buffer.extend(records)
        if len(buffer) >= BATCH_SIZE:
            self._port.flush()

    def give_container(self, container: Any) -> None:
        """Send a whole batch as it is: a list, or a registered container (see :mod:`.containers`), after what this
        session gave before it. It is not copied: the consumers may keep it or change it."""
        port = self._port
        if port._owner is not self:
            self._buffer()
        port.flush()
        if len(container):
            port.push(self._time, container)

    def give_at(self, time: Any, record: Any) -> None:
        """Send ``record`` as a timed record, ``(time, record)``: it carries its own time, not earlier than the
        session's (a timed stream: read it with :meth:`InputPort.timed_order`)."""
        port = self._port
        if not port.op.ttype.less_equal(self._time, time):
            raise self._too_early(time)
        buffer = port._buffer if port._owner is self else self._buffer()   # (give, inline: once per record)
        buffer.append((time, record))
        if len(buffer) >= BATCH_SIZE:
            port.flush()

    def give_many_at(self, time: Any, records: Any) -> None:
        """Send every record of an iterable as a timed record at ``time``."""
        port = self._port
        if not port.op.ttype.less_equal(self._time, time):
            raise self._too_early(time)
        buffer = port._buffer if port._owner is self else self._buffer()
        buffer.extend([(time, record) for record in records])
        if len(buffer) >= BATCH_SIZE:
            port.flush()

    def give_timed(self, pairs: list[tuple[Any, Any]]) -> None:
        """Send ``(time, record)`` pairs as timed records, none earlier than the session's time."""
        ttype = self._port.op.ttype
        if ttype.totally_ordered:
            if pairs:
                least = min(map(_first, pairs))
                if least < self._time:
                    raise self._too_early(least)
        else:
            for time, _ in pairs:
                if not ttype.less_equal(self._time, time):
                    raise self._too_early(time)
        self.give_many(pairs)

    def _too_early(self, time: Any) -> CapabilityError:
        return CapabilityError(f"{self._port.op.describe()}: cannot send a record at time {time!r} in a batch at "
                               f"{self._time!r}: a timed record's time must not be earlier than its batch's")

    def flush(self) -> None:
        """Hand buffered records on now (the worker does this when the operator yields)."""
        if self._port._owner is self:
            self._port.flush()


_first = itemgetter(0)
_NOTHING = object()


class OperatorOutput:
    """An operator's output, as its logic sees it: open sessions to send records."""

    __slots__ = ("_port",)

    def __init__(self, port: OutputPort) -> None:
        self._port = port

    def session(self, cap: Capability | CapabilityRef) -> Session:
        """A session sending at ``cap.time``; ``cap`` must be a held capability for this output."""
        op = self._port.op
        if type(cap) is Capability:
            if cap._op is not op or cap._output != self._port.index:
                raise CapabilityError(
                    f"{op.describe()}: a capability for output {cap._output} of {cap._op.name!r} cannot send on "
                    f"output {self._port.index} of {op.name!r}"
                )
            cap._check_live("send with")
        elif type(cap) is CapabilityRef:
            cap._check_valid()
            if not op.passes_unchanged(cap._input, self._port.index):
                raise CapabilityError(
                    f"{op.describe()}: input {cap._input} does not reach output {self._port.index} unchanged; "
                    "send with a capability from time.delayed(...) instead"
                )
        else:
            raise CapabilityError(f"{op.describe()}: session() needs a Capability or a received time, got {cap!r}")
        return Session(self._port, cap.time, cap)

    def activator(self) -> Activator:
        """An :class:`Activator` for this operator."""
        return self._port.op.activator()

    def start_soon(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a helper task of the operator, owned by its worker: the worker cancels and awaits it
        when it stops, and if it fails the computation fails with its error, naming the operator (and
        ``name``, if given). Use it instead of ``asyncio.create_task`` in operator logic."""
        return self._port.op.start_soon(coro, name=name)

    def state(self, name: str, initial: Callable[[], T]) -> T:
        """A value this operator keeps on this worker: ``initial()``, or, when a recoverable dataflow resumes,
        the value saved in the snapshot resumed from; saved at every snapshot. It belongs to this worker and
        cannot move to another number of workers (use :meth:`keyed_state` for that). Declare it at the start
        of the logic, and change it only while applying complete times in order (``input.time_order()``)."""
        return self._port.op.recovery.keep(name, initial)

    def keyed_state(self, name: str, initial: Callable[[], T]) -> T:
        """A dict this operator keeps, by the key its records are exchanged by: as :meth:`state`, and on a
        resume with another number of workers each key goes to the worker that key is routed to. So on several
        workers every input of the operator must be routed by key (a source has none)."""
        op = self._port.op
        _check_routed(op, name, range(len(op.inputs)))
        return op.recovery.keep(name, initial, keyed=True)

    def resume_time(self) -> Any:
        """The time a resumed dataflow restarts at: a source keeping its position in :meth:`state` downgrades
        its capability there and sends from its restored position (afresh: the minimum time)."""
        return self._port.op.recovery.resume_time()


def _check_routed(op: PortOwner, name: str, ports: Iterable[int]) -> None:
    """Refuse keyed state on an input whose records are not on the worker their key routes to: on several workers
    each would keep its own part of a key's state, and its results would be quietly partial."""
    peers = op.worker.peers
    if peers == 1:
        return
    for port in ports:
        if not op.routed[port]:
            pact = op.pacts[port]
            fed = "a broadcast" if pact == "broadcast" else "fed on each worker by a stream not exchanged by key"
            raise op.located(
                f"{op.describe()} keeps keyed state {name!r}, but its input {port} is not routed by key ({fed}): on "
                f"{peers} workers each worker would keep its own part of a key's state, and quietly give partial "
                "results. "
                "Pass exchange=key to the operator (e.g. stream.unary_frontier(logic, exchange=lambda kv: kv[0])), "
                "or call .exchange(key) right before it")


class Activator:
    """Schedules an operator to run again; ``activate()`` is safe to call from any thread."""

    __slots__ = ("_op",)

    def __init__(self, op: PortOwner) -> None:
        self._op = op

    def activate(self) -> None:
        """Ask for the operator to run. Asked by its own logic while it runs, that is timely's "schedule me
        again": it runs again in the next round, after the other operators (its ``activated()`` yields until
        then), so that a logic waiting for others' progress this way never keeps the worker to itself."""
        op = self._op
        if op.running and op.running == _get_ident():
            op.worker.activate_later(op.path)
            return
        op.poked = True  # kept even if the logic is busy awaiting something else right now
        op.worker.activate_threadsafe(op.path)

    async def activated(self) -> None:
        """From inside the operator's logic: wait until the operator is next activated (at once, if an
        activator was called since the logic last waited)."""
        op = self._op
        if not op.poked:
            await NEXT_ACTIVATION
        op.poked = False

    def __repr__(self) -> str:
        return f"Activator(path={self._op.path})"
