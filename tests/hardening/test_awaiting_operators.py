"""Operators that await between activations lose nothing: input, frontier changes and activator calls
that arrive while the logic is busy elsewhere are seen at its next ``activations()`` step."""

from __future__ import annotations

import asyncio

import aiotimely as at


def test_records_arriving_during_a_bare_yield_are_seen(run):
    async def build(worker):
        inp = at.InputHandle()
        seen = []

        def make(s):
            @inp.to_stream(s).unary(name="Napper")          # NEVER: only data wakes it
            async def napper(input, output, cap):
                cap.drop()
                async for _ in input.activations():
                    for time, batch in input.drain():
                        seen.extend(batch)
                        output.session(time).give_many(batch)
                    await asyncio.sleep(0)                   # a bare yield: run again next round

            return napper.probe()

        worker.dataflow(make)
        for t in range(5):
            inp.send(t)
            inp.advance_to(t + 1)
            await worker.step()                              # the next record arrives during the nap
        inp.close()
        await asyncio.wait_for(worker.step_until_done(), 5)
        return seen

    assert run(build)[0] == [0, 1, 2, 3, 4]


def test_records_arriving_while_an_operator_awaits_an_event_are_seen(run):
    async def build(worker):
        inp = at.InputHandle()
        gate = asyncio.Event()
        seen = []

        def make(s):
            @inp.to_stream(s).unary(name="Gated")
            async def gated(input, output, cap):
                cap.drop()
                async for _ in input.activations():
                    for time, batch in input.drain():
                        seen.extend(batch)
                        output.session(time).give_many(batch)
                    await gate.wait()                        # parked: the worker runs everything else

            return gated.probe()

        probe = worker.dataflow(make)
        inp.send("first")
        inp.advance_to(1)
        for _ in range(3):
            await worker.step()
        inp.send("during the wait")                         # arrives while the operator is parked
        inp.advance_to(2)
        for _ in range(3):
            await worker.step()
        gate.set()
        await asyncio.wait_for(probe.wait_beyond(1), 5)
        result = list(seen)
        inp.close()
        await asyncio.wait_for(worker.step_until_done(), 5)
        return result

    assert run(build)[0] == ["first", "during the wait"]


def test_an_activation_that_reaches_a_parked_source_is_kept(run):
    async def build(worker):
        released = asyncio.Event()
        box = []

        async def poller(output, cap):
            activator = output.activator()
            box.append(activator)
            await released.wait()                            # parked when the activation comes
            await activator.activated()                      # it came already: go on at once
            output.session(cap).give("after the activation")
            cap.drop()

        seen = []
        probe = worker.dataflow(lambda s: at.source(s, "Poller", poller).inspect(seen.append).probe())
        await worker.step()
        box[0].activate()                                     # while the source awaits `released`
        await worker.step()
        released.set()
        await asyncio.wait_for(probe.wait_beyond(0), 5)
        return seen

    assert run(build)[0] == ["after the activation"]


def test_a_frontier_change_while_parked_is_not_lost(run):
    async def build(worker):
        inp = at.InputHandle()
        gate = asyncio.Event()
        frontiers = []

        def make(s):
            @inp.to_stream(s).unary_frontier(name="Watcher")
            async def watcher(input, output, cap):
                cap.drop()
                async for _ in input.activations():
                    for _ in input.drain():
                        pass
                    frontiers.append(list(input.frontier))
                    if not gate.is_set():
                        await gate.wait()

            return watcher.probe()

        worker.dataflow(make)
        await worker.step()
        inp.advance_to(3)                                    # the frontier moves while the watcher is parked
        for _ in range(3):
            await worker.step()
        gate.set()
        for _ in range(5):
            await worker.step()
        result = list(frontiers)
        inp.close()
        await asyncio.wait_for(worker.step_until_done(), 5)
        return result

    assert run(build)[0][-1] == [3]
