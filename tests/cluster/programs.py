"""Build functions run by the cluster tests in real processes (``aiotimely run programs.py:NAME``)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import NamedTuple

import aiotimely as at

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import collatz  # noqa: E402
import wordcount  # noqa: E402

TEXT = "\n".join(" ".join(f"w{(i * 7 + j * 3) % 23}" for j in range(40)) for i in range(30))


def say(*parts) -> None:
    print(*parts, flush=True)


async def wordcounts(worker):
    """The book's word count over TEXT; prints the final count of each word this worker owns."""
    results = await wordcount.build(worker, text=TEXT)
    final = {}
    for _t, (word, count) in sorted(results):
        final[word] = max(final.get(word, 0), count)
    for word, count in sorted(final.items()):
        say(f"count {word} {count}")


async def collatz_steps(worker):
    result = collatz.build(worker, limit=60)
    await worker.step_until_done()
    for n, steps in result["steps"].items():
        say(f"steps {n} {steps}")


class Point:
    """A record type that msgpack does not know: registered below, in every process."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


at.register_type(Point, lambda p: (p.x, p.y), lambda t: Point(*t))


def points(worker):
    def make(scope):
        mine = [Point(i, i * i) for i in range(40) if i % worker.peers == worker.index]
        return at.to_stream(mine, scope).exchange(lambda p: p.x % 3).inspect(
            lambda p: say(f"point {p.x} {p.y} on {worker.index} of {type(p).__name__}"))

    worker.dataflow(make)


async def slow_ticks(worker):
    """Ticks for a long time, so that tests can kill or poke a process meanwhile."""
    inp = at.InputHandle()
    probe = worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: x).probe())
    say(f"started {worker.index}")
    for t in range(int(os.environ.get("TICKS", "400"))):
        inp.send(t)
        inp.advance_to(t + 1)
        await probe.wait_beyond(t)
        await asyncio.sleep(0.01)
    say(f"finished {worker.index} at {probe.frontier}")


def failing(worker):
    inp = at.InputHandle()
    worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: x).map(lambda x: 1 // (x - 5)), name="fragile")
    if worker.index == 0:
        for t in range(10):
            inp.send(t)
            inp.advance_to(t + 1)


class Unregistered:
    pass


def unregistered(worker):
    worker.dataflow(lambda s: at.to_stream([Unregistered()] if worker.index == 0 else [], s).exchange(lambda r: 1))


async def flood(worker):
    """Worker 0 produces ~200 MB as fast as it can; worker 1 consumes slowly. Prints peak memory (MiB)."""
    payload = "x" * 100

    async def produce(output, cap):
        if worker.index == 0:
            for _ in range(int(os.environ.get("FLOOD_BATCHES", "2000"))):
                output.session(cap).give_many([payload] * 1000)
                await asyncio.sleep(0)        # one batch per round: rounds pause while the network is behind
        cap.drop()

    def make(scope):
        @at.source(scope, "Flood", produce).exchange(lambda r: 1).sink(name="Slow")
        async def slow(input):
            stalled = False
            async for _ in input.activations():
                for _time, _batch in input.drain():
                    if not stalled:           # the whole process stops reading for a second
                        stalled = True
                        time.sleep(1.0)
                    await asyncio.sleep(0.0005)

    worker.dataflow(make)
    await worker.step_until_done()
    say(f"peak {worker.index} {peak_mib()}")


def peak_mib() -> int:
    """This process's peak resident memory, MiB. Not ``ru_maxrss``: Linux carries that over an exec from the
    parent (a subprocess started by vfork reports at least the test runner's own peak)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


async def fail_under_load(worker):
    """Worker 0 floods worker 1 and then fails itself (``FAIL_ON=0``), or worker 1's sink fails (``FAIL_ON=1``)
    while the flood goes on: every process must report that failure."""
    payload = "y" * 200
    fail_on = int(os.environ.get("FAIL_ON", "0"))

    async def produce(output, cap):
        if worker.index == 0:
            for n in range(100_000):
                output.session(cap).give_many([payload] * 1000)
                if n == 300 and fail_on == 0:
                    raise ValueError("the source broke after 300 batches")
                await asyncio.sleep(0)
        cap.drop()

    def make(scope):
        @at.source(scope, "Flood", produce).exchange(lambda r: 1).sink(name="Breaks")
        async def breaks(input):
            seen = 0
            async for _ in input.activations():
                for _time, _batch in input.drain():
                    seen += 1
                    if seen == 300 and fail_on == 1:
                        raise ValueError("the sink broke after 300 batches")

    worker.dataflow(make, name="loaded")


class Reading(NamedTuple):
    """A record type that is a tuple: msgpack would send it as a plain tuple unless it is registered."""

    sensor: str
    value: float


at.register_type(Reading, tuple, lambda fields: Reading(*fields))


def named_tuples(worker):
    def make(scope):
        mine = [Reading(f"s{i}", i / 2) for i in range(20) if i % worker.peers == worker.index]
        return at.to_stream(mine, scope).exchange(lambda r: r.sensor).inspect(
            lambda r: say(f"reading {type(r).__name__} {r.sensor} {r.value}"))

    worker.dataflow(make)


async def big_batch(worker):
    """``RECORDS`` records of ``RECORD_KB`` kB in one batch, to a worker of another process: bigger than a frame."""
    size = int(os.environ.get("RECORD_KB", "270")) * 1000
    count = int(os.environ.get("RECORDS", "1000"))
    received = []
    records = [str(i).ljust(size, "z") for i in range(count)] if worker.index == 0 else []
    worker.dataflow(lambda s: at.to_stream(records, s).exchange(lambda r: 1)
                    .inspect_batch(lambda _t, batch: received.extend(len(r) for r in batch)), name="big")
    await worker.step_until_done()
    if worker.index == 1:
        say(f"received {len(received)} records of {set(received)} characters")


async def busy(worker):
    """Both processes busy for ~6 s: many short CPU-heavy activations, records both ways, and one 1 s stall of
    process 1's loop. With a 2 s peer timeout, nobody may be taken for dead."""
    inp = at.InputHandle()

    def work(x):
        deadline = time.perf_counter() + 0.002
        while time.perf_counter() < deadline:
            pass
        return x

    stalled = []

    def stall_once(x):
        if worker.index == 1 and not stalled and x > 1000:
            stalled.append(x)
            time.sleep(1.0)
        return x

    probe = worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: x).map(work).map(stall_once)
                            .exchange(lambda x: x + 1).probe())
    start = time.monotonic()
    t = 0
    while time.monotonic() - start < 6:
        inp.send_batch(range(t * 10, t * 10 + 10))
        t += 1
        inp.advance_to(t)
        await probe.wait_beyond(t - 1)
    say(f"done {worker.index} after {t} rounds")


async def clock_behind_slow_sink(worker):
    """Process 0 floods a sink in process 1 that takes 20 ms per batch, while a clock dataflow's time moves
    every 50 ms. Process 1 prints the longest it waited for the clock's frontier to move on."""
    done = asyncio.Event()

    async def flood(output, cap):
        if worker.index == 0:
            while not done.is_set():
                output.session(cap).give_many(["z" * 100] * 1000)
                await asyncio.sleep(0)
        cap.drop()

    def make(scope):
        @at.source(scope, "Flood", flood).exchange(lambda r: 1).sink(name="Slow")
        async def slow(input):
            async for _ in input.activations():
                for _time, _batch in input.drain():
                    if not done.is_set():
                        await asyncio.sleep(0.02)

    clock = at.InputHandle()
    probe = worker.dataflow(lambda s: clock.to_stream(s).exchange(lambda x: 1).probe(), name="clock")
    worker.dataflow(make, name="flood")
    ticks = 40
    if worker.index == 0:
        for t in range(1, ticks + 1):
            await asyncio.sleep(0.05)
            clock.advance_to(t)
    else:
        clock.close()
        longest, last = 0.0, time.monotonic()
        for t in range(1, ticks + 1):
            await probe.wait_beyond(t - 1)
            now = time.monotonic()
            longest, last = max(longest, now - last), now
        say(f"longest wait {longest:.3f}")
    done.set()
    clock.close()


def window_events(n: int = 3000, keys: int = 7) -> list[tuple[str, int, int]]:
    """The windowed-aggregation workload in small: ``(key, event time, value)``, event times a little out of order."""
    import random

    rng = random.Random(5)
    return [(f"k{rng.randrange(keys)}", i + rng.randint(0, 20), rng.randint(1, 100)) for i in range(n)]


def windows(worker):
    """Tumbling count+sum per key over ``window_events``, fed by every worker (its share, in batches at the batch's
    least event time); prints each window this worker closes."""
    events = window_events()
    mine = events[worker.index::worker.peers]
    inp = at.InputHandle()
    worker.dataflow(lambda scope: inp.to_stream(scope).window(
        at.Tumbling(100), (at.Agg.count(), at.Agg.sum(lambda e: e[2])), key=lambda e: e[0], time=lambda e: e[1])
        .inspect(lambda r: say(f"window {r[0]} {r[1][0]} {r[2][0]} {r[2][1]}")), name="windows")
    now = 0
    for i in range(0, len(mine), 100):
        batch = mine[i:i + 100]
        now = max(now, min(e[1] for e in batch) // 2)    # dataflow time: no later than any event time in it
        inp.advance_to(now)
        inp.send_batch(batch)


async def sequenced(worker):
    """Each worker pushes 5 commands into a Sequencer, paced differently, and prints the order it takes every
    worker's commands in (identical on every worker of every process); then all pass a Barrier twice."""
    seq = at.Sequencer(worker)
    got = []
    for i in range(5):
        seq.push((worker.index, i))
        await asyncio.sleep(0.001 * ((worker.index + i) % 3))
        got.extend(seq)
    seq.close()
    async for command in seq:
        got.append(command)
    say(f"order {worker.index} {[tuple(c) for c in got]}")
    barrier = at.Barrier(worker)
    await barrier.wait()
    await barrier.wait()
    say(f"barrier {worker.index} {barrier.round}")


def keyed_events(seed: int, n: int = 60) -> list:
    """(time, key, value) events for ``keyed_operators``, times out of order."""
    import random

    rng = random.Random(seed)
    return [(rng.randrange(10), f"k{rng.randrange(5)}", rng.randrange(20)) for _ in range(n)]


def events_source(scope, events, worker, name="Events"):
    """A source on worker 0 sending ``(key, value)`` at each event's time, in the events' order, moving its
    capability to the earliest time still to come after each send (so that times complete while later
    records are still on their way), and letting the dataflow run after each record."""

    async def send(output, cap):
        if worker.index != 0:
            cap.drop()
            return
        for i, (t, key, value) in enumerate(events):
            with cap.delayed(t) as at_time:
                output.session(at_time).give((key, value))
            rest = [t for t, _, _ in events[i + 1:]]
            if rest and min(rest) > cap.time:
                cap.downgrade(min(rest))
            await asyncio.sleep(0)
        cap.drop()

    return at.source(scope, name, send)


def keyed_operators(worker):
    """The keyed operators over ``keyed_events`` sent from worker 0 (times out of order, its capability moved to
    the earliest time still to come after each record); prints each output as ``repr((operator, time, record))``
    on the worker that made it."""

    def make(scope):
        left = events_source(scope, keyed_events(1), worker, "Lefts")
        right = events_source(scope, keyed_events(2), worker, "Rights")
        streams = {
            "stateful_map": left.stateful_map(lambda total, v: ((total or 0) + v, (total or 0) + v)),
            "distinct": left.distinct(),
            "reduce": left.reduce(lambda a, b: a + b),
            "join": left.join(right),
            "interval_join": left.interval_join(right, -1, 2),
        }
        for name, stream in streams.items():
            stream.inspect_time(lambda t, r, name=name: say(repr((name, t, r))))

    worker.dataflow(make, name="keyed")
