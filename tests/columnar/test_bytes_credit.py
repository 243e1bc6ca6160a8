"""Credits between processes count bytes too: a fast columnar producer and a slow consumer in another process,
with batches of 4 MiB, keep the consumer's memory near the byte window (32 MiB), not the batch window's 64
batches (256 MiB). Real processes, as tests/cluster/test_backpressure.py does for list batches."""

from __future__ import annotations

import asyncio
import os

import pytest

pl = pytest.importorskip("polars")

import aiotimely as at  # noqa: E402
from aiotimely.comm.backpressure import BackPressure  # noqa: E402
from aiotimely.testing.processes import run_processes  # noqa: E402

BATCH_ROWS = 1 << 19          # Int64: 4 MiB a batch
BATCHES = 100                 # 400 MiB in all


def rss_mib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field)) // 1024


def flood(scope):
    """Worker 0 makes 4 MiB batches as fast as there is room for them; each goes to worker 1 (key 1 routes
    there), whose sink takes 20 ms a batch without blocking its process. The sink says how much its process's
    peak memory grew while it ran."""
    base = rss_mib("VmRSS:")

    def batches():
        for i in range(BATCHES):
            yield pl.DataFrame({"k": pl.repeat(1, BATCH_ROWS, dtype=pl.Int64, eager=True),
                                "x": pl.int_range(i, i + BATCH_ROWS, eager=True)})

    mine = batches() if scope.worker.index == 0 else []
    exchanged = at.from_arrow(scope, mine, schema={"k": pl.Int64, "x": pl.Int64}).exchange("k")

    @exchanged.stream.unary(name="Slow", interest=at.FrontierInterest.ALWAYS)
    async def slow(input, output, cap):
        rows = 0
        async for _ in input.activations():
            for _time, batch in input.drain():
                rows += len(batch)
                await asyncio.sleep(0.02)
            if not input.frontier:
                break
        output.session(cap).give((scope.worker.index, rows, rss_mib("VmHWM:") - base))
        cap.drop()

    return slow


def test_a_columnar_flood_to_a_slow_consumer_holds_about_the_byte_window():
    if not os.path.exists("/proc/self/status"):
        pytest.skip("reads peak memory from /proc")
    assert BackPressure().window_bytes == 32 << 20
    outputs = run_processes(flood, processes=2, timeout=180)
    got = {w: (rows, grew) for w, rows, grew in outputs.records()}
    assert got[1][0] == BATCHES * BATCH_ROWS and got[0][0] == 0
    # the consumer holds what the byte window lets in flight (32 MiB of frames, and each decoded), plus the
    # batch it works on: well under the 64 batches (256 MiB) that the batch window alone would let in
    assert got[1][1] < 160, got
    assert got[0][1] < 160, got          # the producer waits for credit too
