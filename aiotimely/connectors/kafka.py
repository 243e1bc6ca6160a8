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

The source is a few small parts with one job each (:mod:`.kafka_source`); it reads
durations (``commit_interval``, ``idle_timeout``) on a clock (:mod:`.sources`), so
tests drive them by hand.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, overload
from zlib import crc32

from ..comm.codec import register_type
from ..dataflow.input import source as _source
from . import sources
from .aiter import LATE_POLICIES
from .kafka_source import KafkaClient, KafkaSource, record_times

if TYPE_CHECKING:
    from ..columnar import ColumnarStream
    from ..dataflow import Capability, InputPort, OperatorOutput, ProbeHandle
    from ..scope import Scope
    from ..stream import Stream

__all__ = ["KafkaRecord", "source", "sink"]


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


@overload
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
    decode: None = None,
    columnar: None = None,
    name: str = "KafkaSource",
) -> Stream: ...


@overload
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
    decode: str,
    columnar: Any,
    name: str = "KafkaSource",
) -> ColumnarStream: ...


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
    decode: str | None = None,
    columnar: Any = None,
    name: str = "KafkaSource",
) -> Any:
    """A stream of :class:`KafkaRecord` s from ``topic``; see the module's description.

    With ``decode="json"`` or ``"msgpack"`` and ``columnar=`` (a schema: column names to Polars types; needs
    the ``columnar`` extra) it is a :class:`~aiotimely.columnar.ColumnarStream` instead: the values of the
    records a partition's poll gives at a time are decoded in one call into one Arrow batch (a ``None`` value is
    a row of nulls), at the times ``time=`` gives as for records (a function of the :class:`KafkaRecord`, or its
    timestamp, with ``lateness`` and ``late=``); what a snapshot kept is decoded again on resume.

    The source ends when ``stop`` is set, after ``idle_timeout`` seconds with no
    record, or when the computation is asked to stop (Ctrl-C, SIGTERM: see docs/cli.md);
    then, with ``commit``, it waits for the probe to complete and commits the final
    offsets. In a recoverable dataflow its positions are part of every
    snapshot, and it commits the offsets of complete snapshots (``commit`` is then
    not needed).
    """
    aiokafka = _aiokafka()
    worker = scope.worker
    if time not in ("poll", "offset", "timestamp") and not callable(time):
        raise ValueError(f"{name}: time must be 'poll', 'offset', 'timestamp' or a function, not {time!r}")
    if late not in LATE_POLICIES:
        raise ValueError(f"{name}: late must be 'drop', 'clamp' or 'error', not {late!r}")

    def where(partition: int) -> str:
        """Names a partition's event-time policy in what it logs."""
        return (f"kafka.source {name!r} (topic {topic!r}, partition {partition}) in {scope.describe()}, "
                f"worker {worker.index}")

    columns = _columns(decode, columnar, f"kafka.source {name!r} in {scope.describe()}")
    logic = KafkaSource(KafkaClient(aiokafka, bootstrap, topic, group_id),
                        record_times(time, offset_bucket, lateness, late, where), worker=worker, partitions=partitions,
                        record_type=KafkaRecord, max_records=max_records, poll_ms=poll_ms, bunch=_BUNCH, probe=commit,
                        commit_interval=commit_interval, idle_timeout=idle_timeout, stop=stop, clock=sources.CLOCK,
                        name=name, columns=columns)
    stream = _source(scope, name, logic.run)
    if columns is None:
        return stream
    from ..columnar import ColumnarStream

    return ColumnarStream(stream, columns.schema)


def _columns(decode: str | None, columnar: Any, where: str) -> Any:
    """The maker of a columnar source's batches (``None`` for a stream of records), checked as it is built."""
    if decode is None and columnar is None:
        return None
    if decode is None:
        raise ValueError(f"{where}: columnar= decodes the records' values: give decode='json' or 'msgpack' too")
    from ..columnar.decode import BatchMaker, check_decode

    return BatchMaker(decode, check_decode(decode, columnar, where), value=_value)


def _value(record: KafkaRecord) -> bytes | None:
    return record.value


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
