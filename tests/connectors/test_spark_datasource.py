"""``format("aiotimely")``: Spark's Python data source into an ArrowIngress, with real PySpark in local mode.

One Spark session (``local[2,3]``: a task may fail 3 times) for the module. Every
wait is bounded: a query that does not finish is stopped and the test fails.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

import aiotimely as at  # noqa: E402
from aiotimely.connectors import spark_datasource  # noqa: E402
from aiotimely.connectors.spark import local_session  # noqa: E402
from aiotimely.connectors.spark_datasource import ArrowIngress, end_stream, register  # noqa: E402

SECRET = "datasource-secret"
QUERY_TIMEOUT = 180
SCHEMA = "id INT, page STRING, ms INT"


class Running:
    """An aiotimely computation fed by an ArrowIngress, in a thread of its own (as next to Spark).

    ``events`` records, in order, ``("rows", t, records)`` and ``("frontier", [times])`` as a sink sees them.
    """

    def __init__(self, records: str = "tuples") -> None:
        self.ingress = ArrowIngress("127.0.0.1:0", secret=SECRET, records=records)
        self.events: list[tuple[Any, ...]] = []
        self.failure: list[BaseException] = []

        async def watch(inp: Any) -> None:
            seen: list[Any] = [0]
            async for _ in inp.activations():
                for t, batch in inp.batches():
                    self.events.append(("rows", t, list(batch)))
                frontier = list(inp.frontier)
                if frontier != seen:
                    seen = frontier
                    self.events.append(("frontier", frontier))

        def build(worker: Any) -> None:
            worker.dataflow(lambda s: self.ingress.stream(s).sink(watch, name="Watch"))

        def main() -> None:
            try:
                at.execute(build, loop="asyncio")
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.failure.append(e)

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        self.address = self.ingress.wait_listening(10)

    @property
    def rows(self) -> list[tuple[int, Any]]:
        return [(e[1], r) for e in self.events if e[0] == "rows" for r in e[2]]

    def frontier(self) -> list[Any] | None:
        frontiers = [e[1] for e in self.events if e[0] == "frontier"]
        return frontiers[-1] if frontiers else None

    def wait_frontier(self, frontier: list[Any], timeout: float = 20) -> None:
        deadline = _now() + timeout
        while self.frontier() != frontier:
            assert _now() < deadline, f"the frontier is {self.frontier()}, not {frontier}"
            threading.Event().wait(0.05)

    def end(self, timeout: float = 30) -> None:
        self.ingress.close()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the dataflow did not complete after close()"
        assert not self.failure, self.failure


def _now() -> float:
    import time

    return time.monotonic()


@pytest.fixture(scope="module")
def spark(tmp_path_factory: Any) -> Any:
    session = local_session("local[2,3]", workdir=str(tmp_path_factory.mktemp("spark")), app="aiotimely-datasource")
    register(session, secret=SECRET)
    yield session
    session.stop()


@pytest.fixture
def running() -> Any:
    runs: list[Running] = []

    def start(records: str = "tuples") -> Running:
        run = Running(records)
        runs.append(run)
        return run

    yield start
    for run in runs:  # whatever happened, no dataflow thread outlives its test
        run.ingress.close()
        run.thread.join(10)


def write_events(directory: Path, files: int, per_file: int = 20, first: int = 0) -> dict[int, list[int]]:
    """``files`` JSON files (one per micro-batch, in order); returns the ids of each file."""
    directory.mkdir(parents=True, exist_ok=True)
    ids: dict[int, list[int]] = {}
    for f in range(first, first + files):
        path = directory / f"events-{f:03d}.json"
        with open(path, "w") as out:
            for i in range(per_file):
                event_id = f * per_file + i
                ids.setdefault(f, []).append(event_id)
                out.write(json.dumps({"id": event_id, "page": ["home", "cart"][event_id % 2], "ms": i}) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source reads them in this order
    return ids


def start_query(spark: Any, source: Path, checkpoint: Path, address: str, *, fmt: str = "aiotimely") -> Any:
    events = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source)).repartition(2))
    return (events.writeStream.format(fmt).option("address", address).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def finish(query: Any, timeout: float = QUERY_TIMEOUT) -> None:
    """Wait for the query to end (raising its failure); a query still running after ``timeout`` fails the test."""
    try:
        if not query.awaitTermination(timeout):
            pytest.fail(f"the query did not finish within {timeout} s")
    finally:
        if query.isActive:
            query.stop()


def all_ids(ids: dict[int, list[int]]) -> list[int]:
    return sorted(i for v in ids.values() for i in v)


# -- the exactly-once rules over the wire, without Spark -----------------------------------------------------


def _stage(address: str, batch: int, partition: int, token: str, ids: list[int], *, finish_it: bool = True) -> None:
    client = spark_datasource._Client(address, SECRET, 10)
    try:
        client.send("stage", batch, partition, token, 0, 0)
        record_batch = pa.record_batch({"id": pa.array(ids, pa.int32())})
        client.send_arrow(spark_datasource.SCHEMA, record_batch.schema.serialize())
        client.send_arrow(spark_datasource.BATCH, record_batch.serialize())
        if finish_it:
            assert client.ask("staged", len(ids)) == ["ok", len(ids)]
    finally:
        client.close()


def _tell(address: str, *message: Any) -> Any:
    client = spark_datasource._Client(address, SECRET, 10)
    try:
        return client.request(*message)
    finally:
        client.close()


def test_the_ingress_releases_only_the_committed_attempts_once(running: Any) -> None:
    run = running()
    a = run.address
    _stage(a, 0, 0, "t-lost", [99], finish_it=False)          # a task that died mid-write
    _stage(a, 0, 0, "t-failed", [98])                         # staged, but its task failed later
    _stage(a, 0, 0, "t-ok", [1, 2])
    _stage(a, 0, 1, "t-ok1", [3])
    assert _tell(a, "commit", 0, [[0, "t-ok", 2], [1, "t-ok1", 1]]) == ["ok"]
    assert _tell(a, "commit", 0, [[0, "t-ok", 2], [1, "t-ok1", 1]]) == ["ok", "replay"]   # replayed: ignored
    _stage(a, 0, 1, "t-again", [3])                                                      # late write: ignored
    _stage(a, 1, 0, "t-aborted", [4])
    assert _tell(a, "abort", 1) == ["ok"]
    assert _tell(a, "commit", 1, [[0, "t-aborted", 1]])[0] == "error"   # what was aborted cannot be committed
    _stage(a, 1, 0, "t-retry", [4])
    assert _tell(a, "commit", 1, [[0, "t-retry", 1]]) == ["ok"]
    run.wait_frontier([2])                                    # time moved past the last commit, the stream open
    end_stream(a, SECRET)
    run.thread.join(10)
    assert not run.thread.is_alive() and not run.failure
    assert sorted(run.rows) == [(0, (1,)), (0, (2,)), (0, (3,)), (1, (4,))]
    assert run.frontier() == []
    assert run.ingress.statistics == {"epochs_committed": 2, "rows_committed": 4, "replays_ignored": 2,
                                      "attempts_discarded": 3, "epochs_aborted": 1}


def test_on_two_workers_worker_0_listens_and_the_rows_can_be_spread() -> None:
    ingress = ArrowIngress("127.0.0.1:0", secret=SECRET, records="dicts")
    seen: list[tuple[int, int, Any]] = []

    def build(worker: Any) -> None:
        index = worker.index
        worker.dataflow(lambda s: ingress.stream(s).exchange(lambda r: r["id"])
                        .inspect_time(lambda t, r: seen.append((index, t, r["id"]))))

    def feed() -> None:
        address = ingress.wait_listening(10)
        _stage(address, 0, 0, "a", [1, 2, 3, 4])
        assert _tell(address, "commit", 0, [[0, "a", 4]]) == ["ok"]
        ingress.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    done = threading.Thread(target=lambda: at.execute(build, workers=2, loop="asyncio"), daemon=True)
    done.start()
    done.join(20)
    feeder.join(5)
    assert not done.is_alive(), "the dataflow did not complete"
    assert sorted((t, i) for _, t, i in seen) == [(0, 1), (0, 2), (0, 3), (0, 4)]
    assert {w for w, _, _ in seen} == {0, 1}


def test_strangers_are_refused(running: Any) -> None:
    run = running()
    with pytest.raises(Exception, match="does not know the shared secret"):
        spark_datasource._Client(run.address, "wrong", 5)
    with pytest.raises(at.ClusterError, match="refused 'commit'"):
        spark_datasource._Client(run.address, SECRET, 5).ask("commit", 0, [[0, "nobody", 1]])
    run.end()
    assert run.rows == []


# -- with Spark ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rows_enter_once_at_their_batch_id_and_time_passes_each_committed_epoch(spark: Any, running: Any,
                                                                                 tmp_path: Path) -> None:
    ids = write_events(tmp_path / "in", files=3)
    run = running()
    finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address))
    run.wait_frontier([3])            # the last epoch is complete once committed: no listener, no close
    run.end()
    assert {t: sorted(r[0] for tt, r in run.rows if tt == t) for t in range(3)} == ids
    assert len(run.rows) == len(all_ids(ids))
    # the frontier only moves on, and no rows come at a time it has passed
    low = 0
    for event in run.events:
        if event[0] == "rows":
            assert event[1] >= low, event
        elif event[1]:
            assert event[1][0] > low, event
            low = event[1][0]
    frontiers = [e[1] for e in run.events if e[0] == "frontier"]
    assert [3] in frontiers and frontiers[-1] == []
    assert run.ingress.statistics["epochs_committed"] == 3
    assert run.ingress.statistics["replays_ignored"] == 0


def _failing_data_source(mode: str, batch: int, marker: str) -> type:
    """A data source whose writer fails for ``batch``: partition 0 in the middle of sending, partition 1 after
    staging all of it; on the first attempt only (``mode="once"``), or on every attempt (``"always"``)."""
    from pyspark import TaskContext

    base_writer = spark_datasource.AiotimelyStreamWriter

    class FailingWriter(base_writer):  # type: ignore[misc, valid-type]
        def write(self, iterator: Any) -> Any:
            context = TaskContext.get()
            here = int(context.getLocalProperty("streaming.sql.batchId"))
            fail = here == batch and (mode == "always" or context.attemptNumber() == 0)
            if not fail:
                return super().write(iterator)
            open(f"{marker}-{context.partitionId()}-{context.attemptNumber()}", "w").close()
            if context.partitionId() == 0:
                def broken() -> Any:
                    for record_batch in iterator:
                        yield record_batch
                        raise RuntimeError("injected failure in the middle of a partition")
                return super().write(broken())
            super().write(iterator)
            raise RuntimeError("injected failure after the partition was staged")

    class FailingDataSource(spark_datasource.AiotimelyDataSource):  # type: ignore[misc, name-defined]
        _secret = SECRET

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802
            return FailingWriter(self.options, self._secret)

        @classmethod
        def name(cls) -> str:
            return f"aiotimely_failing_{mode}"

    return FailingDataSource


@pytest.mark.slow
def test_exactly_once_although_tasks_fail_on_their_first_attempt(spark: Any, running: Any, tmp_path: Path) -> None:
    ids = write_events(tmp_path / "in", files=3)
    run = running()
    spark.dataSource.register(_failing_data_source("once", 1, str(tmp_path / "failed")))
    finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address, fmt="aiotimely_failing_once"))
    run.end()
    assert sorted(p.name for p in tmp_path.glob("failed-*")) == ["failed-0-0", "failed-1-0"]  # both failed once
    counts = Counter(r[0] for _, r in run.rows)
    assert sorted(counts) == all_ids(ids) and set(counts.values()) == {1}
    assert sorted(r[0] for t, r in run.rows if t == 1) == ids[1]
    assert run.ingress.statistics["attempts_discarded"] == 2        # the broken one and the staged one
    assert run.ingress.statistics["epochs_aborted"] == 0


@pytest.mark.slow
def test_an_aborted_epoch_is_discarded_and_the_restarted_query_delivers_it_once(spark: Any, running: Any,
                                                                               tmp_path: Path) -> None:
    ids = write_events(tmp_path / "in", files=3)
    run = running()
    spark.dataSource.register(_failing_data_source("always", 1, str(tmp_path / "failed")))
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException, match="injected failure"):
        finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address, fmt="aiotimely_failing_always"))
    assert run.ingress.statistics["epochs_aborted"] == 1            # the driver aborted batch 1
    assert sorted(r[0] for _, r in run.rows) == ids[0]              # and nothing of it entered
    run.wait_frontier([1])
    finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address))   # restarted: batch 1 again
    run.wait_frontier([3])
    run.end()
    counts = Counter(r[0] for _, r in run.rows)
    assert sorted(counts) == all_ids(ids) and set(counts.values()) == {1}
    assert {t: sorted(r[0] for tt, r in run.rows if tt == t) for t in range(3)} == ids


@pytest.mark.slow
def test_a_query_restarted_from_its_checkpoint_does_not_deliver_a_committed_epoch_twice(spark: Any, running: Any,
                                                                                       tmp_path: Path) -> None:
    ids = write_events(tmp_path / "in", files=2)
    run = running()
    finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address))
    run.wait_frontier([2])
    # as if the driver died after the sink committed batch 1 and before Spark wrote its commit log
    for name in ("1", ".1.crc"):
        (tmp_path / "ck" / "commits" / name).unlink(missing_ok=True)
    ids |= write_events(tmp_path / "in", files=1, first=2)
    finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address))   # replays batch 1, then batch 2
    run.wait_frontier([3])
    run.end()
    counts = Counter(r[0] for _, r in run.rows)
    assert sorted(counts) == all_ids(ids) and set(counts.values()) == {1}
    assert {t: sorted(r[0] for tt, r in run.rows if tt == t) for t in range(3)} == ids
    # batch 1's two partitions were written again and its commit came again: all three ignored
    assert run.ingress.statistics["replays_ignored"] == 3
    assert run.ingress.statistics["epochs_committed"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("records", ["tuples", "dicts", "arrow"])
def test_records_as_tuples_dicts_or_arrow_batches(spark: Any, running: Any, tmp_path: Path, records: str) -> None:
    ids = write_events(tmp_path / "in", files=2)
    run = running(records)
    finish(start_query(spark, tmp_path / "in", tmp_path / "ck", run.address))
    run.wait_frontier([2])
    run.end()
    expected = sorted((t, i, ["home", "cart"][i % 2], i % 20) for t, v in ids.items() for i in v)
    if records == "tuples":
        got = sorted((t, *r) for t, r in run.rows)
    elif records == "dicts":
        assert all(list(r) == ["id", "page", "ms"] for _, r in run.rows)
        got = sorted((t, r["id"], r["page"], r["ms"]) for t, r in run.rows)
    else:
        assert all(isinstance(b, pa.RecordBatch) and b.schema.names == ["id", "page", "ms"] for _, b in run.rows)
        assert str(run.rows[0][1].schema.field("id").type) == "int32"
        got = sorted((t, *row.values()) for t, b in run.rows for row in b.to_pylist())
    assert got == expected
