"""Benchmark ``kafka``: records per second into and out of Kafka, against raw aiokafka, in one run.

On an embedded tansu broker (memory only): produce N small records with raw
aiokafka (``create_batch``/``send_batch``) and with ``aiotimely.connectors.kafka.sink``;
consume them with raw aiokafka (``getmany``) and with ``kafka.source``. Producing is
timed from the first record sent to the last one acknowledged, once the producer is
connected (ours sends and awaits one warm-up record first); consuming from the
first batch of records in hand to the last (connecting, joining the group and
seeking are left out of both).

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


async def raw_produce(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
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


async def raw_consume(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        start, got = None, 0
        while got < n:
            for messages in (await consumer.getmany(timeout_ms=100, max_records=10_000)).values():
                if messages and start is None:
                    start = time.perf_counter()
                got += len(messages)
        assert start is not None
        return time.perf_counter() - start
    finally:
        await consumer.stop()


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

    samples: dict[str, list[float]] = {k: [] for k in ("raw produce", "ours produce", "raw consume", "ours consume")}
    with TansuBroker() as broker:
        for r in range(repeats):
            raw_topic, our_topic = f"raw{r}", f"ours{r}"
            broker.create_topic(raw_topic, PARTITIONS)
            broker.create_topic(our_topic, PARTITIONS)
            samples["raw produce"].append(asyncio.run(raw_produce(broker.bootstrap, raw_topic, n)))
            samples["ours produce"].append(ours_produce(broker.bootstrap, our_topic, n))
            samples["raw consume"].append(asyncio.run(raw_consume(broker.bootstrap, raw_topic, n)))
            samples["ours consume"].append(ours_consume(broker.bootstrap, raw_topic, n, f"g{r}"))
    results = {"records": n, "runs": {k: stats(v) for k, v in samples.items()}}
    rows = [("raw aiokafka produce (send_batch)", results["runs"]["raw produce"], ""),
            ("aiotimely kafka.sink", results["runs"]["ours produce"], "to the last acknowledgement")]
    print(table(f"kafka produce: {n:,} records; median of {repeats}", rows, n, "records/s",
                "raw aiokafka produce (send_batch)"))
    rows = [("raw aiokafka consume (getmany)", results["runs"]["raw consume"], ""),
            ("aiotimely kafka.source", results["runs"]["ours consume"], "first to last record seen downstream")]
    print(table(f"kafka consume: {n:,} records; median of {repeats}", rows, n, "records/s",
                "raw aiokafka consume (getmany)"))
    if not args.quick:
        print(f"wrote {save('kafka', results)}")
    return results


if __name__ == "__main__":
    main()
