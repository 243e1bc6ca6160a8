"""Benchmark ``spark_columnar``: Spark -> a columnar event-time window in aiotimely -> Spark, in rows per second,
against the same Spark job writing to a Python sink that does nothing (the floor of ``spark_arrow``'s (a')).

One Spark session (local[2]). The source is ``rate-micro-batch`` (a fixed number of rows per micro-batch, 2
partitions; event time ``unix_millis(timestamp)``, which the source advances by 1,000 ms a batch), as
``ts, value, key = value % --keys``:

* (a') ``format("discard")``: a Python data source (Arrow) whose writer reads every record batch and keeps
  nothing; a batch ends when Spark's progress says so (its trigger's start plus its duration);
* (w) ``format("aiotimely")`` into ``ArrowIngress.columnar(time="ts")`` (the watermark: the latest ``ts`` minus
  lateness 0), a tumbling window of 1,000 ms per key (``count``, ``sum(value)``), ``publish_to_spark``, and a
  second Spark query reading the windows back (``readStream.format("aiotimely")``, ``foreachBatch`` summing the
  counts). Micro-batch ``b``'s rows are window ``b``, which closes once batch ``b + 1`` moves the watermark past
  it; batch ``b`` ends when Spark has read window ``b`` back (the counts read reach the rows of batches 0..b).

Either way the first ``--warm-up`` batches are left out and the rate is the rows of the next ``--batches``
batches over the time from the end of the last warm-up batch to the end of the last one measured (for (w),
both ends one batch late alike). The variants take turns, ``--repeats`` rounds; medians.

    python -m benchmarks.spark_columnar [--quick] [--rows 4000000] [--batches 5] [--warm-up 6] [--repeats 2]
                                        [--keys 1000]
"""

from __future__ import annotations

import concurrent.futures
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiotimely as at

from .common import command_line, save
from .spark_arrow import SECRET, TIMEOUT, register_discard, run_spark_only

NAMES = {"discard": "(a') Python data source, discarding", "window": "(w) Spark -> columnar window -> Spark"}


def events(spark: Any, rows_per_batch: int, keys: int) -> Any:
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", 2).load()
            .selectExpr("unix_millis(timestamp) AS ts", "value", f"value % {keys} AS key"))


class Pipeline:
    """The aiotimely computation, in a thread: the columnar ingress, the window, the publisher."""

    def __init__(self) -> None:
        import polars as pl

        from aiotimely.connectors.spark_datasource import ArrowIngress
        from aiotimely.connectors.spark_reader import publish_to_spark

        self.ingress = ArrowIngress("127.0.0.1:0", secret=SECRET)
        self.published: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.failure: list[BaseException] = []

        def dataflow(scope: Any) -> None:
            windows = self.ingress.columnar(scope, time="ts").window(
                at.Tumbling(1000), pl.len().alias("n"), pl.col("value").sum().alias("total"), key="key", time="ts")
            publish_to_spark(windows, secret=SECRET, ready=self.published, end_timeout=120)

        def run() -> None:
            try:
                at.execute(lambda w: w.dataflow(dataflow), loop="asyncio")
            except BaseException as e:  # noqa: BLE001 - reported by the benchmark
                self.failure.append(e)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        self.address = self.ingress.wait_listening(30)


def run_window(spark: Any, rows_per_batch: int, keys: int, warm_up: int, batches: int,
               checkpoint: str) -> dict[str, Any]:
    pipeline = Pipeline()
    read: list[tuple[float, int]] = []        # (wall clock, rows counted in the windows read so far)
    total = [0]

    def collect(df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

        n = df.agg(F.sum("n")).collect()[0][0] or 0
        total[0] += int(n)
        read.append((time.time(), total[0]))

    reading = (spark.readStream.format("aiotimely").option("address", pipeline.published.result(30))
               .schema("key LONG, window_start LONG, window_end LONG, n LONG, total LONG").load()
               .writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint + "-read").start())
    writing = (events(spark, rows_per_batch, keys).writeStream.format("aiotimely")
               .option("address", pipeline.address).option("checkpointLocation", checkpoint).start())
    last = warm_up + batches - 1
    want = rows_per_batch * (last + 1)
    deadline = time.monotonic() + TIMEOUT
    try:
        while total[0] < want:
            if pipeline.failure or not writing.isActive or not reading.isActive or time.monotonic() > deadline:
                raise RuntimeError(f"window {last} was not read back (failure {pipeline.failure}, queries "
                                   f"{writing.exception()}, {reading.exception()})")
            time.sleep(0.01)
    finally:
        writing.stop()
        pipeline.ingress.close()
        stop_by = time.monotonic() + 120
        while pipeline.thread.is_alive() and time.monotonic() < stop_by and reading.isActive:
            time.sleep(0.05)
        reading.stop()
        pipeline.thread.join(30)
    ends: dict[int, float] = {}
    for b in range(last + 1):
        ends[b] = next(t for t, n in read if n >= rows_per_batch * (b + 1))
    seconds = max(ends[last] - ends[warm_up - 1], 1e-6)  # (tiny batches: several windows read back at once)
    n = rows_per_batch * batches
    return {"rows": n, "seconds": seconds, "rows_per_s": n / seconds,
            "batch_seconds": [round(ends[b] - ends[b - 1], 3) for b in range(warm_up, last + 1)],
            "rows_read_back": total[0]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = command_line(__doc__, "small batches, checks that every row is counted in a window read back")
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows per micro-batch")
    parser.add_argument("--keys", type=int, default=1000, help="distinct keys (value % keys)")
    parser.add_argument("--batches", type=int, default=5, help="batches measured")
    parser.add_argument("--warm-up", type=int, default=6, help="batches left out first (the JIT warms up)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds, the variants taking turns; medians")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.batches, args.warm_up, args.repeats = 20_000, 2, 1, 1
    tmp = Path(tempfile.mkdtemp(prefix="aiotimely-spark-columnar-"))
    os.environ.setdefault("AIOTIMELY_SECRET", SECRET)
    from aiotimely.connectors.spark import local_session
    from aiotimely.connectors.spark_datasource import register

    spark = local_session("local[2]", workdir=str(tmp / "spark"), app="aiotimely-bench-columnar")
    register(spark, secret=SECRET)
    register_discard(spark)
    kinds = ["discard", "window"]
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    try:
        for r in range(args.repeats):
            for kind in kinds[r % 2:] + kinds[:r % 2]:
                checkpoint = str(tmp / f"ck-{kind}-{r}")
                if kind == "discard":
                    run = run_spark_only_events(spark, args, checkpoint)
                else:
                    run = run_window(spark, args.rows, args.keys, args.warm_up, args.batches, checkpoint)
                samples[kind].append(run)
                print(f"{kind}: {run['rows_per_s']:,.0f} rows/s ({run['batch_seconds']} s per batch)", flush=True)
    finally:
        spark.stop()
    rates = {k: statistics.median(s["rows_per_s"] for s in v) for k, v in samples.items()}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rate-micro-batch, local[2], {args.rows:,} rows per batch, {args.keys:,} keys, {args.batches} batches "
          f"after {args.warm_up}; median of {args.repeats}; peak RSS of this process (driver side, aiotimely) "
          f"{peak:,.0f} MB")
    print("\n".join(f"{NAMES[k]:46} {v:>12,.0f} rows/s" for k, v in rates.items()))
    ratio = rates["window"] / rates["discard"]
    print(f"(w)/(a') = {ratio:.0%} (goal >= 80%)")
    results = {"rows_per_batch": args.rows, "keys": args.keys, "batches": args.batches, "warm_up": args.warm_up,
               "repeats": args.repeats, "rows_per_s": rates, "runs": samples, "w_over_a_prime": ratio,
               "peak_rss_mb": peak}
    if not args.quick:
        print(f"wrote {save('spark_columnar', results)}")
    return results


def run_spark_only_events(spark: Any, args: Any, checkpoint: str) -> dict[str, Any]:
    """(a'): the same rows (``ts, value, key``) into ``format("discard")``."""
    from . import spark_arrow

    original = spark_arrow.rate
    spark_arrow.rate = lambda session, rows: events(session, rows, args.keys)  # the same select as (w)
    try:
        return run_spark_only(spark, "discard", args.rows, args.warm_up, args.batches, checkpoint)
    finally:
        spark_arrow.rate = original


if __name__ == "__main__":
    main()
