"""What a graceful stop does inside one process: the sources end, the builds still feeding inputs are cancelled
and their inputs closed, and every operator gets to finish with what it holds (here: a total it emits only
once its input is complete)."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

import aiotimely as at
from aiotimely.connectors import from_aiter
from aiotimely.lowlevel import InputPort, OperatorOutput


async def endless():
    n = 0
    while True:
        yield n
        n += 1
        await asyncio.sleep(0.001)


async def total_at_the_end(input: InputPort, output: OperatorOutput, cap: at.Capability) -> None:
    """Holds its capability and emits the sum of everything only once its input is complete."""
    total = 0
    async for _ in input.activations():
        for _, batch in input.drain():
            total += sum(batch)
    output.session(cap).give(total)
    cap.drop()


def counting(scope: at.Scope, seen: list[int], totals: list[int]) -> None:
    (from_aiter(scope, endless()).inspect(seen.append)
     .unary_frontier(total_at_the_end, name="Total").inspect(totals.append))


async def cancel_after_twenty(task: asyncio.Task[Any], seen: list[int]) -> None:
    """Cancel ``task`` once 20 records were seen, and wait for it to end with the cancellation."""
    while len(seen) < 20:
        await asyncio.wait_for(asyncio.shield(asyncio.sleep(0.005)), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)


def test_a_cancelled_application_worker_drains_what_its_operators_hold():
    seen: list[int] = []
    totals: list[int] = []

    async def app() -> None:
        async with at.Worker() as worker:
            worker.dataflow(lambda scope: counting(scope, seen, totals))
            await worker.step_until_done()

    async def main() -> None:
        task = asyncio.create_task(app())
        await cancel_after_twenty(task, seen)

    asyncio.run(main())
    assert totals == [sum(seen)] and len(seen) >= 20


def test_a_cancelled_execute_async_drains_then_raises_the_cancellation():
    seen: list[int] = []
    totals: list[int] = []

    async def main() -> None:
        task = asyncio.create_task(at.execute_async(lambda w: w.dataflow(lambda s: counting(s, seen, totals)),
                                                    workers=2))
        await cancel_after_twenty(task, seen)

    asyncio.run(main())
    assert sorted(totals) == [0, sum(seen)]  # (worker 0 reads the one iterator; worker 1 totals nothing)


def test_ctrl_c_cancels_a_build_feeding_an_input_closes_the_input_and_drains(loop, capsys):
    fed: list[int] = []
    got: list[int] = []

    async def build(worker: at.Worker) -> None:
        inp: at.InputHandle[int] = at.InputHandle()
        def make(scope: at.Scope) -> at.ProbeHandle:
            fed_in = inp.to_stream(scope)
            fed_in.unary_frontier(total_at_the_end).inspect(got.append)
            return fed_in.probe()

        probe = worker.dataflow(make)
        for t in range(1_000_000):
            inp.send(t)
            fed.append(t)
            inp.advance_to(t + 1)
            await worker.step_while(lambda: probe.less_than(inp.time))
            if t == 50:
                os.kill(os.getpid(), signal.SIGINT)      # as Ctrl-C: the build is cancelled at its next await

    with pytest.raises(SystemExit) as exit:
        at.execute(build, loop=loop)
    assert exit.value.code == 130
    assert capsys.readouterr().err == "aiotimely: stopped by SIGINT after the dataflows drained\n"
    assert got == [sum(fed)] and 50 <= len(fed) < 1_000_000
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler     # handed back
