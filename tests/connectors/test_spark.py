"""Spark Structured Streaming into aiotimely, with real PySpark in local mode (slow: one session per module)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
from aiotimely.connectors.spark import (  # noqa: E402
    AiotimelyForeachWriter,
    EpochListener,
    foreach_batch_sink,
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
        run.thread.join(60)
    finally:
        spark.streams.removeListener(listener)
    assert (tmp_path / "failed-once").exists()                    # the failure really happened
    assert sorted(row["id"] for _, row in run.rows) == ids        # and every row entered exactly once
    assert {t for t, _ in run.rows} == {0, 1, 2}                  # at the epoch (batch id) of its file
    assert run.statistics["attempts_discarded"] >= 1


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
        run.thread.join(60)
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
    run.end()
    assert sorted(row["id"] for _, row in run.rows) == [i for i in ids if i % 2 == 0]
    assert sorted({t for t, _ in run.rows}) == [0, 1, 2]
