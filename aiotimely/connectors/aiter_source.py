"""The source :func:`~aiotimely.connectors.aiter.from_aiter` makes, as small parts with one job each.

* :class:`Batches` — the records read, sent in batches at the times the policy gives them; after each batch (and
  whenever time moves without one) the source's capability, and its part's positions for snapshots, follow the
  policy's current time.
* :class:`Reader` — steps the iterator: what it yields without waiting joins the batch (cut at ``batch_size``);
  before it would wait, the batch is sent, so a quiet source adds no latency.
* :class:`TimedWait` — waits for the iterator, moving time on at the policy's deadlines (waited for on the
  policy's clock, so a test drives them with a ``ManualClock``) and whenever the iterator wakes without a record.
* :class:`AiterSource` — the logic on one worker: which iterator it reads, where a resumed run reads on from, what
  it sends again, and the end.

:class:`Resume` and :func:`abandon` are the low level: going on with an ``__anext__`` suspended where the iterator
waits, and ending it when the source fails meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Generator, cast

from ..dataflow.input import SourceStopped
from .positions import SourcePart, SourcePositions
from .sources import send_again

if TYPE_CHECKING:
    from ..dataflow import Capability, OperatorOutput
    from .aiter import TimePolicy

__all__ = ["AiterSource", "Batches", "Reader", "TimedWait", "Resume", "abandon"]


class Batches:
    """The records read (:attr:`records`), sent at their times by :meth:`flush`; the capability and the part's low
    time then follow the policy's current time."""

    __slots__ = ("output", "cap", "part", "policy", "positions", "every", "records", "columns")

    def __init__(self, output: OperatorOutput, cap: Capability, part: SourcePart, policy: TimePolicy,
                 positions: SourcePositions, columns: Callable[[list[Any]], Any] | None = None) -> None:
        self.output = output
        self.cap = cap
        self.part = part
        self.policy = policy
        self.positions = positions
        self.every = positions.every
        self.records: list[Any] = []
        """Read and not yet sent (one list, emptied by each flush)."""
        self.columns = columns
        """A columnar source's maker of one Arrow batch from records read (``None``: records go as they are)."""

    def flush(self) -> None:
        """Send the records read, grouped by the policy's times (remembered for snapshots while they may be cut
        before them), then follow the policy."""
        records, part, every = self.records, self.part, self.every
        if records:
            part.position += len(records)
            cap, output, columns = self.cap, self.output, self.columns
            for t, group in self.policy.times(records):
                with cap.delayed(t) as at_t:
                    if columns is None:
                        output.session(at_t).give_many(group)
                    else:
                        self.give_columns(at_t, group)
                if every is not None:
                    part.sent(t, group)
            records.clear()
        self.follow()

    def give_columns(self, at: Capability, group: list[Any]) -> None:
        """A columnar source's records as one Arrow batch (a column-time policy's watermark then follows it)."""
        assert self.columns is not None
        batch = self.columns(group)
        self.output.session(at).give_container(batch)
        self.policy.saw(batch.frame)

    def follow(self) -> None:
        """Move the part's low time (reporting the snapshots it passes) and the capability to the policy's
        current time: nothing earlier comes any more."""
        now = self.policy.current()
        if self.every is not None:
            self.part.moved(now, self.every)
            self.positions.report(self.part.low)
        if now > self.cap.time:
            self.cap.downgrade(now)

    def woke(self) -> None:
        """The iterator woke and waits again, with no record: time may have moved all the same."""
        if self.policy.current() > self.cap.time:
            self.flush()


class TimedWait:
    """Waits for the iterator's next record, moving time on at the policy's deadlines while nothing arrives (on
    the policy's clock), and whenever the iterator wakes without a record."""

    __slots__ = ("batches", "policy", "output")

    def __init__(self, batches: Batches, policy: TimePolicy, output: OperatorOutput) -> None:
        self.batches = batches
        self.policy = policy
        self.output = output

    async def next_record(self, gen: Any, signal: Any) -> Any:
        """The record the ``__anext__`` suspended on ``signal`` (its awaitable ``gen``) gives once it goes on;
        ``StopAsyncIteration`` at the iterator's end."""
        policy, woke = self.policy, self.batches.woke
        wake = policy.deadline_ms()
        if wake is None or not isinstance(signal, asyncio.Future):
            return await Resume(gen, signal, woke)
        while True:
            if wake > policy.clock.now():
                try:
                    arrived = await self._either(signal, wake)
                except BaseException as exc:  # noqa: BLE001 - a stop, or the worker closing: the iterator gets it too
                    return await Resume(gen, None, woke, throw=exc)
                if arrived:
                    return await Resume(gen, signal, woke)  # the future is done: continue the iterator at once
            try:
                self.batches.flush()
            except BaseException:
                abandon(gen)
                raise
            wake = policy.deadline_ms()
            if wake is None:  # the policy stopped moving time by itself: just wait
                return await Resume(gen, signal, woke)

    async def _either(self, signal: asyncio.Future[Any], wake: int) -> bool:
        """Wait until ``signal`` is done or the policy's clock reaches ``wake`` (ms); whether ``signal`` is done."""
        timer = self.output.start_soon(self.policy.clock.wait_until(wake), name="the wait for a time policy deadline")
        try:
            await asyncio.wait((signal, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        return signal.done()


class Reader:
    """Steps an async iterator: what it yields without waiting joins the batch, sent once it has ``batch_size``
    records (and the worker is let go on before reading on) or before the iterator would wait."""

    __slots__ = ("batches", "batch_size", "wait")

    def __init__(self, batches: Batches, batch_size: int, wait: TimedWait) -> None:
        self.batches = batches
        self.batch_size = batch_size
        self.wait = wait

    async def read(self, it: AsyncIterator[Any]) -> None:
        """Read ``it`` to its end (``SourceStopped`` comes through: the computation is stopping)."""
        batch, flush, size, wait = self.batches.records, self.batches.flush, self.batch_size, self.wait.next_record
        anext_ = type(it).__anext__
        while True:
            gen = anext_(it).__await__()
            try:
                signal = gen.send(None)
            except StopIteration as ready:
                batch.append(ready.value)
                if len(batch) >= size:
                    flush()
                    await asyncio.sleep(0)  # let the batch move before reading on
                continue
            except StopAsyncIteration:
                return
            try:
                flush()  # the iterator is about to wait: send what we have first
            except BaseException:
                abandon(gen)
                raise
            try:
                record = await wait(gen, signal)
            except StopAsyncIteration:
                return
            batch.append(record)


class AiterSource:
    """The logic of a ``from_aiter`` source on one worker: ``source(scope, name, AiterSource(...).run)``."""

    __slots__ = ("iterator", "policy", "partitioned", "index", "peers", "batch_size", "resume", "where", "columns")

    def __init__(self, iterator: AsyncIterator[Any] | Callable[[int, int], AsyncIterator[Any]], policy: TimePolicy,
                 *, partitioned: bool, index: int, peers: int, batch_size: int,
                 resume: str | Callable[[int], AsyncIterator[Any]] | None, where: str,
                 columns: Callable[[list[Any]], Any] | None = None) -> None:
        self.iterator = iterator
        self.policy = policy
        self.partitioned = partitioned
        self.index = index
        self.peers = peers
        self.batch_size = batch_size
        self.resume = resume
        self.where = where
        self.columns = columns

    async def run(self, output: OperatorOutput, cap: Capability) -> None:
        """Read the iterator (if this worker reads one) to its end or a stop, then end the source."""
        policy = self.policy
        policy.attach(f"from_aiter {self.where}, worker {self.index}")
        part = SourcePart(self.index if self.partitioned else 0, policy)
        it = self._iterator()
        positions = SourcePositions(output, [part] if it is not None else [])
        if it is None:
            positions.finish()
            cap.drop()
            return
        start = output.resume_time()
        resumed = part.number in positions.restored
        again = positions.resume(part, start)
        cap.downgrade(max(cap.time, start, policy.start()))
        batches = Batches(output, cap, part, policy, positions, self.columns)
        send_again(output, cap, again, self.columns)
        try:
            if resumed:
                it = await self._read_on(it, part.position)
            await Reader(batches, self.batch_size, TimedWait(batches, policy, output)).read(it)
        except SourceStopped:
            pass  # the computation is stopping: end as if the iterator had ended, with what it gave so far
        batches.flush()
        policy.finish()
        positions.finish()
        cap.drop()

    def _iterator(self) -> AsyncIterator[Any] | None:
        """This worker's iterator: its own (one per worker), or the one iterator (worker 0's only)."""
        if self.partitioned:
            return cast("Callable[[int, int], AsyncIterator[Any]]", self.iterator)(self.index, self.peers)
        return cast("AsyncIterator[Any]", self.iterator) if self.index == 0 else None

    async def _read_on(self, it: AsyncIterator[Any], position: int) -> AsyncIterator[Any]:
        """A resumed run: the iterator to read on from the ``position`` records read before the snapshot (``skip``:
        read them again, and skip them; ``live``: whatever comes now; a function: what it gives for them)."""
        resume = self.resume
        if callable(resume):
            return resume(position)
        if resume == "skip":
            for _ in range(position):
                try:
                    await type(it).__anext__(it)
                except StopAsyncIteration:
                    break
        return it


class Resume:
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
                    abandon(gen)
                    raise


def abandon(gen: Any) -> None:
    """End the iterator's ``__anext__`` under way (``gen``, its awaitable, suspended where the iterator waits)
    because the source fails while it waits: the iterator gets ``GeneratorExit`` there and runs its cleanup, and is
    over. Left suspended, an async generator stays "running", and closing it later (the event loop does, when it is
    collected) fails with a second, spurious error ("aclose(): asynchronous generator is already running")."""
    try:
        gen.throw(GeneratorExit)
    except BaseException:  # noqa: BLE001 - GeneratorExit or StopIteration: it ended; anything else is the
        return            # iterator's own cleanup failing, never raised over the error that stops the source
    gen.close()  # it awaits in its cleanup: no one will resume it
