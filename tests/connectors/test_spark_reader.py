"""Spark reads what a dataflow publishes (``publish_to_spark`` and the ``aiotimely_reader`` data source).

The first tests drive the Spark-side reader object directly (its methods are what
Spark calls: initialOffset, latestOffset, partitions, read, commit), with no JVM:
they are fast and exact about offsets, commits, memory and the end. The slow ones
run real PySpark in local mode (one session for the module). Every wait is
bounded: a hang fails the test.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.connectors.spark_reader import publish_to_spark, stream_reader  # noqa: E402

SECRET = "reader-secret"
SCHEMA = StructType([StructField("key", StringType()), StructField("value", LongType()),
                     StructField("t", LongType())])
ROOT = Path(__file__).resolve().parents[2]


def reader(address: str, secret: str = SECRET, **options: str) -> Any:
    return stream_reader({"address": address, "timeColumn": "t", "connectTimeout": "5", **options}, SCHEMA,
                         secret=secret)


async def until(condition, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        await asyncio.sleep(0.01)


def read_all(r: Any, start: dict, end: dict) -> list[tuple]:
    return [row for p in r.partitions(start, end) for row in r.read(p)]


# -- the reader driven by hand: no JVM --------------------------------------------------------------


def test_offsets_follow_the_frontier_and_a_read_holds_only_complete_times():
    async def main():
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        stats: dict[str, Any] = {}
        async with at.Worker() as worker:
            inp = at.InputHandle()
            probe = worker.dataflow(lambda s: publish_to_spark(
                inp.to_stream(s), secret=SECRET, ready=ready, statistics=stats).probe())
            r = reader(await asyncio.wait_for(ready, 10), numPartitions="2")
            start = await asyncio.to_thread(r.initialOffset)
            assert start == {"time": 0}

            inp.send_batch([("a", 1), ("b", 2)])                    # time 0
            inp.advance_to(1)
            inp.send(("a", 3))                                      # time 1, still open
            await until(lambda: stats["complete"] == 1, what="time 0 complete")
            end = await asyncio.to_thread(r.latestOffset, start, None)
            assert end == {"time": 1}                               # the frontier: time 1 may still grow
            assert sorted(await asyncio.to_thread(read_all, r, start, end)) == [("a", 1, 0), ("b", 2, 0)]
            with pytest.raises(at.ClusterError, match="only the times before 1 are complete"):
                await asyncio.to_thread(read_all, r, start, {"time": 2})

            inp.send(("c", 4))                                      # time 1 again
            inp.advance_to(5)
            await until(lambda: stats["complete"] == 5)
            assert stats["held"] == 4
            second = await asyncio.to_thread(r.latestOffset, end, None)   # Spark committed `end`: time 0 goes
            assert second == {"time": 5} and stats["held"] == 2 and stats["committed"] == 1
            await until(lambda: not probe.less_than(1))             # the probe: what Spark has committed
            assert probe.less_than(2)
            assert sorted(await asyncio.to_thread(read_all, r, end, second)) == [("a", 3, 1), ("c", 4, 1)]
            with pytest.raises(at.ClusterError, match="no longer holds the times before 1"):
                await asyncio.to_thread(read_all, r, start, end)
            await asyncio.to_thread(r.commit, second)
            assert stats["held"] == 0 and stats["committed"] == 5

            inp.send(("d", 5))
            inp.close()                                             # the end: a final offset
            await until(lambda: stats["final"])
            final = await asyncio.to_thread(r.latestOffset, second, None)
            assert final == {"time": 6, "final": True}
            assert await asyncio.to_thread(read_all, r, second, final) == [("d", 5, 5)]
            assert not stats["final_committed"]
            assert await asyncio.to_thread(r.latestOffset, final, None) == final   # nothing after the end ...
            assert stats["final_committed"]                         # ... and Spark has it all: the sink completes
            await asyncio.wait_for(probe.wait_done(), 10)
            await asyncio.to_thread(r.stop)
        assert stats["held"] == 0 and stats["rows_served"] == 5  # each record served once
        # once the publisher is gone, the end is still the end
        assert await asyncio.to_thread(r.latestOffset, final, None) == final

    asyncio.run(asyncio.wait_for(main(), 60))


def test_commit_frees_memory_and_the_bound_holds_the_producers_back():
    max_pending, per_time, times = 100, 20, 400

    async def main():
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        stats: dict[str, Any] = {}
        passed = [0]                                                 # records that got past the source
        async with at.Worker() as worker:
            inp = at.InputHandle()
            probe = worker.dataflow(lambda s: publish_to_spark(
                inp.to_stream(s).inspect_batch(lambda t, b: passed.__setitem__(0, passed[0] + len(b))),
                secret=SECRET, ready=ready, statistics=stats, max_pending=max_pending).probe())
            r = reader(await asyncio.wait_for(ready, 10))
            offset = await asyncio.to_thread(r.initialOffset)

            # one open time bigger than the bound: nothing is complete, so waiting could free nothing
            inp.send_batch([("open", i) for i in range(3 * max_pending)])
            await until(lambda: stats["held"] == 3 * max_pending, what="an open time taken whole")
            inp.advance_to(1)
            for t in range(1, times + 1):
                inp.send_batch([("k", t * per_time + i) for i in range(per_time)])
                inp.advance_to(t + 1)
            await until(lambda: stats["waits"] > 0, what="the sink to stop for Spark")
            await asyncio.sleep(0.3)
            stalled = passed[0]
            assert stats["held"] >= max_pending and stalled < 3 * max_pending + times * per_time / 2, stats
            await asyncio.sleep(0.3)
            assert passed[0] == stalled                              # nothing moves until Spark commits

            rows: list[tuple] = []
            held_after_commits = []
            while True:                                             # Spark: commit the last batch, read the next
                end = await asyncio.to_thread(r.latestOffset, offset, None)
                if rows:
                    held_after_commits.append(stats["held"])
                rows += await asyncio.to_thread(read_all, r, offset, end)
                if end["time"] == times + 1 and offset == end:
                    break
                offset = end
                await asyncio.sleep(0.01)
            await until(lambda: not probe.less_than(times + 1))    # Spark committed it all; the end is to come
            assert not probe.done()
            assert stats["held"] == 0 and stats["committed"] == times + 1  # every commit freed its times
            inp.close()
            final = await asyncio.to_thread(r.latestOffset, offset, None)
            assert final == {"time": times + 1, "final": True}
            assert await asyncio.to_thread(read_all, r, offset, final) == []
            await asyncio.to_thread(r.latestOffset, final, None)
            await asyncio.wait_for(probe.wait_done(), 10)
        # the bound: max_pending, plus one batch, plus the records of times still open (the first, here)
        assert stats["peak_held"] <= 3 * max_pending + per_time, stats
        assert max(held_after_commits) <= max_pending + per_time, (held_after_commits, stats)
        assert Counter(v for _, v, _ in rows) == Counter(
            list(range(3 * max_pending)) + [t * per_time + i for t in range(1, times + 1) for i in range(per_time)])
        assert all(t == 0 for k, _, t in rows if k == "open")

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_reader_with_another_secret_is_refused(caplog):
    async def main():
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        async with at.Worker() as worker:
            inp = at.InputHandle()
            worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready, end_timeout=5))
            address = await asyncio.wait_for(ready, 10)
            with pytest.raises(at.ClusterError, match="refused this reader.*secrets"):
                await asyncio.to_thread(reader(address, secret="not-the-secret").initialOffset)
            good = reader(address)                                   # the publisher goes on, for the right one
            start = await asyncio.to_thread(good.initialOffset)
            inp.send(("a", 1))
            inp.close()
            for _ in range(100):
                end = await asyncio.to_thread(good.latestOffset, start, None)
                if end.get("final"):
                    break
                await asyncio.sleep(0.05)
            assert await asyncio.to_thread(read_all, good, start, end) == [("a", 1, 0)]
            await asyncio.to_thread(good.latestOffset, end, None)

    with caplog.at_level(logging.WARNING, logger="aiotimely.connectors.spark_reader"):
        asyncio.run(asyncio.wait_for(main(), 60))
    assert any("refused a connection" in r.getMessage() for r in caplog.records), caplog.text


def test_the_end_waits_for_spark_then_fails_clearly_instead_of_hanging():
    async def main():
        async with at.Worker() as worker:
            inp = at.InputHandle()
            worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, end_timeout=0.5,
                                                       name="Published"))
            inp.send_batch([("a", 1), ("b", 2)])
            inp.advance_to(3)
            inp.send(("c", 3))
            # leaving the block closes the input: nobody reads, so the end times out

    began = time.monotonic()
    with pytest.raises(at.DataflowError, match="Published") as caught:
        asyncio.run(asyncio.wait_for(main(), 30))
    assert time.monotonic() - began < 10
    message = str(caught.value.__cause__)
    assert "Spark has not read and committed all of it" in message
    assert "3 records at times 0..3" in message and "'final': True" in message, message
