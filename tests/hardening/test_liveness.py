"""Waits that can never end are reported, never hung: in one process, and across processes."""

from __future__ import annotations

import asyncio

import pytest

import aiotimely as at


def hoarding(worker, inp):
    """A dataflow whose operator keeps the capabilities it takes: its output's frontier never passes 1."""
    async def hoarder(input, output, cap):
        cap.drop()
        held = []
        async for _ in input.activations():
            for time, _batch in input.drain():
                held.append(time.delayed(time.time + 1))   # kept, never dropped

    return worker.dataflow(lambda s: inp.to_stream(s).unary(hoarder, name="Hoarder").probe(), name="leaky")


@pytest.mark.parametrize("wait", ["step_while", "wait_beyond"])
def test_a_wait_that_can_never_end_is_reported(run, wait):
    async def build(worker):
        inp = at.InputHandle()
        probe = hoarding(worker, inp)
        inp.send("x")
        inp.close()
        waiting = worker.step_while(lambda: probe.less_than(5)) if wait == "step_while" else probe.wait_beyond(3)
        await asyncio.wait_for(waiting, 10)

    with pytest.raises(at.DataflowError, match="cannot complete.*'Hoarder'.*still holds capabilities at time"):
        run(build)


def test_stepping_while_an_input_is_open_is_not_reported(run):
    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).probe())

        async def feed_later():
            await asyncio.sleep(0.05)
            inp.advance_to(2)

        checks = []

        def waiting() -> bool:
            checks.append(1)
            return probe.less_than(2)

        feeder = asyncio.ensure_future(feed_later())
        await worker.step_while(waiting)      # the open input may still move: no error, and no spinning
        await feeder
        return list(probe.frontier), len(checks)

    frontier, checks = run(build)[0]
    assert frontier == [2]
    assert checks < 20                        # checked after rounds, not in a busy loop for 50 ms
