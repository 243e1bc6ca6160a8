"""The snapshot of a running worker: graph, frontiers, capabilities held, and what holds time back."""

from __future__ import annotations

import asyncio
import json

import aiotimely as at
from aiotimely.observe.snapshot import snapshot, snapshots


def test_a_stuck_input_is_what_holds_time_back() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()

            def build(scope: at.Scope[at.Stream]) -> at.ProbeHandle:
                stream = inp.to_stream(scope).exchange(lambda x: x).map(lambda x: x + 1)
                looped = scope.iterative(lambda inner: stream.enter(inner).filter(lambda x: x > 0).leave(),
                                         name="Loop")
                return looped.probe()

            probe = worker.dataflow(build, name="numbers")
            inp.send(1)
            inp.advance_to(3)
            await worker.step_while(lambda: probe.less_than(3))
            view = snapshot(worker._scheduler)
            (flow,) = view.dataflows
            assert flow.name == "numbers"
            names = {op.name: op for op in flow.operators}
            source = names["Input"]
            assert source.holds_back and source.outputs[0].capabilities == [3]
            assert [op.name for op in flow.operators if op.holds_back] == ["Input"]
            assert flow.frontier == [3]
            exchanged = [e for e in flow.edges if e.pact == "exchange"]
            assert len(exchanged) == 1 and exchanged[0].source == source.id
            loop = [s for s in flow.scopes if s.name == "Loop"]
            assert loop and loop[0].iterative and loop[0].parent == "0"
            for op in flow.operators:
                if op.scope == "0" and op.inputs and op.name != "Input":
                    assert all(i.frontier == [3] for i in op.inputs), op
            blob = json.dumps(view.as_json())
            assert '"capabilities": ["3"]' in blob
            inp.close()

    asyncio.run(main())


def test_over_several_workers_only_the_earliest_holds_time_back() -> None:
    workers: list[at.Worker] = []
    checked = asyncio.Event()
    both = asyncio.Event()
    found: dict[str, object] = {}

    async def build(worker: at.Worker) -> None:
        inp: at.InputHandle[int] = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: x).probe(), name="pairs")
        workers.append(worker)
        if len(workers) == 2:
            both.set()
        if worker.index == 0:
            inp.send(1)
            inp.advance_to(5)  # worker 1's input stays at 0
            await asyncio.wait_for(both.wait(), timeout=30)  # worker 1 built its dataflow too
            await worker.step()
            schedulers = [w._scheduler for w in sorted(workers, key=lambda w: w.index)]
            found["alone"] = [op.holds_back for op in snapshot(schedulers[0]).dataflows[0].operators
                              if op.name == "Input"]
            found["together"] = [(view.worker, op.outputs[0].capabilities) for view in snapshots(schedulers)
                                 for op in view.dataflows[0].operators if op.holds_back]
            assert probe.less_than(1)
            checked.set()
        else:
            await asyncio.wait_for(checked.wait(), timeout=30)
        inp.close()

    async def main() -> None:
        await at.execute_async(build, workers=2)

    asyncio.run(main())
    assert found["alone"] == [True]  # worker 0 alone: its input, at 5, is the earliest it holds
    assert found["together"] == [(1, [0])]  # over both workers: worker 1's input, at 0, holds time back
