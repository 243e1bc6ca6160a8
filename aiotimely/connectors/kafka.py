"""Kafka in and out (aiokafka): partitions spread over workers, offsets committed only once complete.

Needs ``pip install 'aiotimely[kafka]'``.

:func:`source` reads a topic. aiotimely assigns its partitions itself (partition
``p`` to worker ``p % peers``; no consumer-group rebalancing) and starts each at the
group's committed offset (or the beginning). Records become :class:`KafkaRecord` s
at a time given by ``time=``: ``"poll"`` (each poll of a worker the next integer
time), ``"offset"`` (the offset itself, or ``offset // offset_bucket``), or
``"timestamp"`` / a function of the record (event time, with bounded ``lateness``,
tracked per partition: time moves on once every partition of the worker is past it;
a record later than its partition allows is, by ``late=``, dropped, counted and logged
(``"drop"``, the default), given its partition's earliest open time (``"clamp"``), or an
error (``"error"``): see :class:`~aiotimely.connectors.EventTime`).

With ``commit=probe`` (a :class:`~aiotimely.ProbeHandle` placed where records are
finished with, typically after :func:`sink`), a partition's offset is committed
only once the probe's frontier shows every record before it complete downstream:
at-least-once end to end. After a crash, a restart resumes from the committed
offsets and reprocesses only what was not yet committed. (Exactly-once would
need a transactional producer that commits the consumed offsets in the same
transaction as the produced records — ``send_offsets_to_transaction`` — or an
idempotent sink keyed by (partition, offset).)

:func:`sink` produces batches and passes on, at their times, the records Kafka
acknowledged: a probe after it sees what has been delivered.
"""

from __future__ import annotations

import asyncio
import logging
import time as _time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, NamedTuple
from zlib import crc32

from ..comm.codec import register_type
from ..dataflow.input import SourceStopped
from ..dataflow.input import source as _source
from .aiter import LATE_POLICIES, EventTime
from .positions import SourcePart, SourcePositions

if TYPE_CHECKING:
    from ..dataflow import Capability, InputPort, OperatorOutput, ProbeHandle, Scope
    from ..progress import Antichain
    from ..stream import Stream

__all__ = ["KafkaRecord", "source", "sink"]

log = logging.getLogger("aiotimely.connectors.kafka")


class KafkaRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


register_type(KafkaRecord, tuple, lambda fields: KafkaRecord(*fields))


def _aiokafka() -> Any:
    try:
        import aiokafka
    except ImportError:
        raise ImportError("the Kafka connector needs: pip install 'aiotimely[kafka]'") from None
    return aiokafka


class _Checkpoints:
    """Per partition, offsets that may be committed once given times are complete."""

    def __init__(self) -> None:
        self._pending: dict[int, list[tuple[Any, int]]] = {}

    def add(self, partition: int, latest_time: Any, next_offset: int) -> None:
        self._pending.setdefault(partition, []).append((latest_time, next_offset))

    def complete(self, frontier: Antichain[Any]) -> dict[int, int]:
        """The offset to commit per partition: the last checkpoint whose time the frontier passed."""
        ready: dict[int, int] = {}
        for partition, marks in self._pending.items():
            done = 0
            for latest_time, next_offset in marks:
                if frontier.less_equal(latest_time):
                    break
                ready[partition] = next_offset
                done += 1
            del marks[:done]
        return ready


def source(
    scope: Scope[Stream],
    bootstrap: str,
    topic: str,
    *,
    group_id: str,
    time: str | Callable[[KafkaRecord], int] = "poll",
    offset_bucket: int = 1,
    lateness: int = 0,
    late: str = "drop",
    commit: ProbeHandle | None = None,
    commit_interval: float = 0.5,
    partitions: list[int] | None = None,
    max_records: int = 10_000,
    poll_ms: int = 100,
    idle_timeout: float | None = None,
    stop: asyncio.Event | None = None,
    name: str = "KafkaSource",
) -> Stream:
    """A stream of :class:`KafkaRecord` s from ``topic``; see the module's description.

    The source ends when ``stop`` is set, after ``idle_timeout`` seconds with no
    record, or when the computation is asked to stop (Ctrl-C, SIGTERM: see docs/cli.md);
    then, with ``commit``, it waits for the probe to complete and commits the final
    offsets. In a recoverable dataflow its positions are part of every
    snapshot, and it commits the offsets of complete snapshots (``commit`` is then
    not needed).
    """
    aiokafka = _aiokafka()
    worker = scope.worker
    new = tuple.__new__  # KafkaRecord(...) costs twice as much: NamedTuple's __new__ is Python code
    time_of: Callable[[KafkaRecord], int] = time if callable(time) else (lambda r: r.timestamp)
    if time not in ("poll", "offset", "timestamp") and not callable(time):
        raise ValueError(f"{name}: time must be 'poll', 'offset', 'timestamp' or a function, not {time!r}")
    if late not in LATE_POLICIES:
        raise ValueError(f"{name}: late must be 'drop', 'clamp' or 'error', not {late!r}")

    def event_time_of(partition: int) -> EventTime:
        policy = EventTime(time_of, lateness, late=late)
        policy.attach(f"kafka.source {name!r} (topic {topic!r}, partition {partition}) in {scope.describe()}, "
                      f"worker {worker.index}")
        return policy

    async def logic(output: OperatorOutput, cap: Capability) -> None:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id,
                                             enable_auto_commit=False, auto_offset_reset="earliest")
        event_time = time == "timestamp" or callable(time)
        start = output.resume_time()
        mine: list[SourcePart] = []
        positions = SourcePositions(output, mine)
        await consumer.start()
        try:
            known = partitions
            if known is None:
                for _ in range(100):
                    found = consumer.partitions_for_topic(topic)
                    if found:
                        break
                    await consumer.topics()
                    await asyncio.sleep(0.05)
                known = sorted(found or [])
                if not known:
                    raise ValueError(f"{name}: topic {topic!r} has no partitions at {bootstrap}")
            mine.extend(SourcePart(p, event_time_of(p) if event_time else None)
                        for p in known if p % worker.peers == worker.index)
            if not mine:
                positions.finish()
                cap.drop()
                return
            tps = {p.number: aiokafka.TopicPartition(topic, p.number) for p in mine}
            consumer.assign(list(tps.values()))
            cap.downgrade(start)
            again: list[tuple[int, KafkaRecord]] = []
            for p in mine:
                again.extend(positions.resume(p, start))
                if p.number in positions.restored:  # read on where the snapshot says (before any fetch starts)
                    consumer.seek(tps[p.number], p.position)
            for p in mine:
                if p.number not in positions.restored:
                    # The group's committed offset, or the beginning: aiokafka starts a partition assigned to a
                    # consumer with a group there (auto_offset_reset="earliest"). Seeking there again would
                    # drop the records it has already fetched, and fetch them again.
                    p.position = await consumer.position(tps[p.number])
            for t, record in sorted(again, key=lambda tr: tr[0]):
                with cap.delayed(t) as at_t:
                    output.session(at_t).give(record)
            poll_number = start
            checkpoints = _Checkpoints()
            by_partition = {p.number: p for p in mine}
            latest: dict[int, int] = {}  # per partition: the latest time of this poll's records
            held: dict[int, list[KafkaRecord]] = {}  # event time: this poll's records, timed once all are in

            def take(polled: dict[Any, list[Any]], poll: int) -> int:
                """Make ``polled`` into records and send them on at their times (with event time: hold them);
                returns how many there were."""
                count = 0
                for tp, messages in polled.items():
                    if not messages:
                        continue
                    count += len(messages)
                    part = by_partition[tp.partition]
                    records = [new(KafkaRecord, (m.topic, m.partition, m.offset, m.key, m.value, m.timestamp))
                               for m in messages]
                    part.position = records[-1].offset + 1
                    times: list[tuple[int, list[KafkaRecord]]]
                    if event_time:
                        held.setdefault(tp.partition, []).extend(records)
                        continue
                    if time == "poll":
                        times = [(poll, records)]
                    else:
                        times = []
                        for r in records:
                            t = r.offset // offset_bucket
                            if times and times[-1][0] == t:
                                times[-1][1].append(r)
                            else:
                                times.append((t, [r]))
                    for t, group in times:
                        with cap.delayed(t) as at_t:
                            output.session(at_t).give_many(group)
                        if positions.every is not None:
                            part.sent(t, group)
                    latest[tp.partition] = times[-1][0]
                return count

            last_commit = _time.monotonic()
            last_record = _time.monotonic()
            stopped = False  # the computation is stopping: end as at the end of the topic
            asked: list[bool] = []  # (a poll that finds records waiting does not wait: no SourceStopped comes then)
            forget = worker.on_stop(lambda: asked.append(True))
            while not stopped and not asked and not (stop is not None and stop.is_set()):
                # One poll: up to max_records records, asked for _BUNCH at a time while aiokafka has them at hand
                # (only the first ask waits for records to come). Each bunch is sent on before the next is made.
                got, timeout = 0, poll_ms
                try:
                    while got < max_records:
                        bunch = take(await consumer.getmany(*tps.values(), timeout_ms=timeout,
                                                            max_records=min(_BUNCH, max_records - got)),
                                     poll_number)
                        if not bunch:
                            break
                        got += bunch
                        timeout = 0
                except SourceStopped:
                    stopped = True  # (what this poll took so far is sent below, as after any poll)
                groups: dict[int, list[KafkaRecord]] = {}
                for number, records in held.items():
                    part = by_partition[number]
                    assert part.policy is not None
                    times = part.policy.times(records)
                    for t, group in times:
                        groups.setdefault(t, []).extend(group)
                        if positions.every is not None:
                            part.sent(t, group)
                    if times:  # (none if every record of the partition's poll was late, and dropped)
                        latest[number] = max(t for t, _ in times)
                held.clear()
                for t in sorted(groups):
                    with cap.delayed(t) as at_t:
                        output.session(at_t).give_many(groups[t])
                del groups
                if commit is not None and positions.every is None:  # (nothing else reads them)
                    for number, t in latest.items():
                        checkpoints.add(number, t, by_partition[number].position)
                latest.clear()
                if got:
                    last_record = _time.monotonic()
                    poll_number += 1
                for p in mine:
                    if time == "poll":
                        p.moved(poll_number, positions.every)
                    elif time == "offset":
                        p.moved(p.position // offset_bucket, positions.every)
                    else:
                        assert p.policy is not None
                        p.moved(p.policy.current(), positions.every)
                low = min(p.low for p in mine)
                positions.report(low)
                if low > cap.time:
                    cap.downgrade(low)
                if not stopped and _time.monotonic() - last_commit >= commit_interval:
                    try:
                        if positions.every is not None:
                            await _commit(consumer, topic, positions.complete(), aiokafka)
                        elif commit is not None:
                            await _commit(consumer, topic, checkpoints.complete(commit.frontier), aiokafka)
                    except SourceStopped:
                        stopped = True  # (the final commit below covers this one)
                    last_commit = _time.monotonic()
                if idle_timeout is not None and _time.monotonic() - last_record > idle_timeout:
                    break
            forget()
            for p in mine:
                if p.policy is not None:
                    p.policy.finish()
            positions.finish()
            cap.drop()
            if positions.every is not None:
                snapshotter = positions.snapshotter
                assert snapshotter is not None
                through = positions.participant.through if positions.participant else 0
                await _past_stop(lambda: snapshotter.wait_complete(through))
                await _past_stop(lambda: _commit(consumer, topic, {p.number: p.position for p in mine}, aiokafka))
            elif commit is not None:
                probe = commit
                await _past_stop(probe.wait_done)
                await _past_stop(lambda: _commit(consumer, topic, checkpoints.complete(probe.frontier), aiokafka))
        finally:
            await consumer.stop()

    return _source(scope, name, logic)


_BUNCH = 256
"""How many records a source asks aiokafka for at a time (until a poll has ``max_records``). Each bunch is made
into :class:`KafkaRecord` s and sent on before the next is asked for, so that the consumer's and our records
alive at a time stay below the garbage collector's first threshold (700 new container objects): holding
10,000 records of each kind made it collect (and traverse them) over and over."""

IN_FLIGHT = 100_000
"""How many records a sink sends before it waits for Kafka's acknowledgements."""


async def _acknowledge(sends: list[Any], acked: list[tuple[Any, list[Any]]], output: OperatorOutput) -> None:
    """Wait until Kafka has every send, then pass the records on, each batch at its time."""
    await asyncio.gather(*sends)
    for held, batch in acked:
        with held:
            output.session(held).give_many(batch)
    sends.clear()
    acked.clear()


async def _past_stop(wait: Callable[[], Awaitable[None]]) -> None:
    """Await ``wait()`` to its end: a stop asked for meanwhile interrupts it (once, with :class:`SourceStopped`),
    but the source has ended already, and the draining the stop starts is what this waits for."""
    try:
        await wait()
    except SourceStopped:
        await wait()


async def _commit(consumer: Any, topic: str, offsets: dict[int, int], aiokafka: Any) -> None:
    if offsets:
        await consumer.commit({aiokafka.TopicPartition(topic, p): o for p, o in offsets.items()})
        log.debug("committed %s", offsets)


def _no_key(record: Any) -> bytes | None:
    """The sink's default key: none (records go to the partitions in turn)."""
    return None


def _bytes_value(record: Any) -> bytes:
    """The sink's default value: ``bytes`` as they are, anything else as its ``str`` in UTF-8."""
    return record if isinstance(record, bytes) else str(record).encode()


def sink(
    stream: Stream,
    bootstrap: str,
    topic: str,
    *,
    key: Callable[[Any], bytes | None] = _no_key,
    value: Callable[[Any], bytes] = _bytes_value,
    name: str = "KafkaSink",
) -> Stream:
    """Produce every record to ``topic`` (partition by CRC-32 of the key, or round robin), in batches.

    Returns the stream of the records Kafka acknowledged, at their times.
    """
    aiokafka = _aiokafka()
    producer: Any = None

    async def send(parts: list[tuple[int, list[bytes | None] | None, list[Any]]], sends: list[Any]) -> None:
        """Hand each ``(partition, keys, records)`` to the producer in Kafka batches; their futures go to ``sends``.

        The partitions take turns, a batch each, so that one produce request carries a batch for each of
        them (aiokafka has one request in flight per broker, and takes a partition's next batch once the
        request before is answered). Each batch is closed as it is handed over: none waits for ``linger_ms``
        for records that will not come."""
        todo: list[tuple[int, list[bytes | None] | None, list[bytes], int]] = []  # (..., next to append)
        for partition, keys, records in parts:
            if value is _bytes_value:
                values = [r if type(r) is bytes else _bytes_value(r) for r in records]
            else:
                values = [value(r) for r in records]
            if values:
                todo.append((partition, keys, values, 0))
        while todo:
            left: list[tuple[int, list[bytes | None] | None, list[bytes], int]] = []
            for partition, keys, values, first in todo:
                kafka_batch = producer.create_batch()
                append = kafka_batch.append
                rest = len(values)  # the first record not in this batch
                if keys is None:
                    for j in range(first, rest):
                        if append(key=None, value=values[j], timestamp=None) is None:
                            rest = j
                            break
                else:
                    for j in range(first, rest):
                        if append(key=keys[j], value=values[j], timestamp=None) is None:
                            rest = j
                            break
                if rest == first:  # (aiokafka takes any record into an empty batch)
                    raise ValueError(f"{name}: a record of {len(values[first])} bytes does not fit in a Kafka batch")
                kafka_batch.close()
                sends.append(await producer.send_batch(kafka_batch, topic, partition=partition))
                if rest < len(values):
                    left.append((partition, keys, values, rest))
            todo = left

    async def logic(input: InputPort, output: OperatorOutput, cap: Capability) -> None:
        nonlocal producer
        cap.drop()
        try:
            partitions: list[int] = []
            turn = 0
            async for _ in input.activations():
                # Every batch of the activation goes out before any is waited for (as a raw producer
                # would); the records are passed on, as acknowledged, once Kafka has them all.
                acked: list[tuple[Capability, list[Any]]] = []
                sends: list[Any] = []
                in_flight = 0
                for ref, batch in input.drain():
                    held = ref.retain()
                    if producer is None:
                        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
                        await producer.start()
                        for _ in range(100):
                            partitions = sorted(await producer.partitions_for(topic) or [])
                            if partitions:
                                break
                            await asyncio.sleep(0.05)
                    n = len(partitions)
                    if key is _no_key:  # round robin, a stride of the batch per partition
                        first, turn = turn % n, turn + len(batch)
                        await send([(partitions[(first + i) % n], None, batch[i::n])
                                    for i in range(min(n, len(batch)))], sends)
                    else:
                        by_partition: dict[int, tuple[list[bytes | None], list[Any]]] = {}
                        for record in batch:
                            k = key(record)
                            if k is None:
                                p = partitions[turn % n]
                                turn += 1
                            else:
                                p = partitions[crc32(k) % n]
                            keys, records = by_partition.setdefault(p, ([], []))
                            keys.append(k)
                            records.append(record)
                        await send([(p, keys, records) for p, (keys, records) in by_partition.items()], sends)
                    acked.append((held, batch))
                    in_flight += len(batch)
                    if in_flight >= IN_FLIGHT:
                        await _acknowledge(sends, acked, output)
                        in_flight = 0
                await _acknowledge(sends, acked, output)
        finally:
            if producer is not None:
                await producer.stop()

    result: Stream = stream.unary_frontier(logic, name=name)
    return result
