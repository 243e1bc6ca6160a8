"""Failures: operator exceptions, capability misuse, dataflows that cannot complete. Each names its place."""

from __future__ import annotations

import asyncio
import gc
import pickle
import threading

import pytest

import aiotimely as at


def test_an_operator_exception_stops_every_worker_and_names_the_place(run):
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: x).map(lambda x: 10 // (x - 7)),
                        name="divide")
        if worker.index == 0:
            for t in range(10):
                inp.advance_to(t)
                inp.send(t)

    with pytest.raises(at.DataflowError) as info:
        run(build, workers=3)
    message = str(info.value)
    assert "operator 'Map'" in message
    assert "dataflow 'divide'" in message
    assert "on worker 1" in message                # 7 % 3 == 1: the worker that met the record
    assert "at time 7" in message
    assert "ZeroDivisionError" in message
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    error = info.value                             # the same place, as attributes
    assert (error.dataflow, error.operator, error.worker, error.time) == ("divide", "Map", 1, 7)
    assert error.path == (0, 2)                   # input #1, then exchange and map fused as #2 in dataflow 0
    copy = pickle.loads(pickle.dumps(error))      # errors cross process and thread boundaries intact
    assert (str(copy), copy.operator, copy.time) == (message, "Map", 7)


def test_an_exception_in_async_logic_reaches_an_async_with_block():
    async def main():
        async with at.Worker() as worker:
            inp = at.InputHandle()

            def make(s):
                @inp.to_stream(s).sink(name="Picky")
                async def picky(input):
                    async for _ in input.activations():
                        for _time, batch in input.drain():
                            if "bad" in batch:
                                raise ValueError("bad record")

            worker.dataflow(make)
            inp.send("good")
            inp.advance_to(1)
            inp.send("bad")
            inp.advance_to(2)

    with pytest.raises(at.DataflowError, match=r"operator 'Picky'.*worker 0 failed at time 1: ValueError: bad record"):
        asyncio.run(main())


def test_a_waiting_probe_learns_of_the_failure_instead_of_hanging(run):
    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: 1 / 0).probe())
        inp.send(1)
        inp.advance_to(1)
        await probe.wait_beyond(0)

    with pytest.raises(at.DataflowError, match="ZeroDivisionError"):
        run(build, workers=2)


def test_no_task_or_thread_is_left_running_after_a_failure(loop):
    before = threading.active_count()

    async def main():
        computation_tasks = []

        def build(worker):
            worker.dataflow(lambda s: at.to_stream([0], s).map(lambda x: 1 / x))

        with pytest.raises(at.DataflowError):
            await at.execute_async(build, workers=3)
        computation_tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("aiotimely")]
        return computation_tasks

    from aiotimely.worker.loop import run as run_loop

    assert run_loop(main(), loop) == []
    assert threading.active_count() == before


# -- capabilities ------------------------------------------------------------------------


def misuse(run, logic, *, times=(0,)):
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).unary(logic, name="Misuser"), name="misuse")
        for t in times:
            inp.advance_to(t)
            inp.send(t)

    with pytest.raises(at.CapabilityError) as info:
        run(build)
    assert "operator 'Misuser'" in str(info.value) and "dataflow 'misuse'" in str(info.value)
    return str(info.value)


def test_downgrading_to_an_earlier_time_is_refused(run):
    async def logic(input, output, cap):
        cap.downgrade(5)
        cap.downgrade(3)

    message = misuse(run, logic)
    assert "at time 5 to 3" in message


def test_downgrading_to_an_incomparable_product_time_is_refused(run):
    def build(worker):
        async def logic(input, output, cap):
            cap.downgrade(at.Product(1, 0))
            cap.delayed(at.Product(0, 1))

        from aiotimely.progress import INT, ProductType

        worker.dataflow(lambda s: at.to_stream([], s).unary(logic, name="Misuser"), timestamp=ProductType(INT, INT))

    with pytest.raises(at.CapabilityError, match=r"at time Product\(1, 0\) to Product\(0, 1\)"):
        run(build)


def test_using_a_dropped_capability_is_refused(run):
    async def logic(input, output, cap):
        cap.drop()
        output.session(cap).give(1)

    assert "already dropped" in misuse(run, logic)


def test_sending_after_the_drop_within_a_session_is_refused(run):
    async def logic(input, output, cap):
        session = output.session(cap)
        session.give(1)
        cap.drop()
        session.give(2)

    assert "its capability was dropped" in misuse(run, logic)


def test_sending_after_a_downgrade_within_a_session_is_refused(run):
    async def logic(input, output, cap):
        session = output.session(cap)
        session.give(1)
        cap.downgrade(5)
        session.give(2)        # the session is for time 0, which the capability no longer allows

    assert "its capability was downgraded to 5 (open a new session)" in misuse(run, logic)


def test_a_received_time_is_not_valid_after_the_operator_yields(run):
    async def logic(input, output, cap):
        cap.drop()
        kept = []
        async for _ in input.activations():
            for time, _batch in input.drain():
                kept.append(time)
            if len(kept) > 1:
                output.session(kept[0]).give("stale")

    assert "after the operator yielded" in misuse(run, logic, times=(0, 1, 2))


def test_a_capability_for_another_operator_is_refused(run):
    def build(worker):
        caps = []

        async def first(input, output, cap):
            caps.append(cap)
            async for _ in input.activations():
                pass

        async def second(input, output, cap):
            cap.drop()
            async for _ in input.activations():
                if caps:
                    output.session(caps[0]).give(1)

        def make(s):
            stream = at.to_stream([1], s)
            stream.unary(first, name="First")
            stream.unary(second, name="Second")

        worker.dataflow(make)

    with pytest.raises(at.CapabilityError, match="of 'First' cannot send on output 0 of 'Second'"):
        run(build)


def test_advancing_an_input_backwards_is_refused(run):
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s))
        inp.advance_to(4)
        inp.advance_to(2)

    with pytest.raises(at.CapabilityError, match="'Input'.*at time 4 to 2"):
        run(build)


def test_sending_to_a_closed_input_is_refused(run):
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s))
        inp.close()
        inp.send(1)

    with pytest.raises(at.CapabilityError, match="is closed"):
        run(build)


# -- dataflows that cannot complete ---------------------------------------------------------


def test_an_operator_that_keeps_a_capability_is_reported_by_name_and_time(run):
    def build(worker):
        held = []

        async def hoarder(input, output, cap):
            cap.drop()
            async for _ in input.activations():
                for time, _batch in input.drain():
                    held.append(time.delayed(time.time + 1))   # kept, never dropped

        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).unary(hoarder, name="Hoarder"), name="leaky")
        inp.send("x")
        inp.advance_to(3)
        inp.send("y")

    with pytest.raises(at.DataflowError) as info:
        run(build, workers=2)
    message = str(info.value)
    assert "cannot complete" in message
    assert "operator 'Hoarder'" in message and "dataflow 'leaky'" in message
    assert "time(s) 1, 4" in message


def test_a_dropped_reference_to_a_capability_releases_it():
    """As in Rust: a capability nobody references any more is dropped (the dataflow completes)."""

    def build(worker):
        async def forgetful(input, output, cap):
            async for _ in input.activations():
                for time, _batch in input.drain():
                    time.retain()                       # made and immediately forgotten

        worker.dataflow(lambda s: at.to_stream([1, 2], s).unary(forgetful, name="Forgetful"))
        gc.collect()

    at.execute(build)


def test_a_worker_still_building_is_not_taken_for_stuck(run):
    """Workers 1 and 2 wait for worker 0, whose build is still awaiting something: no false alarm."""

    async def build(worker):
        if worker.index == 0:
            await asyncio.sleep(0.3)          # e.g. connecting somewhere before building its dataflow
        inp = at.InputHandle()
        got = []
        worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: 0).inspect(got.append))
        inp.send(worker.index)
        return got

    assert sorted(run(build, workers=3)[0]) == [0, 1, 2]


@pytest.mark.asyncio
async def test_helper_tasks_are_cancelled_and_awaited_when_an_async_with_block_fails():
    from aiotimely.connectors import to_async

    cleaned = []

    async def call(time, records):
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append(time)

    with pytest.raises(at.DataflowError, match="ZeroDivisionError"):
        async with at.Worker() as worker:
            inp = at.InputHandle()

            def make(s):
                stream = inp.to_stream(s)
                to_async(stream, call)
                stream.map(lambda x: 1 / 0 if x == "boom" else x)

            worker.dataflow(make)
            inp.send("a")
            inp.advance_to(1)
            for _ in range(3):
                await worker.step()
            inp.send("boom")
            inp.advance_to(2)
            await worker.step_until_done()
    assert cleaned == [0]        # the call in flight was cancelled, and its clean-up ran, before the block ended
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("aiotimely")] == []


def test_a_failing_helper_task_fails_the_computation_naming_its_operator(run):
    async def build(worker):
        async def logic(input, output, cap):
            cap.drop()

            async def helper():
                raise KeyError("gone")

            output.start_soon(helper(), name="the lookup")
            async for _ in input.activations():
                for time, batch in input.drain():
                    output.session(time).give_many(batch)

        worker.dataflow(lambda s: at.to_stream([1], s).unary(logic, name="Helped"), name="helpers")

    with pytest.raises(at.DataflowError) as info:
        run(build)
    message = str(info.value)
    assert message.startswith("the lookup of operator 'Helped'") and "dataflow 'helpers'" in message
    assert "KeyError: 'gone'" in message
    assert (info.value.operator, info.value.dataflow) == ("Helped", "helpers")
