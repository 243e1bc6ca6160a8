"""Spark Structured Streaming into aiotimely, with real PySpark in local mode (slow: one session per module)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
import aiotimely as at  # noqa: E402
from aiotimely.connectors.spark import (  # noqa: E402
    AiotimelyForeachWriter,
    EpochListener,
    foreach_batch_sink,
    ingress,
    local_session,
)

from .spark_writers import FailingWriter  # noqa: E402
from .test_spark_ingress import Running  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    # Spark's Python workers must import tests.connectors.spark_writers
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    session = local_session("local[2,3]", workdir=str(tmp_path_factory.mktemp("spark")), app="aiotimely-tests")
    yield session
    session.stop()


def write_events(directory: Path, files: int = 3, per_file: int = 20) -> list[int]:
    directory.mkdir(parents=True, exist_ok=True)
    ids = []
    for f in range(files):
        with open(directory / f"events-{f}.json", "w") as out:
            for i in range(per_file):
                event_id = f * per_file + i
                ids.append(event_id)
                out.write(json.dumps({"id": event_id, "page": ["home", "cart"][event_id % 2], "ms": i}) + "\n")
    return ids


def query(spark, source: Path, checkpoint: Path, writer):
    events = (spark.readStream.schema("id INT, page STRING, ms INT").option("maxFilesPerTrigger", 1)
              .json(str(source)).repartition(2))
    return (events.writeStream.foreach(writer).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def test_foreach_rows_enter_once_although_a_task_failed(spark, tmp_path):
    ids = write_events(tmp_path / "in")
    run = Running()
    listener = EpochListener(run.address, run.secret)
    spark.streams.addListener(listener)
    try:
        writer = FailingWriter(run.address, run.secret, epoch=1, partition=0, marker=str(tmp_path / "failed-once"))
        query(spark, tmp_path / "in", tmp_path / "ck", writer).awaitTermination(120)
        run.join(60)
    finally:
        spark.streams.removeListener(listener)
    assert (tmp_path / "failed-once").exists()                    # the failure really happened
    assert sorted(row["id"] for _, row in run.rows) == ids        # and every row entered exactly once
    assert {t for t, _ in run.rows} == {0, 1, 2}                  # at the epoch (batch id) of its file
    assert run.statistics["attempts_discarded"] >= 1
    assert run.complete                                           # the listener ended the stream


def test_a_query_restarted_from_its_checkpoint_delivers_each_row_once(spark, tmp_path):
    ids = write_events(tmp_path / "in", files=4)
    run = Running()
    listener = EpochListener(run.address, run.secret)          # ends the stream only on a clean termination
    spark.streams.addListener(listener)
    try:
        first = query(spark, tmp_path / "in", tmp_path / "ck",
                      FailingWriter(run.address, run.secret, epoch=2, partition=1, marker=str(tmp_path / "m"),
                                    always=True))
        from pyspark.errors import StreamingQueryException

        with pytest.raises(StreamingQueryException, match="injected failure at epoch 2 partition 1"):
            first.awaitTermination(120)                           # epoch 2 fails 3 times: the query dies
        query(spark, tmp_path / "in", tmp_path / "ck", AiotimelyForeachWriter(run.address, run.secret)) \
            .awaitTermination(120)                                # restarted: Spark replays epoch 2
        run.join(60)
    finally:
        spark.streams.removeListener(listener)
    counts = Counter(row["id"] for _, row in run.rows)
    assert sorted(counts) == ids and set(counts.values()) == {1}
    assert run.statistics["replays_ignored"] >= 1                 # epoch 2's partition 0 came twice


def test_foreach_batch_sends_each_micro_batch_then_its_end(spark, tmp_path):
    ids = write_events(tmp_path / "in")
    run = Running()
    events = (spark.readStream.schema("id INT, page STRING, ms INT").option("maxFilesPerTrigger", 1)
              .json(str(tmp_path / "in")).where("page = 'home'"))
    (events.writeStream.foreachBatch(foreach_batch_sink(run.address, run.secret))
     .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start().awaitTermination(120))
    assert run.wait_passed(2, timeout=10)                         # the last batch is complete, with nothing after
    run.end()
    assert sorted(row["id"] for _, row in run.rows) == [i for i in ids if i % 2 == 0]
    assert sorted({t for t, _ in run.rows}) == [0, 1, 2]


def test_foreach_batch_alone_completes_each_epoch_at_once_and_the_dataflow_completes(spark, tmp_path):
    """The user's program: a paired sink, no listener, no secret, no address, no thread of ours."""
    ids = write_events(tmp_path / "in")
    events = (spark.readStream.schema("id INT, page STRING, ms INT").option("maxFilesPerTrigger", 1)
              .json(str(tmp_path / "in")))

    async def main():
        loop = asyncio.get_running_loop()
        sink = foreach_batch_sink()
        lags: dict[int, float] = {}

        def then_wait_for_the_frontier(batch_df, batch_id):
            # after each batch, before Spark goes on: the frontier passes it with no record after it
            sink(batch_df, batch_id)
            returned = time.monotonic()
            asyncio.run_coroutine_threadsafe(probe.wait_beyond(batch_id), loop).result(timeout=15)
            lags[batch_id] = time.monotonic() - returned

        async with at.Worker() as worker:
            rows = []
            probe = worker.dataflow(lambda s: ingress(s, sink=sink)
                                    .inspect_time(lambda t, row: rows.append((t, row["id"]))).probe())
            writer = (events.writeStream.foreachBatch(then_wait_for_the_frontier)
                      .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True))
            with sink:
                query = await asyncio.to_thread(writer.start)
                await asyncio.to_thread(query.awaitTermination, 120)
                assert query.exception() is None
            await asyncio.wait_for(probe.wait_done(), 15)        # the stream ended: everything complete
        return rows, lags

    rows, lags = asyncio.run(asyncio.wait_for(main(), 180))
    assert sorted(i for _, i in rows) == ids
    batches_of_file = [sorted({t for t, i in rows if i // 20 == f}) for f in range(3)]
    assert sorted(batches_of_file) == [[0], [1], [2]]             # each file's rows at its batch id (Spark's order)
    assert sorted(lags) == [0, 1, 2] and max(lags.values()) < 2.0, lags
    print("frontier past each batch, after its foreachBatch call returned:",
          {e: f"{lag * 1000:.1f} ms" for e, lag in lags.items()})


def test_a_foreach_batch_query_restarted_from_its_checkpoint_delivers_each_row_once(spark, tmp_path):
    from pyspark.errors import StreamingQueryException

    from .test_spark_ingress import Running

    ids = write_events(tmp_path / "in", files=4)
    sink = foreach_batch_sink()
    run = Running(secret=None, sink=sink)
    events = (spark.readStream.schema("id INT, page STRING, ms INT").option("maxFilesPerTrigger", 1)
              .json(str(tmp_path / "in")))

    def fails_after_delivering_batch_2(batch_df, batch_id):
        sink(batch_df, batch_id)
        if batch_id == 2:
            raise RuntimeError("injected failure after batch 2 was delivered")

    def start(fn):
        return (events.writeStream.foreachBatch(fn).option("checkpointLocation", str(tmp_path / "ck"))
                .trigger(availableNow=True).start())

    with sink:
        with pytest.raises(StreamingQueryException, match="injected failure"):
            start(fails_after_delivering_batch_2).awaitTermination(120)   # batch 2 is not committed
        start(sink).awaitTermination(120)                                 # restarted: Spark runs batch 2 again
    run.join(30)
    counts = Counter(row["id"] for _, row in run.rows)
    assert sorted(counts) == ids and set(counts.values()) == {1}
    assert sorted({t for t, _ in run.rows}) == [0, 1, 2, 3]
    assert run.statistics["replays_ignored"] == 1 and run.complete


def test_the_guides_foreach_batch_snippet_runs(spark, monkeypatch):
    """docs/guide.md's Spark snippet, as written; its session is this module's (getOrCreate), kept running."""
    text = (ROOT / "docs" / "guide.md").read_text()
    snippets = re.findall(r"```python spark\n(.*?)```", text, flags=re.S)
    assert snippets
    monkeypatch.setattr(type(spark), "stop", lambda self: None)
    for i, snippet in enumerate(snippets):
        exec(compile(snippet, f"guide.md Spark snippet {i + 1}", "exec"), {})
