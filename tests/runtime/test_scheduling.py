"""How operators are woken: data, frontier interest, activators, awaited futures; stepping."""

from __future__ import annotations

import asyncio
import threading

import pytest

import aiotimely as at

NEVER, IF_CAPABILITY, ALWAYS = at.FrontierInterest.NEVER, at.FrontierInterest.IF_CAPABILITY, at.FrontierInterest.ALWAYS


def counting_operator(stream, interest, log, hold_until=None):
    """A unary operator that logs each activation with its frontier; optionally holds a capability."""

    @stream.unary(interest=interest, name=f"Counting-{interest.name}")
    async def op(input, output, cap):
        if hold_until is None:
            cap.drop()
        async for _ in input.activations():
            for _time, _batch in input.drain():
                pass
            log.append(input.frontier)
            if hold_until is not None and not cap.dropped and not input.frontier.less_than(hold_until):
                cap.drop()

    return op


async def advance_quietly(worker, inp, probe, times):
    for t in times:
        inp.advance_to(t)
        await worker.step_while(lambda t=t: probe.less_than(t))


@pytest.mark.parametrize("interest", [NEVER, IF_CAPABILITY, ALWAYS])
def test_frontier_interest_decides_who_wakes_for_time(run, interest):
    async def build(worker):
        inp = at.InputHandle()
        log = []
        probe = worker.dataflow(lambda s: counting_operator(inp.to_stream(s), interest, log).probe())
        await advance_quietly(worker, inp, probe, range(1, 11))
        woken_by_time = len(log)
        inp.send("data")
        await advance_quietly(worker, inp, probe, [11])
        return woken_by_time, len(log)

    woken_by_time, total = run(build)[0]
    if interest is ALWAYS:
        assert woken_by_time >= 10          # every frontier change wakes it
    else:
        assert woken_by_time <= 1           # only its first activation: time alone does not wake it
    assert total > woken_by_time            # data always wakes it


def test_if_capability_wakes_only_while_holding_one(run):
    async def build(worker):
        inp = at.InputHandle()
        log = []
        probe = worker.dataflow(lambda s: counting_operator(inp.to_stream(s), IF_CAPABILITY, log,
                                                            hold_until=5).probe())
        for t in range(1, 5):                # the probe is held at 0 by the operator's capability
            inp.advance_to(t)
            for _ in range(3):
                await worker.step()
        while_holding = len(log)
        await advance_quietly(worker, inp, probe, range(5, 20))
        return while_holding, len(log)

    while_holding, total = run(build)[0]
    assert while_holding >= 4               # holds a capability: woken at each step of time
    assert total - while_holding <= 2       # dropped it at 5: time no longer wakes it


def test_an_activator_wakes_an_operator_from_another_thread(run):
    async def build(worker):
        got = []
        activator_box = []

        async def polled(output, cap):
            activator = output.activator()
            activator_box.append(activator)
            async for _ in _forever():
                if got:
                    output.session(cap).give(got[-1])
                    break
                await activator.activated()
            cap.drop()

        out = []
        probe = worker.dataflow(lambda s: at.source(s, "Polled", polled).inspect(out.append).probe())
        await worker.step()
        thread = threading.Thread(target=lambda: (got.append("from thread"), activator_box[0].activate()))
        thread.start()
        thread.join()
        await probe.wait_beyond(0)
        return out

    assert run(build)[0] == ["from thread"]


async def _forever():
    while True:
        yield


def test_an_operator_awaiting_io_does_not_block_the_others(run):
    async def build(worker):
        gate = asyncio.Event()
        order = []

        def make(s):
            @at.to_stream([1], s).sink(name="Waiter")
            async def waiter(input):
                async for _ in input.activations():
                    for _ in input.drain():
                        order.append("waiting")
                        await gate.wait()            # parks this operator only
                        order.append("released")

            at.to_stream([2], s).inspect(lambda x: order.append("other ran"))

        worker.dataflow(make)
        for _ in range(5):
            await worker.step()
        order.append("opening gate")
        gate.set()
        return order

    assert run(build)[0] == ["waiting", "other ran", "opening gate", "released"]


@pytest.mark.asyncio
async def test_async_with_worker_inside_an_application():
    async with at.Worker() as worker:
        inp = at.InputHandle()
        totals = []
        probe = worker.dataflow(lambda s: inp.to_stream(s).accumulate(0, lambda a, xs: a + sum(xs))
                                .inspect(totals.append).probe())
        for t in range(3):
            inp.send_batch(range(t * 10, t * 10 + 10))
            inp.advance_to(t + 1)
            await probe.wait_beyond(t)
        assert totals == [45, 145, 245]
    assert probe.done()                      # leaving the block closed the input and finished


@pytest.mark.asyncio
async def test_async_with_dataflow_builds_on_exit():
    async with at.Worker() as worker:
        inp = at.InputHandle()
        seen = []
        async with worker.dataflow(name="built-on-exit") as scope:
            inp.to_stream(scope).inspect(seen.append)
        inp.send(1)
        await worker.step()
        await worker.step()
        assert seen == [1]


@pytest.mark.asyncio
async def test_the_worker_sleeps_when_idle():
    async with at.Worker() as worker:
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: x).probe())
        inp.advance_to(1)
        await probe.wait_beyond(0)
        rounds = worker.statistics().rounds
        await asyncio.sleep(0.05)            # nothing to do: no rounds, no spinning
        assert worker.statistics().rounds == rounds


def test_step_until_done_and_step_while(run):
    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).probe())
        inp.advance_to(3)
        await worker.step_while(lambda: probe.less_than(3))
        assert probe.frontier == at.Antichain([3])
        inp.close()
        await worker.step_until_done()
        return probe.done()

    assert run(build) == [True]


def test_a_probe_waits_for_completion_without_polling(run):
    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: x).probe())
        waiting = asyncio.ensure_future(probe.wait_done())
        inp.advance_to(5)
        await probe.wait_beyond(4)
        assert not waiting.done()            # time moved on, but the stream is not complete
        rounds = worker.statistics().rounds
        inp.close()
        await waiting
        return probe.done(), worker.statistics().rounds - rounds

    done, rounds = run(build)[0]
    assert done and rounds <= 3              # woken by the frontier, not by a polling loop
