"""Back-pressure in one process: every queue has a bound, and a producer that meets it waits."""

from __future__ import annotations

import asyncio
import resource

import aiotimely as at
from aiotimely.comm.backpressure import MAILBOX_HIGH
from aiotimely.connectors import from_aiter, to_async
from aiotimely.dataflow.input import BUFFERED
from aiotimely.dataflow.ports import BATCH_SIZE


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def test_a_fast_source_waits_for_a_slow_sink(run):
    """A source that never waits feeds a sink taking 50 ms per batch: the source is pulled only as fast
    as the sink takes, so what is in flight stays under the bounds (and memory stays flat)."""
    async def build(worker):
        produced, consumed, stop = [0], [0], [False]

        async def endless():
            while not stop[0]:
                produced[0] += 1
                yield "x" * 100

        async def slow(_time, records):
            if not stop[0]:
                await asyncio.sleep(0.05)
            consumed[0] += len(records)

        probe = worker.dataflow(lambda s: to_async(from_aiter(s, endless()).map(str.upper), slow, max_in_flight=1)
                                .probe())
        await asyncio.sleep(0.3)
        early = rss_mib()
        in_flight = []
        for _ in range(8):
            await asyncio.sleep(0.25)
            in_flight.append(produced[0] - consumed[0])
        grown = rss_mib() - early
        stop[0] = True
        await asyncio.wait_for(probe.wait_done(), 30)
        return in_flight, grown, produced[0] == consumed[0]

    in_flight, grown, all_delivered = run(build)[0]
    bound = (3 * MAILBOX_HIGH + 4) * BATCH_SIZE   # three mailboxes on the way, and the batches being handled
    assert max(in_flight) <= bound, (in_flight, bound)
    assert grown < 30, grown                      # MiB, over 2 s; unbounded, this grew by hundreds
    assert all_delivered


def test_asend_waits_while_the_dataflow_is_behind(run):
    async def build(worker):
        inp = at.InputHandle()
        consumed = [0]

        async def slow(_time, records):
            await asyncio.sleep(0.01)
            consumed[0] += len(records)

        probe = worker.dataflow(lambda s: to_async(inp.to_stream(s), slow, max_in_flight=1).probe())
        most = 0
        for t in range(300):
            await inp.asend_batch(range(1000))
            most = max(most, 1000 * (t + 1) - consumed[0])
        inp.close()
        await probe.wait_done()
        return most, consumed[0]

    most, consumed = run(build)[0]
    assert consumed == 300 * 1000
    assert most <= BUFFERED + (2 * MAILBOX_HIGH + 4) * BATCH_SIZE, most
