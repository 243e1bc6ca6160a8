"""Async iterators as sources (batching, time policies, partitions) and async callables as sinks."""

from __future__ import annotations

import asyncio

import pytest

import aiotimely as at
from aiotimely.connectors import EventTime, EveryBatch, WallClock, from_aiter, to_async


async def bursts(n_bursts: int, size: int, pause: float = 0.01):
    for b in range(n_bursts):
        for i in range(size):
            yield b * size + i          # ready without waiting: one batch
        await asyncio.sleep(pause)      # then the iterator waits: the batch is sent first


def collect(stream, into):
    return stream.inspect_batch(lambda t, xs: into.append((t, list(xs))))


def test_every_batch_gives_each_burst_its_own_time(run):
    def build(worker):
        got = []
        worker.dataflow(lambda s: collect(from_aiter(s, bursts(4, 5), time=EveryBatch()), got))
        return got

    got = run(build)[0]
    assert got == [(t, list(range(t * 5, t * 5 + 5))) for t in range(4)]


def test_large_bursts_are_cut_into_batches(run):
    def build(worker):
        got = []
        worker.dataflow(lambda s: collect(from_aiter(s, bursts(1, 2500), batch_size=1000), got))
        return got

    got = run(build)[0]
    assert [len(xs) for _, xs in got] == [1000, 1000, 500]
    assert [t for t, _ in got] == [0, 1, 2]


def test_wall_clock_time_moves_on_while_nothing_arrives(run):
    async def build(worker):
        release = asyncio.Event()

        async def slow():
            yield "early"
            await release.wait()              # nothing arrives until the test has seen time move
            yield "late"

        got = []
        probe = worker.dataflow(lambda s: collect(from_aiter(s, slow(), time=WallClock(0.05)), got).probe())
        for _ in range(500):                  # up to 5 s on a busy machine
            if not probe.less_than(3):
                break
            await asyncio.sleep(0.01)
        frontier_while_waiting = probe.frontier
        release.set()
        await worker.step_until_done()
        return got, frontier_while_waiting

    got, frontier = run(build)[0]
    assert [xs for _, xs in got] == [["early"], ["late"]]
    assert got[0][0] == 0 and got[1][0] >= 3
    assert list(frontier)[0] >= 3           # periods passed with no record: the frontier followed the clock


@pytest.mark.parametrize("late, expected", [
    ("clamp", {5: [5], 6: [6], 7: [7, 3], 8: [8]}),    # 3 comes too late: given the earliest open time, 7
    ("drop", {5: [5], 6: [6], 7: [7], 8: [8]}),
])
def test_event_time_with_bounded_lateness(run, late, expected):
    async def events():
        for t in (5, 7, 6, 8, 3):           # 6 is within lateness 1 of 7; 3 is too late
            yield t
            await asyncio.sleep(0.005)

    policy = EventTime(lambda r: r, lateness=1, late=late)

    def build(worker):
        got = []
        worker.dataflow(lambda s: collect(from_aiter(s, events(), time=policy), got))
        return got

    got = run(build)[0]
    merged: dict = {}
    for t, xs in got:
        merged.setdefault(t, []).extend(xs)
    assert merged == expected
    assert policy.late_records == (1 if late == "drop" else 0)


def test_event_time_can_refuse_late_records(run):
    async def events():
        for t in (10, 2):
            yield t
            await asyncio.sleep(0.005)

    def build(worker):
        worker.dataflow(lambda s: from_aiter(s, events(), time=EventTime(lambda r: r, late="error")))

    with pytest.raises(at.DataflowError, match="at event time 2 is later than allowed: time 10 is already complete"):
        run(build)


def test_a_partitioned_source_reads_one_iterator_per_worker(run):
    async def part(index, peers):
        for x in range(index, 20, peers):
            yield x

    def build(worker):
        got = []
        worker.dataflow(lambda s: from_aiter(s, part).inspect(got.append))
        return got

    results = run(build, workers=3)
    assert [sorted(r) for r in results] == [list(range(w, 20, 3)) for w in range(3)]


def test_to_async_bounds_calls_in_flight_and_passes_on_what_was_delivered(run):
    async def build(worker):
        state = {"running": 0, "most": 0, "seen": []}

        async def deliver(time, records):
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
            await asyncio.sleep(0.01)
            state["seen"].extend(records)
            state["running"] -= 1

        inp = at.InputHandle()
        delivered = []
        probe = worker.dataflow(lambda s: to_async(inp.to_stream(s), deliver, max_in_flight=3)
                                .inspect(delivered.append).probe())
        for t in range(10):
            inp.send_batch([t * 10 + i for i in range(4)])
            inp.advance_to(t + 1)
        await probe.wait_beyond(4)
        assert all(x in state["seen"] for x in delivered)        # passed on only once delivered
        assert sorted(x for x in state["seen"] if x < 50) == sorted(x for x in delivered if x < 50)
        inp.close()
        await worker.step_until_done()
        return state, delivered

    state, delivered = run(build)[0]
    assert state["most"] == 3
    assert sorted(delivered) == sorted(state["seen"]) == sorted(t * 10 + i for t in range(10) for i in range(4))


def test_to_async_per_record_and_failures(run):
    def build(worker):
        async def picky(record):
            if record == 3:
                raise ValueError("three is bad")

        worker.dataflow(lambda s: to_async(at.to_stream(range(5), s), picky, per="record", name="Picky"))

    with pytest.raises(at.DataflowError, match="Picky.*ValueError: three is bad"):
        run(build)
