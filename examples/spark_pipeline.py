"""A data pipeline round trip: Spark ETL -> aiotimely windows -> Spark writes Parquet.

Spark (local mode) reads JSON click events from a folder, one file per micro-batch,
parses them and drops the bots' clicks, and writes each micro-batch into a running
aiotimely computation with ``format("aiotimely")``: its rows arrive as Arrow record
batches and enter the dataflow at time = the batch id, exactly once, when Spark's
driver commits the batch (a retried task or a replayed batch counts once). aiotimely
counts clicks per page over windows of two batches (``stream.window``) and publishes
each window's counts once the frontier has passed its end (``publish_to_spark``).
A second Spark query reads them back with ``format("aiotimely")``: a micro-batch only
ever holds complete windows, which it appends to Parquet files.

Run:  python examples/spark_pipeline.py     (needs: pip install 'aiotimely[spark]' and Java 17)
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import aiotimely as at
from aiotimely.connectors.spark import local_session
from aiotimely.connectors.spark_datasource import ArrowIngress, register
from aiotimely.connectors.spark_reader import publish_to_spark

WINDOW = 2  # batches per window
SECRET = "spark-pipeline-example"


def write_clicks(folder: Path, files: int = 6, per_file: int = 200) -> None:
    rng = random.Random(11)
    folder.mkdir(parents=True)
    for f in range(files):
        with open(folder / f"clicks-{f:02}.json", "w") as out:
            for _ in range(per_file):
                user = rng.choice(["ann", "bob", "cy", "bot-7"])
                out.write(json.dumps({"user": user, "page": rng.choice(["home", "cart", "help"])}) + "\n")


def window_counts(rows: at.Stream[dict[str, Any]]) -> at.Stream[tuple[int, str, int]]:
    """Clicks per page in windows of ``WINDOW`` batches (one line of the library), as ``(window, page, clicks)``
    rows in the schema's order, each sent when its window is complete."""
    per_page = rows.window(at.Tumbling(WINDOW), at.Agg.count(), key=lambda row: row["page"])
    return per_page.map(lambda c: (c[1][0] // WINDOW, c[0], c[2]))


async def main() -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="aiotimely-spark-"))
    write_clicks(tmp / "clicks")
    spark = await asyncio.to_thread(local_session, "local[2,3]", workdir=str(tmp / "spark"),
                                    app="aiotimely-example")
    register(spark, secret=SECRET)          # format("aiotimely"), both ways
    ingress = ArrowIngress("127.0.0.1:0", secret=SECRET, records="dicts")
    published = asyncio.get_running_loop().create_future()
    try:
        async with at.Worker() as worker:
            worker.dataflow(lambda scope: publish_to_spark(window_counts(ingress.stream(scope)), "127.0.0.1:0",
                                                           secret=SECRET, ready=published))
            clicks = (spark.readStream.schema("user STRING, page STRING").option("maxFilesPerTrigger", 1)
                      .json(str(tmp / "clicks")).where("NOT user LIKE 'bot-%'").select("page"))
            into = (clicks.writeStream.format("aiotimely").option("address", await ingress.listening())
                    .option("checkpointLocation", str(tmp / "in-checkpoint")).trigger(availableNow=True))
            counts = (spark.readStream.format("aiotimely").option("address", await published)
                      .option("untilEnd", "true").schema("window LONG, page STRING, clicks LONG").load())
            out = (counts.writeStream.format("parquet").option("path", str(tmp / "counts"))
                   .option("checkpointLocation", str(tmp / "out-checkpoint")).trigger(availableNow=True))
            writing = await asyncio.to_thread(into.start)   # Spark's calls block: run them in threads
            reading = await asyncio.to_thread(out.start)
            await asyncio.to_thread(writing.awaitTermination)
            ingress.close()                 # every file was read: the stream ends, the last window closes
            await asyncio.to_thread(reading.awaitTermination)
        # the dataflow completed: Spark has committed every window it read
        rows = await asyncio.to_thread(lambda: spark.read.parquet(str(tmp / "counts")).collect())
    finally:
        await asyncio.to_thread(spark.stop)
    windows: dict[int, dict[str, int]] = {}
    for window, page, clicks_ in rows:
        windows.setdefault(window, {})[page] = clicks_
    lines = [f"batches {w * WINDOW}-{w * WINDOW + WINDOW - 1}: "
             + "  ".join(f"{page} {n}" for page, n in sorted(per_page.items()))
             for w, per_page in sorted(windows.items())]
    for line in lines:
        print(line, flush=True)
    return lines


if __name__ == "__main__":
    asyncio.run(main())
