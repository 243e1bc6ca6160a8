"""A data pipeline on Spark handing rows to aiotimely: Structured Streaming -> windowed aggregates.

Spark (local mode) reads JSON click events from a folder, one file per
micro-batch, parses them and drops the bots' clicks; ``AiotimelyForeachWriter``
forwards each surviving row to a running aiotimely computation, where the Spark
batch id is the timestamp. aiotimely counts clicks per page over windows of two
batches (``stream.window``) and prints each window once Spark has reported both its
batches complete (``EpochListener``). Every row counts
exactly once even if Spark retries a task.

Run:  python examples/spark_pipeline.py     (needs: pip install 'aiotimely[spark]' and Java 17)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import threading
from pathlib import Path
from typing import Any

import aiotimely as at
from aiotimely.connectors.spark import AiotimelyForeachWriter, EpochListener, ingress, local_session

WINDOW = 2  # batches per window
SECRET = os.environ.setdefault("AIOTIMELY_SECRET", "spark-pipeline-example")


def write_clicks(folder: Path, files: int = 6, per_file: int = 200) -> None:
    rng = random.Random(11)
    folder.mkdir(parents=True)
    for f in range(files):
        with open(folder / f"clicks-{f:02}.json", "w") as out:
            for _ in range(per_file):
                user = rng.choice(["ann", "bob", "cy", "bot-7"])
                out.write(json.dumps({"user": user, "page": rng.choice(["home", "cart", "help"])}) + "\n")


Counts = tuple[int, dict[str, int]]
"""(window number, {page: clicks})"""


def window_counts(rows: at.Stream[dict[str, Any]]) -> at.Stream[Counts]:
    """Clicks per page in windows of ``WINDOW`` batches (one line of the library), then each window's counts of
    every page together, once Spark has committed both its batches."""
    per_page = rows.window(at.Tumbling(WINDOW), at.Agg.count(), key=lambda row: row["page"])
    return per_page.exchange(lambda _row: 0).accumulate((-1, {}), gather)


def gather(counts: Counts, rows: list[Any]) -> Counts:
    """A window's ``(page, (start, end), clicks)`` rows as one ``(window, {page: clicks})`` (all come at its end)."""
    window, per_page = counts[0], dict(counts[1])
    for page, (start, _end), clicks in rows:
        window, per_page[page] = start // WINDOW, clicks
    return window, per_page


def run_aiotimely(address: list[str], listening: threading.Event, printed: list[str]) -> None:
    async def build(worker: at.Worker) -> None:
        ready = asyncio.get_running_loop().create_future()

        def show(window_and_counts: Counts) -> None:
            w, per_page = window_and_counts
            line = f"batches {w * WINDOW}-{w * WINDOW + WINDOW - 1}: " + "  ".join(
                f"{page} {n}" for page, n in sorted(per_page.items()))
            printed.append(line)
            print(line, flush=True)

        worker.dataflow(lambda scope: window_counts(ingress(scope, "127.0.0.1:0", ready=ready)).inspect(show))
        address.append(await ready)
        listening.set()

    at.execute(build, loop="asyncio")


def main() -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="aiotimely-spark-"))
    write_clicks(tmp / "clicks")
    address: list[str] = []
    listening = threading.Event()
    printed: list[str] = []
    computation = threading.Thread(target=run_aiotimely, args=(address, listening, printed))
    computation.start()
    listening.wait()

    spark = local_session("local[2,3]", workdir=str(tmp / "spark"), app="aiotimely-example")
    try:
        spark.streams.addListener(EpochListener(address[0]))
        clicks = (spark.readStream.schema("user STRING, page STRING").option("maxFilesPerTrigger", 1)
                  .json(str(tmp / "clicks")).where("NOT user LIKE 'bot-%'").select("page"))
        (clicks.writeStream.foreach(AiotimelyForeachWriter(address[0]))
         .option("checkpointLocation", str(tmp / "checkpoint")).trigger(availableNow=True).start()
         .awaitTermination())
        computation.join()
    finally:
        spark.stop()
    return printed


if __name__ == "__main__":
    main()
