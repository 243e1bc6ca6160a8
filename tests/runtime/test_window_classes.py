"""The window operator's small parts on their own: the capability pool (one capability per pending time, counted),
the injected clock (a manual one wakes its waiters when moved), the event-time strategies; and processing-time
windows driven by a manual clock, step by step, without sleeping."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import aiotimely as at
from aiotimely.dataflow.operators import windows
from aiotimely.dataflow.operators.pool import CapabilityPool
from aiotimely.dataflow.operators.windowing.deadlines import IntDeadlines, ProductDeadlines
from aiotimely.dataflow.operators.windowing.eventtime import DataflowTime, FieldTime, TimedRecords
from aiotimely.worker.clock import WALL_CLOCK, ManualClock

# -- the capability pool -----------------------------------------------------------------------------


class Held:
    """What an operator holds, as counts per time (what its capabilities would report to progress)."""

    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}

    def change(self, time: Any, diff: int) -> None:
        self.counts[time] = self.counts.get(time, 0) + diff
        if not self.counts[time]:
            del self.counts[time]


class FakeCapability:
    """The part of :class:`aiotimely.Capability` a pool uses: delayed, downgrade, drop, time."""

    def __init__(self, held: Held, time: Any) -> None:
        self.held, self.time, self.dropped = held, time, False
        held.change(time, 1)

    def delayed(self, time: Any) -> FakeCapability:
        assert not self.dropped and self.time <= time
        return FakeCapability(self.held, time)

    def downgrade(self, time: Any) -> None:
        assert not self.dropped and self.time <= time
        self.held.change(self.time, -1)
        self.held.change(time, 1)
        self.time = time

    def drop(self) -> None:
        assert not self.dropped
        self.dropped = True
        self.held.change(self.time, -1)


def test_a_pool_holds_one_capability_per_time_while_anything_waits_for_it():
    held = Held()
    source = FakeCapability(held, 0)
    pool: CapabilityPool[int] = CapabilityPool()
    for t in (10, 20, 10, 10):
        pool.hold(t, source)  # type: ignore[arg-type]
    assert held.counts == {0: 1, 10: 1, 20: 1} and len(pool) == 2
    assert pool.waiting(10) == 3 and pool.capability(10).time == 10
    pool.release(10, 2)
    assert 10 in pool and held.counts[10] == 1
    pool.release(10)
    assert 10 not in pool and 10 not in held.counts           # the last release drops it
    with pytest.raises(ValueError, match="cannot release 20 2 times: 1 wait"):
        pool.release(20, 2)
    assert pool.waiting(20) == 1                               # (refused: nothing changed)


def test_a_pool_looks_up_and_releases_many_times_in_one_call():
    held = Held()
    source = FakeCapability(held, 0)
    pool: CapabilityPool[int] = CapabilityPool()
    for t in (5, 5, 6, 7):
        pool.hold(t, source)  # type: ignore[arg-type]
    assert [cap.time for cap in pool.capabilities([7, 5])] == [7, 5]
    pool.release_all({5: 1, 6: 1})
    assert held.counts == {0: 1, 5: 1, 7: 1} and pool.waiting(5) == 1
    with pytest.raises(ValueError, match="cannot release 7 2 times"):
        pool.release_all({7: 2})


def test_a_pool_gives_up_the_times_the_frontier_has_passed_earliest_first():
    held = Held()
    source = FakeCapability(held, 0)
    pool: CapabilityPool[int] = CapabilityPool()
    for t in (30, 10, 20):
        pool.hold(t, source)  # type: ignore[arg-type]
    frontier = at.Antichain([25])
    taken = pool.take_passed(frontier.less_equal)
    assert [t for t, _ in taken] == [10, 20] and list(pool.times()) == [30]
    assert held.counts == {0: 1, 10: 1, 20: 1, 30: 1}         # handed over, still held: the caller sends, drops
    for _, cap in taken:
        cap.drop()
    assert pool.release_passed(at.Antichain([40]).less_equal) == [30]
    assert held.counts == {0: 1} and not pool


def test_a_pool_that_does_not_retime_keeps_dataflow_times_and_moves_them_up_to_the_frontier():
    held = Held()
    pool: CapabilityPool[int] = CapabilityPool(retime=False)
    pool.hold(900_030, FakeCapability(held, 3))  # type: ignore[arg-type]   # a wall-clock deadline
    pool.hold(900_060, FakeCapability(held, 5))  # type: ignore[arg-type]
    assert pool.capability(900_030).time == 3 and pool.capability(900_060).time == 5
    pool.downgrade_to(4)
    assert pool.capability(900_030).time == 4 and pool.capability(900_060).time == 5


# -- the clock ----------------------------------------------------------------------------------------

def test_a_manual_clock_wakes_its_waiters_when_it_reaches_their_deadlines():
    async def main() -> list[int]:
        clock = ManualClock(100)
        woken: list[int] = []

        async def waiter(deadline: int) -> None:
            await clock.wait_until(deadline)
            woken.append(deadline)

        tasks = [asyncio.ensure_future(waiter(d)) for d in (130, 110, 100)]
        await asyncio.sleep(0)
        assert woken == [100] and clock.waiting() == 2
        clock.advance(10)
        await asyncio.sleep(0)
        assert woken == [100, 110]
        with pytest.raises(ValueError, match="forward only"):
            clock.set(50)
        clock.set(200)
        await asyncio.gather(*tasks)
        return woken

    assert asyncio.run(main()) == [100, 110, 130]


def test_the_wall_clock_is_milliseconds_since_the_epoch():
    import time
    before = time.time_ns() // 1_000_000
    assert before <= WALL_CLOCK.now() <= time.time_ns() // 1_000_000

    async def main() -> None:
        await WALL_CLOCK.wait_until(WALL_CLOCK.now() - 1000)      # (already passed: at once)

    asyncio.run(main())


# -- event times and deadlines -------------------------------------------------------------------------

def test_event_time_strategies_pair_records_with_their_times():
    records = [{"ts": 3}, {"ts": 1}]
    assert list(FieldTime(lambda r: r["ts"]).pairs(records, 0)) == [(3, records[0]), (1, records[1])]
    assert list(DataflowTime().pairs(records, at.Product(7, 2))) == [(7, records[0]), (7, records[1])]
    timed = [(4, "a"), (5, "b")]
    assert TimedRecords().pairs(timed, 0) is timed
    assert TimedRecords().route(lambda r: r.upper())((4, "a")) == "A"
    error = FieldTime(lambda r: r["ts"] / 2).error(records, 9)
    assert "the event time of record {'ts': 3} is 1.5: event times must be ints" in str(error)


def test_deadlines_pop_the_windows_the_frontier_has_passed():
    ends = [(10, "a"), (20, "b"), (30, "c")]
    assert IntDeadlines(5).due(list(ends), [25], 1) == [(10, "a"), (20, "b")]   # 10 + 5 and 20 + 5 <= 25
    assert IntDeadlines(5).due(list(ends), [], 1) == ends                        # the input is done: all
    frontier = at.Antichain([at.Product(12, 0)])
    inner = ProductDeadlines(0, frontier.less_equal)
    rounds = [(10, (0, at.Product(0, 0))), (20, (10, at.Product(0, 0)))]
    assert inner.due(list(rounds), [at.Product(12, 0)], 1) == [rounds[0]]
    assert inner.out_time(rounds[1][1], 20) == at.Product(20, 0)


# -- processing time on a manual clock -----------------------------------------------------------------

def test_processing_time_windows_close_when_the_injected_clock_says_without_sleeping():
    clock = ManualClock(900)                 # far from the wall clock: windows by it show it alone is read
    got: list[Any] = []

    async def build(worker: at.Worker) -> None:
        inp: at.InputHandle[int] = at.InputHandle()
        worker.dataflow(lambda s: windows.window(inp.to_stream(s), at.Tumbling(30), at.Agg.count(),
                                                 key=lambda x: x % 2, time="processing", clock=clock)
                        .inspect_time(lambda t, r: got.append((t, r))))

        async def settle() -> None:
            for _ in range(20):
                await worker.step()

        inp.send_batch(list(range(10)))
        inp.advance_to(5)
        await settle()
        clock.advance(15)                                   # 915: [900, 930) is still open
        inp.send_batch([10, 11])
        inp.advance_to(7)
        await settle()
        assert got == []
        clock.advance(15)                                   # 930: it closes, at the frontier's time
        await settle()
        assert sorted(got) == [(7, (0, (900, 930), 6)), (7, (1, (900, 930), 6))]
        inp.send(12)
        inp.advance_to(9)
        await settle()
        clock.set(1000)                                     # [930, 960) closes at 9
        await settle()
        assert got[2:] == [(9, (0, (930, 960), 1))]
        inp.send(13)                                        # in [990, 1020): the input's end closes it
        inp.close()

    at.execute(build, loop="asyncio")
    assert got[3:] == [(9, (1, (990, 1020), 1))]
