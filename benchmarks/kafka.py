"""Benchmark ``kafka``: records per second into and out of Kafka, against raw aiokafka, in one run.

On an embedded tansu broker (memory only): produce N small records with raw aiokafka
(``create_batch``/``send_batch``: one partition's batches after the other's, and with
the partitions taking turns, a batch each, as ``kafka.sink`` does) and with
``aiotimely.connectors.kafka.sink``; consume them with raw aiokafka (``getmany``: at
most 10,000 records a call, and as many as ``kafka.source`` asks for at a time) and
with ``kafka.source``. Producing is timed from the first record sent to the last one
acknowledged, once the producer is connected (each side first sends and awaits one
warm-up record); consuming from the first batch of records in hand to the last
(connecting, joining the group and seeking are left out of both). The ratios to the
first raw row of each repeat are printed too: the machine's load moves whole repeats.

    python -m benchmarks kafka [--quick] [--records 200000] [--repeats 3]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiotimely as at

from .common import command_line, save, stats, table

PARTITIONS = 3


def _payload(i: int) -> bytes:
    return b"%08d-payload-of-some-length" % i


async def _warm_up(producer: Any, topic: str) -> None:
    """What ours does before its clock starts: the topic's metadata known, the broker connected, a record in."""
    await producer.partitions_for(topic)
    await producer.send_and_wait(topic, b"warm-up", partition=0)


async def raw_produce(bootstrap: str, topic: str, n: int) -> float:
    """One partition's batches after the other's: a produce request carries one batch."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        await _warm_up(producer, topic)
        start = time.perf_counter()
        sends = []
        for p in range(PARTITIONS):
            batch = producer.create_batch()
            for i in range(p, n, PARTITIONS):
                if batch.append(key=None, value=_payload(i), timestamp=None) is None:
                    sends.append(await producer.send_batch(batch, topic, partition=p))
                    batch = producer.create_batch()
                    batch.append(key=None, value=_payload(i), timestamp=None)
            sends.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*sends)
        return time.perf_counter() - start
    finally:
        await producer.stop()


async def raw_produce_in_turn(bootstrap: str, topic: str, n: int) -> float:
    """The partitions take turns, a batch each (as ``kafka.sink`` does): a produce request carries one of each."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        await _warm_up(producer, topic)
        start = time.perf_counter()
        sends = []
        nexts = list(range(PARTITIONS))
        while any(i < n for i in nexts):
            for p in range(PARTITIONS):
                i = nexts[p]
                if i >= n:
                    continue
                batch = producer.create_batch()
                while i < n and batch.append(key=None, value=_payload(i), timestamp=None) is not None:
                    i += PARTITIONS
                nexts[p] = i
                sends.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*sends)
        return time.perf_counter() - start
    finally:
        await producer.stop()


async def raw_consume(bootstrap: str, topic: str, n: int, max_records: int = 10_000) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        start, got = None, 0
        while got < n:
            for messages in (await consumer.getmany(timeout_ms=100, max_records=max_records)).values():
                if messages and start is None:
                    start = time.perf_counter()
                got += len(messages)
        assert start is not None
        return time.perf_counter() - start
    finally:
        await consumer.stop()


def kafka_bunch() -> int:
    from aiotimely.connectors import kafka

    return int(kafka._BUNCH)


def ours_consume(bootstrap: str, topic: str, n: int, group: str) -> float:
    from aiotimely.connectors import kafka

    async def build(worker: at.Worker) -> float:
        stop = asyncio.Event()
        count = [0]
        marks: dict[str, float] = {}

        def seen(_t: Any, records: list) -> None:
            marks.setdefault("first", time.perf_counter())
            count[0] += len(records)
            if count[0] >= n:
                marks["last"] = time.perf_counter()
                stop.set()

        worker.dataflow(lambda s: kafka.source(s, bootstrap, topic, group_id=group, stop=stop)
                        .inspect_batch(seen))
        await worker.step_until_done()
        return marks["last"] - marks["first"]

    return at.execute(build)[0]


def ours_produce(bootstrap: str, topic: str, n: int) -> float:
    from aiotimely.connectors import kafka

    async def build(worker: at.Worker) -> float:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: kafka.sink(inp.to_stream(s), bootstrap, topic).probe())
        inp.send(b"warm-up")
        inp.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))   # connected, and Kafka has the first record
        start = time.perf_counter()
        for lo in range(0, n, 10_000):
            inp.send_batch([_payload(i) for i in range(lo, min(n, lo + 10_000))])
        inp.advance_to(2)
        await worker.step_while(lambda: probe.less_than(2))
        elapsed = time.perf_counter() - start
        inp.close()
        return elapsed

    return float(at.execute(build)[0])


def main(argv: list[str] | None = None) -> dict:
    parser = command_line(__doc__, "10,000 records, one repeat")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n, repeats = (10_000, 1) if args.quick else (args.records, args.repeats)
    from examples.tansu import TansuBroker

    kinds = ("raw produce", "raw produce in turn", "ours produce", "raw consume", "raw consume in bunches",
             "ours consume")
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    with TansuBroker() as broker:
        for r in range(repeats):
            raw_topic, turn_topic, our_topic = f"raw{r}", f"turn{r}", f"ours{r}"
            for name in (raw_topic, turn_topic, our_topic):
                broker.create_topic(name, PARTITIONS)
            samples["raw produce"].append(asyncio.run(raw_produce(broker.bootstrap, raw_topic, n)))
            samples["raw produce in turn"].append(asyncio.run(raw_produce_in_turn(broker.bootstrap, turn_topic, n)))
            samples["ours produce"].append(ours_produce(broker.bootstrap, our_topic, n))
            samples["raw consume"].append(asyncio.run(raw_consume(broker.bootstrap, raw_topic, n)))
            samples["raw consume in bunches"].append(
                asyncio.run(raw_consume(broker.bootstrap, raw_topic, n, max_records=kafka_bunch())))
            samples["ours consume"].append(ours_consume(broker.bootstrap, raw_topic, n, f"g{r}"))
    results: dict[str, Any] = {"records": n, "runs": {k: stats(v) for k, v in samples.items()}}
    results["ratios per repeat"] = {
        f"{ours} / {raw}": [r / o for r, o in zip(samples[raw], samples[ours], strict=True)]
        for ours, raw in (("ours produce", "raw produce"), ("ours produce", "raw produce in turn"),
                          ("ours consume", "raw consume"), ("ours consume", "raw consume in bunches"))
    }
    rows = [("raw aiokafka produce (send_batch)", results["runs"]["raw produce"], "partition by partition"),
            ("raw aiokafka produce, partitions in turn", results["runs"]["raw produce in turn"],
             "a batch of each per request"),
            ("aiotimely kafka.sink", results["runs"]["ours produce"], "to the last acknowledgement")]
    print(table(f"kafka produce: {n:,} records; median of {repeats}", rows, n, "records/s",
                "raw aiokafka produce (send_batch)"))
    rows = [("raw aiokafka consume (getmany)", results["runs"]["raw consume"], "max_records=10,000"),
            ("raw aiokafka consume, in bunches", results["runs"]["raw consume in bunches"],
             f"max_records={kafka_bunch()}, as kafka.source asks"),
            ("aiotimely kafka.source", results["runs"]["ours consume"], "first to last record seen downstream")]
    print(table(f"kafka consume: {n:,} records; median of {repeats}", rows, n, "records/s",
                "raw aiokafka consume (getmany)"))
    for what, ratios in results["ratios per repeat"].items():
        print(f"{what + ', each repeat:':52} {' '.join(f'{x:.2f}x' for x in ratios)}")
    if not args.quick:
        print(f"wrote {save('kafka', results)}")
    return results


if __name__ == "__main__":
    main()
