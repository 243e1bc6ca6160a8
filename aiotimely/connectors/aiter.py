"""Async iterators in, async callables out.

:func:`from_aiter` makes a source of any async iterator. Records that are ready
without waiting are batched together; before the iterator would wait, the batch
is sent, so a quiet source adds no latency. When records get their times is a
:class:`TimePolicy`: :class:`EveryBatch` (each batch the next integer time),
:class:`WallClock` (the current interval; time advances even while nothing
arrives) or :class:`EventTime` (a field of the record, with bounded lateness; a record
later than that is dropped, counted and logged, unless ``late=`` says otherwise).
The source itself is a few small parts (:mod:`.aiter_source`); what a policy or the
source reads of "now" comes from a clock (:mod:`.sources`), so tests drive it by hand.

:func:`to_async` hands every batch (or record) to an async callable, awaited
without blocking the worker, with at most ``max_in_flight`` calls running; it
passes each batch on only once its call has completed, so a probe downstream of
it says what has really been delivered.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import math
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Coroutine, overload

from ..dataflow.input import source
from ..errors import RecoveryError
from ..worker.clock import MONOTONIC
from . import sources
from .aiter_source import AiterSource

if TYPE_CHECKING:
    from ..columnar import ColumnarStream
    from ..dataflow import Capability, InputPort, OperatorOutput
    from ..scope import Scope
    from ..stream import Stream
    from ..worker.clock import Clock

__all__ = ["TimePolicy", "EveryBatch", "WallClock", "EventTime", "ColumnTime", "from_aiter", "to_async"]

log = logging.getLogger("aiotimely.connectors")

LATE_LOG_INTERVAL = 10.0
"""Seconds between two log lines of a source's running count of late records dropped (the first is logged at once,
and what is left unsaid when the source ends, then)."""

LATE_POLICIES = ("drop", "clamp", "error")
"""What :class:`EventTime` does with a late record: drop it (counted and logged), give it the earliest open time,
or fail."""


class TimePolicy:
    """When a source's records get which (integer) time, and when time moves on."""

    clock: Clock = MONOTONIC
    """The clock the policy reads "now" on, and a source waits for its :meth:`deadline` on: ``time.monotonic()``
    (in ms), unless the policy takes another (:class:`WallClock` and :class:`EventTime` take
    :data:`.sources.CLOCK` when they are made, which a test may have set to a ``ManualClock``)."""

    def start(self) -> int:
        """The first time."""
        return 0

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        """Group a batch of records by time; every time not earlier than :meth:`current`."""
        raise NotImplementedError

    def saw(self, frame: Any) -> None:
        """A columnar source sent ``frame`` (a Polars frame): a policy that takes time from its columns follows
        it (:class:`ColumnTime`); the others time batches as records, and ignore it."""

    def current(self) -> int:
        """The earliest time still to come: the source's capability moves here after each batch, and
        whenever the iterator wakes and waits again without yielding a record — so a policy the iterator
        moves itself (on a time mark it reads, say) moves the frontier at once, with no record after it."""
        raise NotImplementedError

    def deadline(self) -> float | None:
        """When (in seconds on :attr:`clock`: ``time.monotonic()`` unless the policy took another) time moves on
        by itself, without records; ``None``: never."""
        return None

    def deadline_ms(self) -> int | None:
        """:meth:`deadline` in ms on :attr:`clock` (rounded up): what a source waits for; ``None``: never."""
        deadline = self.deadline()
        return None if deadline is None else math.ceil(deadline * 1000)

    def snapshot(self) -> Any:
        """What a snapshot keeps of the policy (picklable)."""
        return None

    def resume(self, state: Any, start: int) -> None:
        """Go on from a snapshot at time ``start`` that kept ``state`` (``None``: nothing kept): no time
        before ``start`` is given any more."""

    def attach(self, where: str) -> None:
        """The source using the policy says where it is (its name, dataflow and worker), for what the policy
        logs."""

    def finish(self) -> None:
        """The source has ended (the policy logs what it has left to say)."""


class EveryBatch(TimePolicy):
    """Each batch gets the next integer time: 0, 1, 2, ..."""

    def __init__(self) -> None:
        self._next = 0

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        t = self._next
        self._next += 1
        return [(t, records)]

    def current(self) -> int:
        return self._next

    def snapshot(self) -> Any:
        return self._next

    def resume(self, state: Any, start: int) -> None:
        self._next = max(start, state or 0)


class WallClock(TimePolicy):
    """Records get the number of the ``interval``-second period they arrive in; time moves on each period.

    Periods are counted on :attr:`clock` (``time.monotonic()`` unless a test set another: see
    :mod:`.sources`), from ``origin`` (seconds on it; by default when the policy is made)."""

    def __init__(self, interval: float = 1.0, *, origin: float | None = None) -> None:
        self.interval = interval
        self.clock = sources.CLOCK
        self._origin_ms: float = self.clock.now() if origin is None else origin * 1000
        self.offset = 0
        """Periods counted before ``origin`` (by the run a resumed one goes on from)."""

    @property
    def origin(self) -> float:
        """Where period 0 starts: seconds on :attr:`clock`."""
        return self._origin_ms / 1000

    @origin.setter
    def origin(self, seconds: float) -> None:
        self._origin_ms = seconds * 1000

    def now(self) -> int:
        return self.offset + int((self.clock.now() - self._origin_ms) / (self.interval * 1000))

    def snapshot(self) -> Any:
        return self.now()

    def resume(self, state: Any, start: int) -> None:
        """Periods go on from the snapshot's time: the time the computation was down is not counted."""
        if state is None and start == 0:
            return  # starting afresh
        self.offset = max(start, state or 0)
        self._origin_ms = self.clock.now()

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        return [(self.now(), records)]

    def current(self) -> int:
        return self.now()

    def deadline(self) -> float:
        return self._next_period_ms() / 1000

    def deadline_ms(self) -> int:
        return math.ceil(self._next_period_ms())

    def _next_period_ms(self) -> float:
        """Where the next period starts, in ms on :attr:`clock`."""
        return self._origin_ms + (self.now() - self.offset + 1) * self.interval * 1000


class EventTime(TimePolicy):
    """Times from the records (``time_of(record)``, an int); time moves to the latest seen minus ``lateness``.

    A record earlier than that (later than allowed) is, by ``late=``: ``"drop"`` (the default, as
    ``window(time=...)``'s) — dropped, counted in :attr:`late_records`, and logged: a warning at the
    first, naming the source, its dataflow and worker, then at most one line every
    :data:`LATE_LOG_INTERVAL` seconds with the running count, and the count when the source ends;
    ``"clamp"`` — given the earliest open time (kept, not reordered into the past: it lands in a
    later window than its own); ``"error"`` — an error naming it.
    """

    def __init__(self, time_of: Callable[[Any], int], lateness: int = 0, *, late: str = "drop") -> None:
        if late not in LATE_POLICIES:
            raise ValueError(f"late must be 'drop', 'clamp' or 'error', not {late!r}")
        self.time_of = time_of
        self.lateness = lateness
        self.late = late
        self.where = "a source with EventTime"
        self.clock = sources.CLOCK  # (paces the log lines of late records)
        self._low = 0
        self._seen: int | None = None
        self._total = [0]           # late records dropped: shared with the copies a partitioned source makes
        self._dropped = 0           # ... by this copy (one worker's), and how many of them were logged
        self._logged = 0
        self._logged_at = 0         # (ms on the clock)

    @property
    def late_records(self) -> int:
        """Late records dropped so far, by this policy and by the copies of it that a source reading one iterator
        per worker gives each worker (in this process)."""
        return self._total[0]

    def attach(self, where: str) -> None:
        self.where = where

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        groups: dict[int, list[Any]] = {}
        low = self._low
        dropped: list[tuple[int, Any]] = []
        for record in records:
            t = self.time_of(record)
            if type(t) is not int or t < 0:
                raise ValueError(f"event time {t!r} of {record!r} is not a non-negative int")
            if t < low:
                if self.late == "error":
                    raise ValueError(f"record {record!r:.200} at event time {t} is later than allowed: time {low} is "
                                     f"already complete (lateness={self.lateness}, late='error'); allow for it with a "
                                     "larger lateness=, or drop late records (late='drop', counted and logged) or "
                                     "give them the earliest open time (late='clamp')")
                if self.late == "drop":
                    dropped.append((t, record))
                    continue
                t = low
            if self._seen is None or t > self._seen:
                self._seen = t
            groups.setdefault(t, []).append(record)
        if dropped:
            self._drop(dropped, low)
        if self._seen is not None:
            self._low = max(self._low, self._seen - self.lateness)
        return sorted(groups.items())

    def _drop(self, dropped: list[tuple[int, Any]], low: int) -> None:
        """Count late records dropped, and log them: the first at once, then the count at most every
        :data:`LATE_LOG_INTERVAL` seconds."""
        self._total[0] += len(dropped)
        self._dropped += len(dropped)
        now = self.clock.now()
        if not self._logged:
            t, record = dropped[0]
            log.warning("%s: dropped %d late record%s (the first at event time %d, when time %d was already "
                        "complete, lateness %d: %r). EventTime drops late records (late='drop') and counts them "
                        "in late_records; late='clamp' gives them the earliest open time instead, late='error' "
                        "fails", self.where, len(dropped), "" if len(dropped) == 1 else "s", t, low, self.lateness,
                        record)
        elif now - self._logged_at >= LATE_LOG_INTERVAL * 1000:
            log.warning("%s: %d late records dropped so far (late='drop')", self.where, self._dropped)
        else:
            return
        self._logged, self._logged_at = self._dropped, now

    def finish(self) -> None:
        if self._dropped > self._logged:
            log.warning("%s: %d late records dropped in all (late='drop')", self.where, self._dropped)
            self._logged = self._dropped

    def current(self) -> int:
        return self._low

    def snapshot(self) -> Any:
        return (self._low, self._seen)

    def resume(self, state: Any, start: int) -> None:
        if state is not None:
            self._low, self._seen = state
        self._low = max(self._low, start)


class ColumnTime(TimePolicy):
    """Event time from integer column ``column`` of a columnar source (``from_aiter(..., columnar=)``): each batch
    goes at the watermark, and once sent the watermark moves to the latest event time seen minus ``lateness`` (as
    Spark's ``withWatermark``; see :class:`aiotimely.columnar.decode.Watermark`). Rows behind it are late for a
    ``window(..., time=column)`` downstream, which applies its ``late=`` policy."""

    def __init__(self, column: str, lateness: int = 0) -> None:
        from ..columnar.decode import Watermark

        self.watermark = Watermark(column, lateness)

    @property
    def column(self) -> str:
        return self.watermark.column

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        return [(self.watermark.current, records)]

    def saw(self, frame: Any) -> None:
        """A batch was sent: the watermark follows its latest event time."""
        from ..columnar.decode import column_max

        self.watermark.saw(column_max(frame, self.watermark.column))

    def current(self) -> int:
        return int(self.watermark.current)

    def snapshot(self) -> Any:
        return self.watermark.snapshot()

    def resume(self, state: Any, start: int) -> None:
        self.watermark.resume(state, start)


def _check_iterator(iterator: Any, where: str) -> None:
    """Refuse what is neither an async iterator nor a function of ``(worker_index, peers)``, saying what to give."""
    if hasattr(iterator, "__anext__"):
        return
    if inspect.isasyncgenfunction(iterator) or inspect.iscoroutinefunction(iterator):
        try:
            inspect.signature(iterator).bind(0, 1)
        except TypeError:
            raise TypeError(f"from_aiter {where}: {iterator.__name__} is an async generator function: call it, "
                            f"from_aiter(scope, {iterator.__name__}()), or give a function (worker_index, peers) "
                            "-> async iterator for one iterator per worker") from None
        return
    if callable(iterator):
        return
    if hasattr(iterator, "__aiter__"):
        raise TypeError(f"from_aiter {where}: {type(iterator).__name__} is an async iterable, not an iterator: give "
                        "aiter(it) (or the function making it)")
    if hasattr(iterator, "__iter__"):
        raise TypeError(f"from_aiter {where}: {type(iterator).__name__} is a plain iterable, not an async iterator: "
                        "for records at hand use at.to_stream(records, scope) (or an InputHandle); for an async "
                        "source give an async generator, e.g. from_aiter(scope, gen())")
    raise TypeError(f"from_aiter {where}: needs an async iterator or a function (worker_index, peers) -> async "
                    f"iterator, not {type(iterator).__name__} {iterator!r}")


def _check_resume(resume: Any, partitioned: bool, where: str) -> None:
    """Refuse a ``resume=`` that is none of the three, or a function for one iterator per worker."""
    if resume is not None and not callable(resume) and resume not in ("skip", "live"):
        raise ValueError(f"from_aiter {where}: resume must be 'skip', 'live' or a function, not {resume!r}")
    if callable(resume) and partitioned:
        raise ValueError(f"from_aiter {where}: resume= a function works with one iterator; with one per "
                         "worker use 'skip' or 'live'")


def _check_recovery(scope: Scope[Stream], resume: Any, partitioned: bool, where: str) -> None:
    """In a recoverable dataflow: refuse a source that does not say how it resumes, and one iterator per worker
    resumed on another number of workers than made its snapshot."""
    snapshotter = scope.dataflow.snapshotter
    if snapshotter is None:
        return
    if resume is None:
        raise RecoveryError(
            f"from_aiter {where} is in a recoverable dataflow: say how it resumes with resume='skip' (the "
            "iterator yields the same records from its start each run), resume='live' (a live feed), or "
            "resume=a function n -> an async iterator of what follows the first n records")
    restored, peers = snapshotter.restored, scope.worker.peers
    if partitioned and restored is not None and restored.peers != peers:
        raise RecoveryError(
            f"from_aiter {where} reads one iterator per worker, and its snapshot was made by {restored.peers} "
            f"workers: it resumes only on {restored.peers} workers (this run has {peers})")


@overload
def from_aiter(
    scope: Scope[Stream],
    iterator: AsyncIterator[Any] | Callable[[int, int], AsyncIterator[Any]],
    *,
    time: TimePolicy | None = None,
    batch_size: int = 1024,
    resume: str | Callable[[int], AsyncIterator[Any]] | None = None,
    decode: None = None,
    columnar: None = None,
    name: str = "AsyncIterator",
) -> Stream: ...


@overload
def from_aiter(
    scope: Scope[Stream],
    iterator: AsyncIterator[Any] | Callable[[int, int], AsyncIterator[Any]],
    *,
    time: TimePolicy | None = None,
    batch_size: int = 1024,
    resume: str | Callable[[int], AsyncIterator[Any]] | None = None,
    decode: str | None = None,
    columnar: Any,
    name: str = "AsyncIterator",
) -> ColumnarStream: ...


def from_aiter(
    scope: Scope[Stream],
    iterator: AsyncIterator[Any] | Callable[[int, int], AsyncIterator[Any]],
    *,
    time: TimePolicy | None = None,
    batch_size: int = 1024,
    resume: str | Callable[[int], AsyncIterator[Any]] | None = None,
    decode: str | None = None,
    columnar: Any = None,
    name: str = "AsyncIterator",
) -> Any:
    """A stream of what an async iterator yields.

    ``iterator`` is one async iterator (read by worker 0 only), or a function
    ``(worker_index, peers) -> async iterator`` called on every worker (a
    partitioned source, each worker with its own copy of ``time``). ``time``
    defaults to :class:`EveryBatch`.

    In a recoverable dataflow every snapshot keeps the number of records read
    (and the time policy's state), and ``resume`` says how a resumed run reads on:
    ``"skip"`` — the iterator yields the same records again from its start, and
    the ones read before the snapshot are skipped; ``"live"`` — a live feed: read
    on from whatever comes now (what came while the computation was down, or
    after the snapshot, is not seen again); or a function ``n -> async iterator``
    of what follows the first ``n`` records (one iterator only). There is no default:
    a wrong guess would lose or repeat records silently.

    Columns: with ``columnar=`` (a schema: column names to Polars types) the stream is a
    :class:`~aiotimely.columnar.ColumnarStream`: each batch read becomes one Arrow batch, decoded in one call --
    ``decode="json"`` or ``"msgpack"`` (the iterator yields ``bytes``, one object each), or ``decode=None``
    (it yields tuples in column order, or dicts). ``time=ColumnTime("ts", lateness)`` takes event time from an
    integer column, as a watermark (other policies time whole batches as they do records).
    """
    worker = scope.worker
    partitioned = callable(iterator) and not hasattr(iterator, "__anext__")
    where = f"{name!r} in {scope.describe()}"
    _check_iterator(iterator, where)
    _check_resume(resume, partitioned, where)
    _check_recovery(scope, resume, partitioned, where)
    policy = copy.copy(time) if partitioned and time is not None else time or EveryBatch()
    if isinstance(policy, ColumnTime):
        policy.watermark = copy.copy(policy.watermark)
    if columnar is None:
        if decode is not None or isinstance(policy, ColumnTime):
            raise ValueError(f"from_aiter {where}: decode= and ColumnTime are for columns: give columnar=schema")
        logic = AiterSource(iterator, policy, partitioned=partitioned, index=worker.index, peers=worker.peers,
                            batch_size=batch_size, resume=resume, where=where)
        return source(scope, name, logic.run)
    from ..columnar import ColumnarStream
    from ..columnar.decode import BatchMaker, check_decode

    schema = check_decode(decode, columnar, f"from_aiter {where}") if decode is not None else None
    if schema is None:
        from ..columnar import as_schema

        schema = as_schema(columnar)
    if isinstance(policy, ColumnTime):
        column = policy.column
        policy.watermark.check(list(schema.items()), column in schema and schema[column].is_integer())
    logic = AiterSource(iterator, policy, partitioned=partitioned, index=worker.index, peers=worker.peers,
                        batch_size=batch_size, resume=resume, where=where, columns=BatchMaker(decode, schema))
    return ColumnarStream(source(scope, name, logic.run), schema)


def to_async(
    stream: Stream,
    fn: Callable[..., Coroutine[Any, Any, Any]],
    *,
    per: str = "batch",
    max_in_flight: int = 16,
    name: str = "ToAsync",
) -> Stream:
    """Hand the stream to ``fn``: ``await fn(time, records)`` per batch, or ``await fn(record)`` per record.

    At most ``max_in_flight`` calls run at once, as helper tasks of the worker; while
    that many are running the operator stops taking input (the worker goes on with
    everything else). Returns the stream of the records whose calls completed, at
    their times: a probe on it says what has been delivered. An exception in ``fn``
    fails the computation, naming the operator and the time of the call.
    """
    if per not in ("batch", "record"):
        raise ValueError(f"per must be 'batch' or 'record', not {per!r}")
    if not callable(fn):
        raise TypeError(f"{name}: fn must be an async callable")

    async def logic(input: InputPort, output: OperatorOutput, cap: Capability) -> None:
        cap.drop()
        activator = output.activator()
        running: set[asyncio.Task[Any]] = set()
        done_queue: list[asyncio.Task[Any]] = []

        def finished(task: asyncio.Task[Any]) -> None:
            running.discard(task)
            done_queue.append(task)
            activator.activate()

        async for _ in input.activations():
            for ref, batch in input.drain():
                held = ref.retain()  # before waiting: a received time lasts only until the operator yields
                while len(running) >= max_in_flight:
                    await asyncio.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
                    _deliver(done_queue, output)
                call = fn(held.time, batch) if per == "batch" else _each(fn, batch)
                task = output.start_soon(call, name=f"the call at time {held.time!r}")
                task.held, task.records = held, batch  # type: ignore[attr-defined]
                running.add(task)
                task.add_done_callback(finished)
            _deliver(done_queue, output)
        while running:
            await asyncio.wait(list(running))
            _deliver(done_queue, output)
        _deliver(done_queue, output)

    result: Stream = stream.unary_frontier(logic, name=name)
    return result


async def _each(fn: Callable[[Any], Awaitable[Any]], batch: list[Any]) -> None:
    for record in batch:
        await fn(record)


def _deliver(done_queue: list[asyncio.Task[Any]], output: OperatorOutput) -> None:
    while done_queue:
        task = done_queue.pop(0)
        held: Capability = task.held  # type: ignore[attr-defined]  # set by to_async's logic
        if task.cancelled() or task.exception() is not None:
            held.drop()  # the worker's task group reports the failure
            continue
        with held:
            output.session(held).give_many(task.records)  # type: ignore[attr-defined]  # as held
