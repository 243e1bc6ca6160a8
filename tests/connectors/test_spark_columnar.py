"""Spark both ways in columns: ``ArrowIngress.columnar`` (event time from a column, a watermark), columnar windows,
``publish_to_spark`` of a columnar stream read back by Spark as Arrow.

The first tests speak the data source's wire by hand (no JVM): exact about the watermark, late rows, aborted and
replayed batches. The slow ones run real PySpark in local mode, with the session fixture of
``test_spark_datasource`` (one session for this module).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")

import aiotimely as at  # noqa: E402
from aiotimely.connectors import spark_datasource  # noqa: E402
from aiotimely.connectors.spark_datasource import ArrowIngress, end_stream  # noqa: E402
from aiotimely.connectors.spark_reader import publish_to_spark, stream_reader  # noqa: E402

from . import test_spark_datasource as datasource_tests  # noqa: E402

spark = datasource_tests.spark                  # the session fixture of the data source's tests, shared
_failing_data_source, finish = datasource_tests._failing_data_source, datasource_tests.finish

SECRET = "datasource-secret"        # the secret the shared session's data source was registered with
QUERY_TIMEOUT = 180


class Windows:
    """An aiotimely computation in a thread: ``ArrowIngress.columnar(time="ts", lateness=...)`` -> a tumbling
    window of 10 per page (count, sum of id) -> (``publish``) ``publish_to_spark``; ``results`` gets
    ``(monotonic time, dataflow time, rows)`` as window batches pass, ``late`` the late rows' ids."""

    def __init__(self, *, lateness: int = 0, late: str = "stream", publish: bool = False,
                 window_lateness: int = 0, time_column: str | None = "ts") -> None:
        self.ingress = ArrowIngress("127.0.0.1:0", secret=SECRET)
        self.results: list[tuple[float, int, list[tuple[Any, ...]]]] = []
        self.late: list[tuple[int, Any]] = []
        self.failure: list[BaseException] = []
        self.stats: dict[str, Any] = {}
        self.published: Any = None
        ready: Any = None
        if publish:
            import concurrent.futures

            ready = self.published = concurrent.futures.Future()

        def dataflow(scope: Any) -> None:
            columns = self.ingress.columnar(scope, time=time_column, lateness=lateness)
            results, late_rows = columns.window(at.Tumbling(10), pl.len().alias("n"), pl.col("id").sum().alias("ids"),
                                                key="page", time="ts", lateness=window_lateness, late=late)
            results = results.inspect_batch(lambda t, f: self.results.append((time.monotonic(), t, f.rows())))
            late_rows.inspect_batch(lambda t, f: self.late.extend((t, r) for r in f.rows()))
            if publish:
                publish_to_spark(results, secret=SECRET, ready=ready, statistics=self.stats, end_timeout=60)

        def main() -> None:
            try:
                at.execute(lambda w: w.dataflow(dataflow), workers=2, loop="asyncio")
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.failure.append(e)

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        self.address = self.ingress.wait_listening(10)

    def windows(self) -> dict[tuple[str, int], tuple[int, int]]:
        """``(page, window_start) -> (count, sum of ids)``, each window once."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for _, _, rows in self.results:
            for page, start, _end, n, ids in rows:
                assert (page, start) not in out, f"window {(page, start)} came twice"
                out[(page, start)] = (n, ids)
        return out

    def wait_windows(self, count: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while len(self.windows()) < count:
            assert not self.failure, self.failure
            assert time.monotonic() < deadline, f"{len(self.windows())} windows came, not {count}: {self.results}"
            time.sleep(0.02)

    def end(self, timeout: float = 60) -> None:
        self.ingress.close()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the dataflow did not complete after close()"
        assert not self.failure, self.failure


@pytest.fixture
def running() -> Any:
    runs: list[Windows] = []

    def start(**options: Any) -> Windows:
        run = Windows(**options)
        runs.append(run)
        return run

    yield start
    for run in runs:  # whatever happened, no dataflow thread outlives its test
        run.ingress.close()
        run.thread.join(10)


def _stage(address: str, batch: int, partition: int, token: str, rows: list[tuple[int, str, int]]) -> None:
    """A write task's attempt, by hand: ``rows`` of ``(id, page, ts)`` as one Arrow record batch."""
    client = spark_datasource._Client(address, SECRET, 10)
    try:
        client.send("stage", batch, partition, token, 0, 0)
        ids, pages, ts = zip(*rows, strict=True) if rows else ((), (), ())
        record_batch = pa.record_batch({"id": pa.array(ids, pa.int32()), "page": pa.array(pages, pa.string()),
                                        "ts": pa.array(ts, pa.int64())})
        client.send_arrow(spark_datasource.SCHEMA, record_batch.schema.serialize())
        client.send_arrow(spark_datasource.BATCH, record_batch.serialize())
        assert client.ask("staged", len(rows)) == ["ok", len(rows)]
    finally:
        client.close()


def _tell(address: str, *message: Any) -> Any:
    client = spark_datasource._Client(address, SECRET, 10)
    try:
        return client.request(*message)
    finally:
        client.close()


def _commit(address: str, batch: int, *attempts: tuple[int, str, int]) -> None:
    assert _tell(address, "commit", batch, [list(a) for a in attempts]) == ["ok"]


# -- by hand: the watermark, late rows, exactly once --------------------------------------------------------


def test_windows_close_as_the_watermark_passes_them_while_the_stream_goes_on(running: Any) -> None:
    run = running(lateness=5)
    a = run.address
    _stage(a, 0, 0, "a", [(1, "home", 1), (2, "cart", 2)])
    _stage(a, 0, 1, "b", [(3, "home", 12)])
    _commit(a, 0, (0, "a", 2), (1, "b", 1))                # latest 12: the watermark is 12 - 5 = 7
    time.sleep(0.3)
    assert run.windows() == {}                             # [0, 10) is not complete at 7
    _stage(a, 1, 0, "c", [(4, "home", 3), (5, "cart", 16)])  # ts 3 at watermark 7: its window is open, not late
    _commit(a, 1, (0, "c", 2))                             # latest 16: the watermark 11 passes [0, 10)
    run.wait_windows(2)
    assert run.windows() == {("home", 0): (2, 5), ("cart", 0): (1, 2)}
    assert run.thread.is_alive() and run.late == []        # closed while the stream is open
    _stage(a, 2, 0, "d", [(6, "home", 8), (7, "cart", 29)])  # ts 8 at watermark 11: [0, 10) is complete: late
    _commit(a, 2, (0, "d", 2))                             # watermark 24: [10, 20) closes
    run.wait_windows(4)
    assert run.windows() == {("home", 0): (2, 5), ("cart", 0): (1, 2), ("home", 10): (1, 3), ("cart", 10): (1, 5)}
    assert [(t, r[0]) for t, r in run.late] == [(11, 6)]   # the late row, at the watermark it came at
    run.end()                                              # the end completes everything: [20, 30)
    assert run.windows()[("cart", 20)] == (1, 7)
    # each window came at its end (window lateness 0), once the watermark had reached it
    assert sorted({t for _, t, _ in run.results}) == [10, 20, 30]
    assert run.ingress.statistics["epochs_committed"] == 3


def test_late_rows_counted_and_the_window_lateness_adds_to_the_watermarks(running: Any) -> None:
    run = running(lateness=0, late="count", window_lateness=3)
    a = run.address
    _stage(a, 0, 0, "a", [(1, "home", 5), (2, "home", 11)])
    _commit(a, 0, (0, "a", 2))                             # watermark 11: [0, 10) waits for 10 + 3
    time.sleep(0.3)
    assert run.windows() == {}
    _stage(a, 1, 0, "b", [(3, "home", 9), (4, "home", 13)])  # 9 at 11: not late with window lateness 3
    _commit(a, 1, (0, "b", 2))
    run.wait_windows(1)
    assert run.windows() == {("home", 0): (2, 4)}
    _stage(a, 2, 0, "c", [(5, "home", 2), (6, "home", 1), (7, "home", 14)])  # at 13: [0, 10) is done: 2 late
    _commit(a, 2, (0, "c", 3))
    run.end()
    assert run.windows() == {("home", 0): (2, 4), ("home", 10): (3, 13)}
    assert sum(n for _, (n,) in run.late) == 2


def test_an_aborted_or_replayed_batch_does_not_move_the_watermark(running: Any) -> None:
    run = running(lateness=0)
    a = run.address
    _stage(a, 0, 0, "a", [(1, "home", 1)])
    _commit(a, 0, (0, "a", 1))
    _stage(a, 1, 0, "lost", [(2, "home", 500)])            # staged, then Spark aborts the batch
    assert _tell(a, "abort", 1) == ["ok"]
    _stage(a, 1, 0, "retry", [(2, "home", 4)])
    _commit(a, 1, (0, "retry", 1))
    assert _tell(a, "commit", 1, [[0, "retry", 1]]) == ["ok", "replay"]   # a restarted query's replay
    _stage(a, 1, 0, "again", [(2, "home", 700)])           # and its write of batch 1 again: ignored
    time.sleep(0.3)
    assert run.windows() == {}                             # 500 and 700 never counted: [0, 10) still open
    _stage(a, 2, 0, "b", [(3, "home", 10)])
    _commit(a, 2, (0, "b", 1))
    run.wait_windows(1)
    assert run.windows() == {("home", 0): (2, 3)}
    run.end()
    assert run.windows() == {("home", 0): (2, 3), ("home", 10): (1, 3)}
    assert run.ingress.statistics["replays_ignored"] == 2 and run.ingress.statistics["epochs_aborted"] == 1


def test_without_a_time_column_a_batch_goes_at_its_batch_id() -> None:
    ingress = ArrowIngress("127.0.0.1:0", secret=SECRET)
    seen: list[tuple[int, Any]] = []

    def build(worker: Any) -> None:
        worker.dataflow(lambda s: ingress.columnar(s, schema={"id": pl.Int32, "page": pl.String, "ts": pl.Int64})
                        .stream.inspect_batch(lambda t, b: seen.append((t, b))))

    thread = threading.Thread(target=lambda: at.execute(build, loop="asyncio"), daemon=True)
    thread.start()
    a = ingress.wait_listening(10)
    _stage(a, 0, 0, "a", [(1, "home", 100)])
    _stage(a, 0, 1, "b", [(2, "cart", 5)])
    _commit(a, 0, (0, "a", 1), (1, "b", 1))
    _stage(a, 1, 0, "c", [(3, "home", 1)])
    _commit(a, 1, (0, "c", 1))
    end_stream(a, SECRET)
    thread.join(10)
    assert not thread.is_alive()
    assert all(type(b).__name__ == "ArrowBatch" for _, b in seen)
    assert [(t, list(b)) for t, b in seen] == [(0, [(1, "home", 100), (2, "cart", 5)]), (1, [(3, "home", 1)])]


def test_a_time_column_that_is_missing_or_not_integers_is_refused() -> None:
    with pytest.raises(TypeError, match="not an integer type"):
        at.execute(lambda w: w.dataflow(lambda s: ArrowIngress(secret=SECRET).columnar(
            s, time="ts", schema={"ts": pl.Float64})))
    with pytest.raises(TypeError, match="no event-time column 'when'"):
        at.execute(lambda w: w.dataflow(lambda s: ArrowIngress(secret=SECRET).columnar(
            s, time="when", schema={"ts": pl.Int64})))
    with pytest.raises(ValueError, match="lateness is for event time"):
        at.execute(lambda w: w.dataflow(lambda s: ArrowIngress(secret=SECRET).columnar(s, lateness=3)))


def test_a_columnar_publisher_serves_arrow_record_batches_of_the_querys_schema() -> None:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    schema = StructType([StructField("page", StringType()), StructField("n", LongType()),
                         StructField("t", LongType()), StructField("ids", IntegerType())])
    frames = [pl.DataFrame({"page": ["home", "cart"], "n": pl.Series([2, 1], dtype=pl.UInt32),
                            "ids": [5, 2]}),
              pl.DataFrame({"page": ["home"], "n": pl.Series([7], dtype=pl.UInt32), "ids": [9]})]
    ready: Any = None
    stats: dict[str, Any] = {}
    got: list[Any] = []

    async def main() -> None:
        nonlocal ready
        import asyncio

        ready = asyncio.get_running_loop().create_future()
        async with at.Worker() as worker:
            mine = [frames[0], frames[1]]
            probe = worker.dataflow(lambda s: publish_to_spark(at.from_arrow(s, mine, times=[3, 8]), secret=SECRET,
                                                               ready=ready, statistics=stats).probe())
            reader = stream_reader({"address": await ready, "timeColumn": "t", "numPartitions": "2"}, schema,
                                   secret=SECRET)
            start = await asyncio.to_thread(reader.initialOffset)
            end = await asyncio.to_thread(reader.latestOffset, start, None)
            while not end.get("final"):
                await asyncio.sleep(0.02)
                end = await asyncio.to_thread(reader.latestOffset, start, None)
            for partition in reader.partitions(start, end):
                got.extend(await asyncio.to_thread(lambda p=partition: list(reader.read(p))))
            await asyncio.to_thread(reader.latestOffset, end, None)     # Spark committed the end
            await asyncio.wait_for(probe.wait_done(), 10)

    import asyncio

    asyncio.run(asyncio.wait_for(main(), 30))
    from pyspark.sql.pandas.types import to_arrow_schema

    assert all(isinstance(b, pa.RecordBatch) and b.schema.equals(to_arrow_schema(schema, timezone="UTC"))
               for b in got)
    rows = sorted(tuple(r.values()) for b in got for r in b.to_pylist())
    assert rows == [("cart", 1, 3, 2), ("home", 2, 3, 5), ("home", 7, 8, 9)]
    assert stats["rows_served"] == 3 and stats["final_committed"]


# -- with Spark ----------------------------------------------------------------------------------------------

EVENTS = "id INT, page STRING, ts LONG"


def write_file(directory: Path, f: int, rows: list[tuple[int, str, int]]) -> None:
    """One JSON file (Spark's file source takes files in order of their modification time)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"events-{f:03d}.json"
    tmp = directory / f".events-{f:03d}.tmp"
    with open(tmp, "w") as out:
        for i, page, ts in rows:
            out.write(json.dumps({"id": i, "page": page, "ts": ts}) + "\n")
    os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))
    tmp.rename(path)


def file_rows(f: int, per_file: int = 20) -> list[tuple[int, str, int]]:
    """File ``f``'s rows: event times in [10 f, 10 f + 10), pages in turn."""
    return [(f * per_file + i, ["home", "cart"][i % 2], f * 10 + i % 10) for i in range(per_file)]


def expected(files: list[list[tuple[int, str, int]]], late: tuple[int, ...] = ()) -> dict[tuple[str, int],
                                                                                           tuple[int, int]]:
    """The windows of the rows of ``files`` but the ``late`` ids: ``(page, start) -> (count, sum of ids)``."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for rows in files:
        for i, page, ts in rows:
            if i in late:
                continue
            n, ids = out.get((page, ts // 10 * 10), (0, 0))
            out[(page, ts // 10 * 10)] = (n + 1, ids + i)
    return out


def start_writer(spark: Any, source: Path, checkpoint: Path, address: str, fmt: str = "aiotimely",
                 available_now: bool = False) -> Any:
    source.mkdir(parents=True, exist_ok=True)
    events = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).json(str(source)).repartition(2)
    writer = (events.writeStream.format(fmt).option("address", address)
              .option("checkpointLocation", str(checkpoint)))
    return (writer.trigger(availableNow=True) if available_now else writer).start()


@pytest.mark.slow
def test_spark_to_columnar_windows_to_spark_closes_windows_batch_by_batch(spark: Any, running: Any,
                                                                          tmp_path: Path) -> None:
    run = running(lateness=5, publish=True)
    address = run.published.result(10)
    got: list[tuple[float, list[Any]]] = []
    lock = threading.Lock()

    def collect(df: Any, batch_id: int) -> None:
        rows = [tuple(r) for r in df.collect()]
        with lock:
            got.append((time.monotonic(), rows))

    def read_back() -> dict[tuple[str, int], tuple[int, int]]:
        with lock:
            return {(page, start): (n, ids) for _, rows in got for page, start, _end, n, ids, _t in rows}

    reading = (spark.readStream.format("aiotimely").option("address", address).option("timeColumn", "t")
               .schema("page STRING, window_start LONG, window_end LONG, n LONG, ids LONG, t LONG").load()
               .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ck-read")).start())
    writing = start_writer(spark, tmp_path / "in", tmp_path / "ck-write", run.address)
    files: list[list[tuple[int, str, int]]] = []
    try:
        for f in range(4):
            rows = file_rows(f)
            if f == 3:
                rows += [(900, "home", 4), (901, "cart", 27)]  # 4: [0, 10) closed at watermark 24: late;
            files.append(rows)                                  # 27: [20, 30) is open, within the lateness
            write_file(tmp_path / "in", f, rows)
            # file f (events 10 f .. 10 f + 9; watermark 10 f + 4) completes the windows before 10 f: they reach
            # Spark while the writing query is still running, before the next file exists
            want = {k: v for k, v in expected(files, late=(900,)).items() if k[1] < f * 10}
            deadline = time.monotonic() + 60
            while read_back() != want:
                assert writing.isActive and reading.isActive, (writing.exception(), reading.exception())
                assert time.monotonic() < deadline, f"after file {f}: Spark read {read_back()}, not {want}"
                time.sleep(0.05)
            assert writing.isActive
        assert [r[1][0] for r in run.late] == [900]
        final = expected(files, late=(900,))                     # the late row is not counted
        run.ingress.close()                                      # the end: the last windows close
        deadline = time.monotonic() + 60
        while read_back() != final:
            assert time.monotonic() < deadline, f"at the end: Spark read {read_back()}"
            time.sleep(0.05)
    finally:
        writing.stop()
        deadline = time.monotonic() + 60
        while not run.stats.get("final_committed") and time.monotonic() < deadline and not run.failure:
            time.sleep(0.05)
        reading.stop()
    run.thread.join(30)
    assert not run.failure, run.failure
    assert read_back() == final
    assert run.stats["final_committed"]


@pytest.mark.slow
def test_an_aborted_epoch_restarted_from_the_checkpoint_counts_each_row_once(spark: Any, running: Any,
                                                                             tmp_path: Path) -> None:
    run = running(lateness=0)
    files = [file_rows(f) for f in range(3)]
    for f, rows in enumerate(files):
        write_file(tmp_path / "in", f, rows)
    spark.dataSource.register(_failing_data_source("always", 1, str(tmp_path / "failed")))
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException, match="injected failure"):
        finish(start_writer(spark, tmp_path / "in", tmp_path / "ck", run.address, "aiotimely_failing_always",
                            available_now=True))
    assert run.ingress.statistics["epochs_aborted"] == 1
    time.sleep(0.3)
    assert run.windows() == {}                    # batch 0 alone (watermark 9) closes nothing
    # as if the driver then died after the sink committed batch 1 and before Spark wrote its commit log: the
    # restarted query runs batch 1 (aborted before) again, ...
    finish(start_writer(spark, tmp_path / "in", tmp_path / "ck", run.address, available_now=True))
    run.wait_windows(4)                           # batches 1 and 2: [0, 10) and [10, 20) close
    for name in ("2", ".2.crc"):                  # ... and batch 2's commit log entry is lost: it is replayed
        (tmp_path / "ck" / "commits" / name).unlink(missing_ok=True)
    files.append(file_rows(3))
    write_file(tmp_path / "in", 3, files[-1])
    finish(start_writer(spark, tmp_path / "in", tmp_path / "ck", run.address, available_now=True))
    run.end()
    assert run.windows() == expected(files)       # every row once: nothing of the aborted or replayed batches twice
    assert run.ingress.statistics["replays_ignored"] == 3
    assert run.ingress.statistics["epochs_committed"] == 4
