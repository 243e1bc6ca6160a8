"""A worker that builds late, while its peers already fill its mailboxes, still takes part in the snapshots:
its sources declare their kept state in their first activation, which back-pressure never skips."""

from __future__ import annotations

import asyncio

import aiotimely as at

from .common import run

PER_WORKER = 3000


def late_build(outputs: list):
    """Two workers, each a source keeping its position (per worker key) sending to the other through an
    exchange; worker 1 builds half a second late, so worker 0 fills its mailbox (the outlet worker 1's source
    sends into) before worker 1's first round."""

    async def build(worker: at.Worker) -> None:
        if worker.index == 1:
            await asyncio.sleep(0.5)

        async def numbers(output, cap):
            position = output.keyed_state("position", dict)
            cap.downgrade(output.resume_time())
            n = position.get(worker.index, 0)
            while n < PER_WORKER:
                if n // 10 > cap.time:
                    cap.downgrade(n // 10)
                output.session(cap).give_many(range(n, n + 10))
                n += 10
                position[worker.index] = n
                await asyncio.sleep(0)
            cap.drop()

        def make(scope):
            (at.source(scope, "Numbers", numbers)
             .exchange(lambda x: x + 1)
             .inspect(outputs.append))

        worker.dataflow(make, name="late")

    return build


def test_a_worker_that_builds_late_behind_a_full_mailbox_takes_part(tmp_path):
    outputs: list = []
    run(late_build(outputs), tmp_path, workers=2, every=5)
    assert sorted(outputs) == sorted(list(range(PER_WORKER)) * 2)
