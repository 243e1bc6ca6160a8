"""Spark reads what a dataflow publishes (``publish_to_spark`` and the ``aiotimely`` data source).

The first tests drive the Spark-side reader object directly (its methods are what
Spark calls: initialOffset, latestOffset, partitions, read, commit), with no JVM:
they are fast and exact about offsets, commits, memory and the end. The slow ones
run real PySpark in local mode (one session for the module). Every wait is
bounded: a hang fails the test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.connectors.spark import local_session  # noqa: E402
from aiotimely.connectors.spark_datasource import register  # noqa: E402
from aiotimely.connectors.spark_reader import publish_to_spark, stream_reader  # noqa: E402

SECRET = "reader-secret"
SCHEMA = StructType([StructField("key", StringType()), StructField("value", LongType()),
                     StructField("t", LongType())])
QUERY_TIMEOUT = 180
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
            # what the publisher holds, and its input's mailbox (64 batches) full: the source is not pulled
            assert stats["held"] >= max_pending and stalled <= stats["held"] + 64 * per_time, (stalled, stats)
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


def test_until_end_an_available_now_query_waits_for_news_and_ends_at_the_final_offset():
    async def main():
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        async with at.Worker() as worker:
            inp = at.InputHandle()
            probe = worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready).probe())
            address = await asyncio.wait_for(ready, 10)
            plain, until_end = reader(address), reader(address, untilEnd="true")
            start = await asyncio.to_thread(until_end.initialOffset)
            await asyncio.to_thread(plain.prepareForTriggerAvailableNow)
            await asyncio.to_thread(until_end.prepareForTriggerAvailableNow)
            asked = asyncio.ensure_future(asyncio.to_thread(until_end.latestOffset, start, None))
            await asyncio.sleep(0.3)
            assert not asked.done()                 # the start again would end the query: it waits for news
            inp.send(("a", 1))
            inp.advance_to(2)
            end = await asyncio.wait_for(asked, 10)
            assert end == {"time": 2}
            assert await asyncio.to_thread(plain.latestOffset, start, None) == start   # "now" was nothing
            assert await asyncio.to_thread(read_all, until_end, start, end) == [("a", 1, 0)]
            asked = asyncio.ensure_future(asyncio.to_thread(until_end.latestOffset, end, None))
            await asyncio.sleep(0.3)
            assert not asked.done()
            inp.close()
            final = await asyncio.wait_for(asked, 10)
            assert final == {"time": 2, "final": True}
            assert await asyncio.to_thread(until_end.latestOffset, final, None) == final
            await asyncio.wait_for(probe.wait_done(), 10)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_reader_with_another_secret_is_refused(caplog):
    async def main():
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        async with at.Worker() as worker:
            inp = at.InputHandle()
            worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready, end_timeout=5))
            address = await asyncio.wait_for(ready, 10)
            with pytest.raises(at.ClusterError, match="refused this reader.*same on both sides"):
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


def test_times_must_be_ints():
    def build(worker):
        def flow(scope):
            with scope.iterative(name="loop") as inner:      # times Product(outer, round)
                publish_to_spark(at.to_stream([("a", 1)], scope).enter(inner), secret=SECRET, name="Looped")

        worker.dataflow(flow)

    with pytest.raises(at.DataflowError, match="Looped") as caught:
        Running(build).join(30)
    assert "Spark's offsets are integer times" in str(caught.value.__cause__)


def test_a_publisher_is_refused_in_a_recoverable_dataflow(tmp_path):
    from aiotimely.recovery import Recovery

    def build(worker):
        worker.dataflow(lambda s: publish_to_spark(at.to_stream([1], s), secret=SECRET))

    with pytest.raises(at.RecoveryError, match="cannot be in a recoverable dataflow yet"):
        at.execute(build, loop="asyncio", recovery=Recovery(str(tmp_path / "state")))


# -- real Spark --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    session = local_session("local[2]", workdir=str(tmp_path_factory.mktemp("spark")), app="aiotimely-reader-tests")
    register(session, secret=SECRET)
    yield session
    session.stop()


class Running:
    """``at.execute(build, workers=...)`` in a thread of its own, as next to Spark; ``join`` bounds the wait."""

    def __init__(self, build, workers: int = 1) -> None:
        self.result: list[Any] | None = None
        self.failure: BaseException | None = None

        def main() -> None:
            try:
                self.result = at.execute(build, workers=workers, loop="asyncio")
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.failure = e

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> list[Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the dataflow did not complete within {timeout} s"
        if self.failure is not None:
            raise self.failure
        assert self.result is not None
        return self.result


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def read_stream(spark, address: str, schema: str, **options: str):
    source = spark.readStream.format("aiotimely").option("address", address).schema(schema)
    for key, value in options.items():
        source = source.option(key, value)
    return source.load()


def stop(query) -> None:
    try:
        query.stop()
    except Exception:  # noqa: BLE001 - stopping is best effort
        pass


@pytest.mark.slow
def test_spark_reads_every_row_once_and_never_part_of_a_time(spark, tmp_path):
    """Two workers publish; one holds time 4 open, once Spark has read up to it, while Spark polls. Spark's
    micro-batches hold whole times only: every time's records in one batch, and no batch processed before
    time 4 was complete holds any of it. Then the input ends, Spark reads the final offset, the dataflow
    completes (the query goes on, with nothing more to read)."""
    hold, per_worker, times, held_time = 2.0, 5, 8, 4
    ready: concurrent.futures.Future[str] = concurrent.futures.Future()
    stats: dict[str, Any] = {}
    spark_reading, spark_caught_up = threading.Event(), threading.Event()
    released: list[float] = []

    async def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready, statistics=stats,
                                                   end_timeout=QUERY_TIMEOUT))
        for t in range(times):
            if t == 2:                                  # Spark has read a batch: it is polling
                assert await asyncio.to_thread(spark_reading.wait, QUERY_TIMEOUT)
            inp.send_batch([(worker.index, t * 100 + i) for i in range(per_worker)])
            if t == held_time and worker.index == 1:  # time 4 stays open; part of it is published
                assert await asyncio.to_thread(spark_caught_up.wait, QUERY_TIMEOUT)
                await asyncio.sleep(hold)               # Spark has read all before 4, and polls on
                inp.send_batch([(1, t * 100 + 50 + i) for i in range(per_worker)])
                released.append(time.monotonic())
            inp.advance_to(t + 1)
            await asyncio.sleep(0.3)
        # the build returns: the inputs close, and the publisher reports its final offset

    batches: list[tuple[int, float, list[tuple]]] = []

    def collect(df, batch_id):
        rows = [tuple(r) for r in df.collect()]
        batches.append((batch_id, time.monotonic(), rows))
        spark_reading.set()
        if any(t == held_time - 1 for _, _, t in rows):
            spark_caught_up.set()

    run = Running(build, workers=2)
    address = ready.result(30)
    query = (read_stream(spark, address, "worker INT, seq INT, t LONG", timeColumn="t", numPartitions="2")
             .writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        run.join(QUERY_TIMEOUT)                          # completes once Spark has read the final offset
        assert stats["final_committed"] and stats["held"] == 0
        assert query.isActive and query.exception() is None
    finally:
        stop(query)
    rows = [row for _, _, rs in batches for row in rs]
    expected = [(w, t * 100 + i, t) for t in range(times) for w in (0, 1) for i in range(per_worker)]
    expected += [(1, held_time * 100 + 50 + i, held_time) for i in range(per_worker)]
    assert Counter(rows) == Counter(expected) and len(rows) == len(expected)    # every row exactly once
    batch_of: dict[int, set[int]] = {}
    for batch_id, _, rs in batches:
        for _, _, t in rs:
            batch_of.setdefault(t, set()).add(batch_id)
    assert all(len(ids) == 1 for ids in batch_of.values()), batch_of            # a time is never split
    (release,) = released
    before = [rs for _, at_, rs in batches if at_ < release]
    assert len(before) >= 2
    assert any(t == held_time - 1 for rs in before for _, _, t in rs)           # Spark read while 4 was open
    assert all(t < held_time for rs in before for _, _, t in rs)                 # and never any of time 4
    print(f"{len(batches)} micro-batches; times per batch:", [sorted({r[2] for r in rs}) for _, _, rs in batches])


@pytest.mark.slow
def test_windows_to_parquet_with_available_now_and_the_dataflow_completes(spark, tmp_path):
    """A windowed count published; a query with trigger(availableNow=True) into Parquet, run twice from one
    checkpoint: mid-stream it reads the windows complete when it starts, and ends; after the input is done it
    reads the rest and the final offset, and ends; then the dataflow completes. Each window exactly once."""
    pages = ["home", "cart", "shop"]
    events = [(pages[i % 3], i * 7 % 100) for i in range(300)]    # (page, ms): ten windows of 10 ms
    counts = Counter((page, ms // 10 * 10) for page, ms in events)
    expected = sorted((page, start, start + 9, n) for (page, start), n in counts.items())
    ready: concurrent.futures.Future[str] = concurrent.futures.Future()
    stats: dict[str, Any] = {}
    second_half = threading.Event()

    async def build(worker):
        inp = at.InputHandle()

        def flow(s):
            counts = inp.to_stream(s).window(at.Tumbling(10), at.Agg.count(), key=lambda e: e[0])
            rows = counts.map(lambda c: {"page": c[0], "first_ms": c[1][0], "last_ms": c[1][1] - 1, "n": c[2]})
            return publish_to_spark(rows, secret=SECRET, ready=ready, statistics=stats, end_timeout=QUERY_TIMEOUT)

        worker.dataflow(flow)
        for ms in range(100):
            if ms == 50:
                assert await asyncio.to_thread(second_half.wait, QUERY_TIMEOUT)
            inp.send_batch([e for e in events if e[1] == ms])
            inp.advance_to(ms + 1)

    def query():
        return (read_stream(spark, address, "page STRING, first_ms LONG, last_ms LONG, n LONG").writeStream
                .format("parquet").option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())

    run = Running(build)
    address = ready.result(30)
    wait_for(lambda: stats["complete"] >= 41, 30, "the first windows complete")
    first = query()
    try:
        assert first.awaitTermination(QUERY_TIMEOUT), "the first availableNow query did not end"
        assert first.exception() is None
    finally:
        stop(first)
    early = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert early and not stats["final"]
    firsts = sorted({r[1] for r in early})
    assert firsts == list(range(0, firsts[-1] + 1, 10))            # a prefix of the windows ...
    assert early == [row for row in expected if row[1] <= firsts[-1]]   # ... each whole, once

    second_half.set()
    wait_for(lambda: stats["final"], 30, "the input to end")
    assert run.thread.is_alive()                                    # the dataflow waits for Spark to read it all
    second = query()
    try:
        assert second.awaitTermination(QUERY_TIMEOUT), "the second availableNow query did not end"
        assert second.exception() is None
    finally:
        stop(second)
    run.join(30)                                                    # Spark committed everything: it completes
    assert sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).collect()) == expected
    assert stats["held"] == 0 and stats["final_committed"]


@pytest.mark.slow
def test_spark_behind_holds_the_producer_back_within_the_bound(spark, tmp_path):
    """20,000 records, produced as fast as the dataflow takes them; the publisher may hold 1,000. Before Spark
    reads, the producer is held back; then Spark (availableNow, untilEnd) reads everything, each record once,
    and the publisher never holds more than the bound."""
    max_pending, per_time, times = 1000, 100, 200
    ready: concurrent.futures.Future[str] = concurrent.futures.Future()
    stats: dict[str, Any] = {}
    sent = [0]

    async def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready, statistics=stats,
                                                   max_pending=max_pending, end_timeout=QUERY_TIMEOUT))
        for t in range(times):
            await inp.asend_batch([(t * per_time + i,) for i in range(per_time)])   # waits when the handle is full
            inp.advance_to(t + 1)
            sent[0] = t + 1

    run = Running(build)
    address = ready.result(30)
    wait_for(lambda: stats["waits"] > 0, 30, "the publisher to wait for Spark")
    time.sleep(1.0)
    held_back = sent[0]
    assert held_back < times and stats["held"] <= max_pending   # the producer waits: nothing reads yet
    query = (read_stream(spark, address, "seq INT, t LONG", timeColumn="t", numPartitions="2", untilEnd="true")
             .writeStream.format("memory").queryName("bounded")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the query did not end"
        assert query.exception() is None
    finally:
        stop(query)
    run.join(30)
    rows = [tuple(r) for r in spark.sql("SELECT * FROM bounded").collect()]
    assert Counter(rows) == Counter((t * per_time + i, t) for t in range(times) for i in range(per_time))
    assert stats["peak_held"] <= max_pending + per_time, stats
    assert stats["waits"] > 1 and stats["held"] == 0
    print(f"the producer was held back at time {held_back} of {times}; {len(query.recentProgress)} micro-batches; "
          f"the publisher stopped {stats['waits']} times for Spark")


@pytest.mark.slow
def test_a_query_that_failed_mid_batch_is_restarted_from_its_checkpoint_and_loses_nothing(spark, tmp_path):
    """A batch whose sink failed was not committed: the publisher still holds its times, and the query
    restarted from its checkpoint reads that batch again (same batch id, same records), then the rest."""
    from pyspark.errors import StreamingQueryException

    ready: concurrent.futures.Future[str] = concurrent.futures.Future()
    stats: dict[str, Any] = {}
    finish = threading.Event()

    async def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready, statistics=stats,
                                                   end_timeout=QUERY_TIMEOUT))
        for t in range(6):
            inp.send_batch([(t * 10 + i,) for i in range(3)])
            inp.advance_to(t + 1)
            await asyncio.sleep(0.2)
        assert await asyncio.to_thread(finish.wait, QUERY_TIMEOUT)

    committed: dict[int, list[tuple]] = {}      # what the sink kept, by batch id (a replay overwrites)
    failed: list[tuple[int, list[tuple]]] = []

    def failing(df, batch_id):
        rows = [tuple(r) for r in df.collect()]
        if any(t >= 3 for _, t in rows):
            failed.append((batch_id, rows))
            raise RuntimeError("the sink failed")
        committed[batch_id] = rows

    def working(df, batch_id):
        committed[batch_id] = [tuple(r) for r in df.collect()]

    def start(sink):
        return (read_stream(spark, address, "seq INT, t LONG", timeColumn="t").writeStream.foreachBatch(sink)
                .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds")
                .start())

    run = Running(build)
    address = ready.result(30)
    first = start(failing)
    try:
        with pytest.raises(StreamingQueryException, match="the sink failed"):
            first.awaitTermination(QUERY_TIMEOUT)
    finally:
        stop(first)
    ((failed_batch, failed_rows),) = failed
    assert stats["committed"] <= min(t for _, t in failed_rows)   # the failed batch's times are still held
    second = start(working)
    try:
        wait_for(lambda: failed_batch in committed, QUERY_TIMEOUT, "the failed batch to be read again")
        finish.set()                                # the input ends: the query reads the final offset
        run.join(QUERY_TIMEOUT)
    finally:
        stop(second)
    rows = [row for rs in committed.values() for row in rs]
    assert sorted(rows) == [(t * 10 + i, t) for t in range(6) for i in range(3)]   # each once, none lost
    assert sorted(committed[failed_batch]) == sorted(failed_rows)  # the batch again, as it was
    assert stats["final_committed"] and stats["held"] == 0


@pytest.mark.slow
def test_a_spark_query_with_another_secret_fails_and_the_publisher_goes_on(spark, tmp_path):
    from pyspark.errors import StreamingQueryException

    ready: concurrent.futures.Future[str] = concurrent.futures.Future()
    stats: dict[str, Any] = {}

    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: publish_to_spark(inp.to_stream(s), secret=SECRET, ready=ready, statistics=stats,
                                                   end_timeout=QUERY_TIMEOUT))
        inp.send_batch([("a", 1), ("b", 2)])

    run = Running(build)
    address = ready.result(30)
    schema = "key STRING, value LONG"
    bad = (read_stream(spark, address, schema, secret="not-the-secret", connectTimeout="2").writeStream
           .format("memory").queryName("refused").trigger(availableNow=True).start())
    try:
        with pytest.raises(StreamingQueryException, match="refused this reader"):
            bad.awaitTermination(QUERY_TIMEOUT)
    finally:
        stop(bad)
    good = (read_stream(spark, address, schema).writeStream.format("memory").queryName("read")
            .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    try:
        assert good.awaitTermination(QUERY_TIMEOUT)
    finally:
        stop(good)
    run.join(30)
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM read").collect()) == [("a", 1), ("b", 2)]


@pytest.mark.slow
def test_the_docs_snippet_runs(spark, monkeypatch):
    """docs/spark_reader.md's snippet, as written; its session is this module's (getOrCreate), kept running."""
    snippets = re.findall(r"```python spark\n(.*?)```", (ROOT / "docs" / "spark_reader.md").read_text(), flags=re.S)
    assert snippets
    monkeypatch.setattr(type(spark), "stop", lambda self: None)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for i, snippet in enumerate(snippets):
                exec(compile(snippet, f"spark_reader.md snippet {i + 1}", "exec"), {})
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        thread.join(QUERY_TIMEOUT)
        assert not thread.is_alive(), f"the snippet did not finish within {QUERY_TIMEOUT} s"
        if failure:
            raise failure[0]
    finally:
        register(spark, secret=SECRET)                  # the snippet registered its own secret
