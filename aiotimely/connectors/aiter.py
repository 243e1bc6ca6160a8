"""Async iterators in, async callables out.

:func:`from_aiter` makes a source of any async iterator. Records that are ready
without waiting are batched together; before the iterator would wait, the batch
is sent, so a quiet source adds no latency. When records get their times is a
:class:`TimePolicy`: :class:`EveryBatch` (each batch the next integer time),
:class:`WallClock` (the current interval; time advances even while nothing
arrives) or :class:`EventTime` (a field of the record, with bounded lateness; a record
later than that is dropped, counted and logged, unless ``late=`` says otherwise).

:func:`to_async` hands every batch (or record) to an async callable, awaited
without blocking the worker, with at most ``max_in_flight`` calls running; it
passes each batch on only once its call has completed, so a probe downstream of
it says what has really been delivered.
"""

from __future__ import annotations

import asyncio
import inspect
import copy
import logging
import time as _time
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Coroutine, Generator, cast

from ..dataflow.input import SourceStopped, source
from ..errors import RecoveryError
from .positions import SourcePart, SourcePositions

if TYPE_CHECKING:
    from ..dataflow import Capability, InputPort, OperatorOutput, Scope
    from ..stream import Stream

__all__ = ["TimePolicy", "EveryBatch", "WallClock", "EventTime", "from_aiter", "to_async"]

log = logging.getLogger("aiotimely.connectors")

LATE_LOG_INTERVAL = 10.0
"""Seconds between two log lines of a source's running count of late records dropped (the first is logged at once,
and what is left unsaid when the source ends, then)."""

LATE_POLICIES = ("drop", "clamp", "error")
"""What :class:`EventTime` does with a late record: drop it (counted and logged), give it the earliest open time,
or fail."""


class TimePolicy:
    """When a source's records get which (integer) time, and when time moves on."""

    def start(self) -> int:
        """The first time."""
        return 0

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        """Group a batch of records by time; every time not earlier than :meth:`current`."""
        raise NotImplementedError

    def current(self) -> int:
        """The earliest time still to come: the source's capability moves here after each batch, and
        whenever the iterator wakes and waits again without yielding a record — so a policy the iterator
        moves itself (on a time mark it reads, say) moves the frontier at once, with no record after it."""
        raise NotImplementedError

    def deadline(self) -> float | None:
        """When (``time.monotonic()``) time moves on by itself, without records; ``None``: never."""
        return None

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
    """Records get the number of the ``interval``-second period they arrive in; time moves on each period."""

    def __init__(self, interval: float = 1.0, *, origin: float | None = None) -> None:
        self.interval = interval
        self.origin = _time.monotonic() if origin is None else origin
        self.offset = 0
        """Periods counted before ``origin`` (by the run a resumed one goes on from)."""

    def now(self) -> int:
        return self.offset + int((_time.monotonic() - self.origin) / self.interval)

    def snapshot(self) -> Any:
        return self.now()

    def resume(self, state: Any, start: int) -> None:
        """Periods go on from the snapshot's time: the time the computation was down is not counted."""
        if state is None and start == 0:
            return  # starting afresh
        self.offset = max(start, state or 0)
        self.origin = _time.monotonic()

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        return [(self.now(), records)]

    def current(self) -> int:
        return self.now()

    def deadline(self) -> float:
        return self.origin + (self.now() - self.offset + 1) * self.interval


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
        self._low = 0
        self._seen: int | None = None
        self._total = [0]           # late records dropped: shared with the copies a partitioned source makes
        self._dropped = 0           # ... by this copy (one worker's), and how many of them were logged
        self._logged = 0
        self._logged_at = 0.0

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
        now = _time.monotonic()
        if not self._logged:
            t, record = dropped[0]
            log.warning("%s: dropped %d late record%s (the first at event time %d, when time %d was already "
                        "complete, lateness %d: %r). EventTime drops late records (late='drop') and counts them "
                        "in late_records; late='clamp' gives them the earliest open time instead, late='error' "
                        "fails", self.where, len(dropped), "" if len(dropped) == 1 else "s", t, low, self.lateness,
                        record)
        elif now - self._logged_at >= LATE_LOG_INTERVAL:
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


class _Resume:
    """Continue an ``__anext__`` that was about to wait, from what it yielded (or by throwing ``throw`` into it:
    the wait for it was cancelled); ``woke()`` runs each time the iterator, resumed, waits again without having
    yielded a record (it did something else: read a time mark)."""

    def __init__(self, gen: Any, signal: Any, woke: Callable[[], None], throw: BaseException | None = None) -> None:
        self.gen, self.signal, self.woke, self.throw = gen, signal, woke, throw

    def __await__(self) -> Generator[Any, Any, Any]:
        gen, signal, woke = self.gen, self.signal, self.woke
        if self.throw is not None:
            try:
                signal = gen.throw(self.throw)
            except StopIteration as stop:
                return stop.value
        while True:
            try:
                sent = yield signal
            except GeneratorExit:
                gen.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - forwarded into the iterator
                try:
                    signal = gen.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    signal = gen.send(sent)
                except StopIteration as stop:
                    return stop.value
                try:
                    woke()
                except BaseException:
                    _abandon(gen)
                    raise


_DONE = object()


def _abandon(gen: Any) -> None:
    """End the iterator's ``__anext__`` under way (``gen``, its awaitable, suspended where the iterator waits)
    because the source fails while it waits: the iterator gets ``GeneratorExit`` there and runs its cleanup, and is
    over. Left suspended, an async generator stays "running", and closing it later (the event loop does, when it is
    collected) fails with a second, spurious error ("aclose(): asynchronous generator is already running")."""
    try:
        gen.throw(GeneratorExit)
    except BaseException:  # noqa: BLE001 - GeneratorExit or StopIteration: it ended; anything else is the
        return            # iterator's own cleanup failing, never raised over the error that stops the source
    gen.close()  # it awaits in its cleanup: no one will resume it


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


def from_aiter(
    scope: Scope[Stream],
    iterator: AsyncIterator[Any] | Callable[[int, int], AsyncIterator[Any]],
    *,
    time: TimePolicy | None = None,
    batch_size: int = 1024,
    resume: str | Callable[[int], AsyncIterator[Any]] | None = None,
    name: str = "AsyncIterator",
) -> Stream:
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
    """
    worker = scope.worker
    snapshotter = scope.dataflow.snapshotter
    partitioned = callable(iterator) and not hasattr(iterator, "__anext__")
    where = f"{name!r} in {scope.describe()}"
    _check_iterator(iterator, where)
    if resume is not None and not callable(resume) and resume not in ("skip", "live"):
        raise ValueError(f"from_aiter {where}: resume must be 'skip', 'live' or a function, not {resume!r}")
    if callable(resume) and partitioned:
        raise ValueError(f"from_aiter {where}: resume= a function works with one iterator; with one per "
                         "worker use 'skip' or 'live'")
    if snapshotter is not None:
        if resume is None:
            raise RecoveryError(
                f"from_aiter {where} is in a recoverable dataflow: say how it resumes with resume='skip' (the "
                "iterator yields the same records from its start each run), resume='live' (a live feed), or "
                "resume=a function n -> an async iterator of what follows the first n records")
        restored = snapshotter.restored
        if partitioned and restored is not None and restored.peers != worker.peers:
            raise RecoveryError(
                f"from_aiter {where} reads one iterator per worker, and its snapshot was made by {restored.peers} "
                f"workers: it resumes only on {restored.peers} workers (this run has {worker.peers})")

    async def logic(output: OperatorOutput, cap: Capability) -> None:
        it: AsyncIterator[Any] | None
        policy = copy.copy(time) if partitioned and time is not None else time or EveryBatch()
        policy.attach(f"from_aiter {where}, worker {worker.index}")
        part = SourcePart(worker.index if partitioned else 0, policy)
        positions = SourcePositions(output, [part])
        every = positions.every
        if partitioned:
            it = cast("Callable[[int, int], AsyncIterator[Any]]", iterator)(worker.index, worker.peers)
        else:
            it = cast("AsyncIterator[Any]", iterator) if worker.index == 0 else None  # not a plain function
        if it is None:
            positions.parts.clear()
            positions.finish()
            cap.drop()
            return
        start = output.resume_time()
        resumed = part.number in positions.restored
        again = positions.resume(part, start)
        cap.downgrade(max(cap.time, start, policy.start()))
        for t, record in sorted(again, key=lambda tr: tr[0]):
            with cap.delayed(t) as at_t:
                output.session(at_t).give(record)
        batch: list[Any] = []

        def flush() -> None:
            if batch:
                part.position += len(batch)
                for t, records in policy.times(batch):
                    with cap.delayed(t) as at_t:
                        output.session(at_t).give_many(records)
                    if every is not None:
                        part.sent(t, records)
                batch.clear()
            now = policy.current()
            if every is not None:
                part.moved(now, every)
                positions.report(part.low)
            if now > cap.time:
                cap.downgrade(now)

        def woke() -> None:
            """The iterator woke and waits again, with no record: time may have moved all the same."""
            if policy.current() > cap.time:
                flush()

        try:
            if resumed and callable(resume):
                it = resume(part.position)
            elif resumed and resume == "skip":
                for _ in range(part.position):
                    try:
                        await type(it).__anext__(it)
                    except StopAsyncIteration:
                        break
            anext_ = type(it).__anext__
            while True:
                gen = anext_(it).__await__()
                try:
                    signal = gen.send(None)
                except StopIteration as ready:
                    batch.append(ready.value)
                    if len(batch) >= batch_size:
                        flush()
                        await asyncio.sleep(0)  # let the batch move before reading on
                    continue
                except StopAsyncIteration:
                    break
                try:
                    flush()  # the iterator is about to wait: send what we have first
                except BaseException:
                    _abandon(gen)
                    raise
                try:
                    record = await _wait_ticking(gen, signal, policy, flush, woke)
                except StopAsyncIteration:
                    break
                batch.append(record)
        except SourceStopped:
            pass  # the computation is stopping: end as if the iterator had ended, with what it gave so far
        flush()
        policy.finish()
        positions.finish()
        cap.drop()

    return source(scope, name, logic)


async def _wait_ticking(gen: Any, signal: Any, policy: TimePolicy, flush: Callable[[], None],
                        woke: Callable[[], None]) -> Any:
    """Wait for the iterator, moving time on at the policy's deadlines while nothing arrives, and whenever
    the iterator wakes without a record (``woke``)."""
    deadline = policy.deadline()
    if deadline is None or not isinstance(signal, asyncio.Future):
        return await _Resume(gen, signal, woke)
    while True:
        remaining = deadline - _time.monotonic()
        if remaining > 0:
            try:
                done, _ = await asyncio.wait([signal], timeout=remaining)
            except BaseException as exc:  # noqa: BLE001 - a stop, or the worker closing: the iterator gets it too
                return await _Resume(gen, None, woke, throw=exc)
            if done:
                return await _Resume(gen, signal, woke)  # the future is done: continue the iterator at once
        try:
            flush()
        except BaseException:
            _abandon(gen)
            raise
        next_deadline = policy.deadline()
        if next_deadline is None:  # the policy stopped moving time by itself: just wait
            return await _Resume(gen, signal, woke)
        deadline = next_deadline


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
