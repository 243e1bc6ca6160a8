"""Timed batches: records that carry their own times inside batches sent at coarser times, read back by time
once complete; progress stays exact because no record's time is earlier than its batch's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.progress import INT, ProductType


def count_by_time(timed: at.Stream, batches: list | None = None) -> at.Stream:
    """Per record time, once complete: ``(time, count)`` as a timed record."""

    @timed.unary_frontier(name="CountByTime")
    async def count(input, output, cap):
        cap.drop()
        order = input.timed_order()
        handed = None
        async for _ in input.activations():
            for time, records in order.ready():
                assert handed is None or time > handed, "a time handed over twice, or out of order"
                handed = time
                order.session(output).give_at(time, (time, len(records)))
            assert all(t > handed for t in order.pending()) if handed is not None else True

    if batches is not None:
        count.inspect_batch(lambda time, batch: batches.append((time, batch)))
    return count


def count_by_record(timed: at.Stream) -> at.Stream:
    """``order.records()``: each complete record as ``(time, 1)`` at its time, record by record; times never go
    back, and a time handed over in one activation never comes again."""

    @timed.unary_frontier(name="CountByRecord")
    async def count(input, output, cap):
        cap.drop()
        order = input.timed_order()
        done = None                                  # the last time handed over in an earlier activation
        async for _ in input.activations():
            last = None
            for time, _record in order.records():
                assert done is None or time > done, "a time handed over again in a later activation"
                assert last is None or time >= last, "records out of time order"
                last = time
                order.session(output).give_at(time, (time, 1))
            done = last if last is not None else done
            assert all(t > done for t in order.pending()) if done is not None else True

    return count


def test_many_record_times_travel_in_one_batch_and_come_back_in_order():
    got, batches = [], []

    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda scope: count_by_time(inp.to_stream(scope), batches).settle()
                        .inspect_time(lambda t, r: got.append((t, r))))
        for t in reversed(range(1000)):             # 1,000 record times, sent in one batch at time 0
            inp.send_at(t, "x")
        inp.send_at(7, "y")
        inp.close()

    at.execute(build, loop="asyncio")
    assert got == [(t, (t, 2 if t == 7 else 1)) for t in range(1000)]   # at their own times, in order
    assert len(batches) == 1 and batches[0][0] == 0                      # one batch of timed output, not 1,000


def test_times_are_handed_over_only_once_the_frontier_passes_them():
    seen = []

    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda scope: count_by_time(inp.to_stream(scope)).inspect(seen.append).probe())
        inp.send_at(5, "a")
        inp.send_at(3, "b")
        inp.advance_to(4)
        await worker.step_while(lambda: probe.less_than(4))
        assert seen == [(3, (3, 1))]                 # 5 may still get records
        inp.send_at(5, "c")
        inp.advance_to(6)
        await worker.step_while(lambda: probe.less_than(6))
        assert seen == [(3, (3, 1)), (5, (5, 2))]
        inp.close()

    at.execute(build, loop="asyncio")


def test_a_timed_record_earlier_than_its_batch_is_refused():
    def by_input(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda scope: inp.to_stream(scope).inspect(print))
        inp.advance_to(5)
        inp.send_at(4, "late")

    with pytest.raises(at.CapabilityError, match="its current time is 5, and a timed record's time must not be"):
        at.execute(by_input, loop="asyncio")

    def by_session(worker):
        async def early(output, cap):
            cap.downgrade(5)
            output.session(cap).give_at(4, "late")
            cap.drop()

        worker.dataflow(lambda scope: at.source(scope, "Early", early).inspect(print))

    with pytest.raises(at.CapabilityError, match="cannot send a record at time 4 in a batch at 5"):
        at.execute(by_session, loop="asyncio")

    def by_timed(worker):
        worker.dataflow(lambda scope: at.to_stream([1, 2], scope).delay_batch(lambda t: 3)
                        .timed(lambda x: x).inspect(print))

    with pytest.raises(at.CapabilityError, match="'Timed' .* failed at time 3: .*the time 1 of record 1 is earlier "
                                                 "than its batch's, 3"):
        at.execute(by_timed, loop="asyncio")


@pytest.mark.parametrize("reader", ["ready", "records"])
@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 50)),
                                                                max_size=5)), max_size=6), min_size=3, max_size=3))
def test_timed_records_through_an_exchange_on_three_workers_arrive_whole_at_their_times(reader, plans):
    """Each worker advances its input by random steps and sends records at random times ahead of it; they are
    exchanged, counted by time once complete, and settled: every record counts once, at its own time."""
    expected: dict = {}
    for plan in plans:
        now = 0
        for step, records in plan:
            now += step
            for ahead, _ in records:
                expected[now + ahead] = expected.get(now + ahead, 0) + 1
    got: dict = {}

    async def build(worker):
        inp = at.InputHandle()
        count = count_by_time if reader == "ready" else count_by_record
        worker.dataflow(lambda scope: count(inp.to_stream(scope).exchange(lambda tr: tr[1][0]))
                        .settle().inspect_time(lambda t, r: got.__setitem__(t, got.get(t, 0) + r[1])))
        now = 0
        for step, records in plans[worker.index]:
            now += step
            inp.advance_to(now)
            for ahead, key in records:
                inp.send_at(now + ahead, (key, ahead))
            await worker.step()                  # the workers interleave: frontiers move between sends
        inp.close()

    at.execute(build, workers=3, loop="asyncio")
    assert got == expected


def test_times_that_only_the_batch_taken_held_back_are_handed_over_in_the_activation_that_takes_it():
    """A batch in flight holds its consumer's frontier at the batch's time until the consumer takes it. The
    timed order takes it, holds a capability for it, and brings the frontier up to date at once
    (``OperatorRuntime.refresh_frontiers``): the record times that were only waiting for that are handed over
    in the same activation, not in another one after the next propagation."""
    looks: list = []   # per look of the logic: (batches waiting before ready(), times ready() handed over)
    seen: list = []

    async def build(worker):
        inp = at.InputHandle()

        def make(scope):
            @inp.to_stream(scope).unary_frontier(name="Timed")
            async def timed(input, output, cap):
                cap.drop()
                order = input.timed_order()
                async for _ in input.activations():
                    waiting = input.pending()
                    handed = []
                    for time, records in order.ready():
                        handed.append(time)
                        order.session(output).give_many_at(time, records)
                    looks.append((waiting, handed))

            return timed.inspect(seen.append).probe()

        probe = worker.dataflow(make)
        await worker.step_while(lambda: not looks)
        looks.clear()
        inp.send_at(3, "a")                      # one batch at time 0: records at 3 and 5
        inp.send_at(5, "b")
        inp.advance_to(4)                        # the input moves on: only the batch holds time 0 back
        await worker.step_while(lambda: probe.less_than(4))
        assert looks[0] == (1, [3]), looks       # handed over when taken (5 may still get records)
        assert seen == [(3, "a")]
        looks.clear()
        inp.send_at(6, "c")
        inp.close()
        await worker.step_until_done()
        assert looks[0] == (1, [5, 6]), looks
        assert seen == [(3, "a"), (5, "b"), (6, "c")]

    at.execute(build, loop="asyncio")


def test_a_refresh_waits_when_the_logic_took_from_another_input_first():
    """The timed order does not report a batch early while the logic holds batches of another input that it
    took before and may still mean to keep (their received times stay valid until it yields)."""
    got: list = []

    def build(worker):
        timed_in, other_in = at.InputHandle(), at.InputHandle()

        def make(scope):
            @timed_in.to_stream(scope).binary_frontier(other_in.to_stream(scope), name="Two")
            async def two(timed, other, output, cap):
                cap.drop()
                order = timed.timed_order()
                async for _ in timed.activations():
                    taken = list(other.drain())                  # received times, not retained yet
                    for time, records in order.ready():
                        order.session(output).give_many_at(time, records)
                    for ref, records in taken:                   # kept only now, in the same activation
                        held = ref.retain()
                        output.session(held).give_many_at(held.time, records)
                        held.drop()

            two.inspect(got.append)

        worker.dataflow(make)
        for t in range(5):
            timed_in.send_at(t + 1, f"t{t}")
            other_in.send(f"o{t}")
            timed_in.advance_to(t + 1)
            other_in.advance_to(t + 1)
        timed_in.close()
        other_in.close()

    at.execute(build, loop="asyncio")
    assert sorted(got) == sorted([(t + 1, f"t{t}") for t in range(5)] + [(t, f"o{t}") for t in range(5)])


def test_records_hands_over_every_complete_record_in_time_order_and_arrival_order_within_a_time():
    got = []

    def build(worker):
        inp = at.InputHandle()

        def make(scope):
            @inp.to_stream(scope).unary_frontier(name="Records")
            async def records(input, output, cap):
                cap.drop()
                order = input.timed_order()
                async for _ in input.activations():
                    for time, record in order.records():
                        got.append((time, record))
                        order.session(output).give_at(time, record)

            return records

        worker.dataflow(make)
        for i, t in enumerate([9, 3, 7, 3, 0, 9, 3]):   # one batch at time 0, record times out of order
            inp.send_at(t, f"r{i}")
        inp.advance_to(5)
        inp.send_at(7, "late")                          # a batch at 5 with a record at 7
        inp.close()

    at.execute(build, loop="asyncio")
    assert got == [(0, "r4"), (3, "r1"), (3, "r3"), (3, "r6"), (7, "r2"), (7, "late"), (9, "r0"), (9, "r5")]


@pytest.mark.parametrize("reader", ["ready", "records"])
def test_a_planted_early_handover_is_caught(reader, monkeypatch):
    """The checks above catch a timed order that hands over a time the frontier has not passed (cutting the
    sorted records after the frontier's time instead of before it)."""
    from bisect import bisect_right

    from aiotimely.dataflow import ports

    monkeypatch.setattr(ports, "bisect_left", bisect_right)

    async def build(worker):
        inp = at.InputHandle()
        count = count_by_time if reader == "ready" else count_by_record
        probe = worker.dataflow(lambda scope: count(inp.to_stream(scope)).probe())
        inp.advance_to(5)
        inp.send_at(5, "a")                              # at the frontier: not complete
        await worker.step_while(lambda: probe.less_than(5))
        await worker.step()
        inp.send_at(5, "b")
        inp.close()
        await worker.step_until_done()

    with pytest.raises(at.DataflowError, match="a time handed over"):
        at.execute(build, loop="asyncio")


@pytest.mark.parametrize("reader", ["ready", "records"])
@pytest.mark.parametrize("timestamp", ["int", "product"])
def test_a_loop_that_stops_early_leaves_the_rest_pending(reader, timestamp):
    """Breaking out of ``ready()`` or ``records()`` hands over only what the loop got: the rest stays pending
    and comes with the next look, in order, none lost."""
    got: list = []
    product = timestamp == "product"
    ts = (lambda t: at.Product(0, t)) if product else (lambda t: t)

    def build(worker):
        inp = at.InputHandle()

        def make(scope):
            @inp.to_stream(scope).unary_frontier(name="Halting")
            async def halting(input, output, cap):
                cap.drop()
                order = input.timed_order()
                async for _ in input.activations():
                    while True:                 # one time (or one record) per look, then stop early
                        looked = order.ready() if reader == "ready" else order.records()
                        first = next(looked, None)
                        looked.close()
                        if first is None:
                            break
                        got.append(first)

        worker.dataflow(make, timestamp=ProductType(INT, INT) if product else int)
        for t in [4, 2, 2, 9]:
            inp.send_at(ts(t), f"x{t}")
        inp.close()

    at.execute(build, loop="asyncio")
    if reader == "ready":
        assert got == [(ts(2), ["x2", "x2"]), (ts(4), ["x4"]), (ts(9), ["x9"])]
    else:
        assert got == [(ts(2), "x2"), (ts(2), "x2"), (ts(4), "x4"), (ts(9), "x9")]
