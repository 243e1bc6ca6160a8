"""Benchmark ``spark_arrow``: rows per second from Spark's rate source into (a) Spark's no-op sink, (b) aiotimely
through the ``format("aiotimely")`` data source (Arrow), (c) aiotimely through today's row path (``foreach``).

One Spark session (local[2]); the source is ``rate-micro-batch`` (the rate source with
a fixed number of rows per micro-batch, 2 partitions; the timestamp as microseconds,
``ts, value``, since the row path's msgpack cannot carry datetimes), so that a slow
sink makes the run longer, not the batches bigger. The query runs as fast as it can;
the first ``--warm-up`` batches are left out (the JVM's JIT warms up), and the rate is
the rows of the next ``--batches`` batches over the time from the end of the last
warm-up batch to the end of the last one measured. A batch ends:

* (a) ``format("noop")``, and (a') ``format("discard")``, a Python data source (Arrow)
  whose writer reads every record batch and keeps nothing -- what any Python sink costs
  in Spark before it does anything: when Spark's progress says the batch ended (its
  trigger's start plus its duration);
* (b) ``format("aiotimely")`` into an :class:`ArrowIngress`: when the frontier of a sink
  in the dataflow passes the batch, every row counted there (``records="arrow"``: whole
  record batches; ``--tuples`` also measures (b') rows as tuples);
* (c) ``foreach(AiotimelyForeachWriter)`` with an ``EpochListener`` into
  ``spark.ingress``: the same, rows as dicts. It is far slower, so it gets smaller
  batches (``--row-path-rows``): its cost is per row.

The variants take turns, ``--repeats`` rounds; the medians are reported.

With ``--source json`` the rows come from files of JSON lines, one file per batch
(written first), that Spark parses: the cost of a pipeline that reads files.

    python -m benchmarks.spark_arrow [--quick] [--rows 4000000] [--batches 5] [--repeats 2] [--tuples]
                                     [--source rate|json]
"""

from __future__ import annotations

import asyncio
import datetime
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiotimely as at

from .common import command_line, save

SECRET = "spark-arrow-benchmark"
TIMEOUT = 900.0
NAMES = {"noop": "(a) noop sink",
         "discard": "(a') Python data source, discarding",
         "arrow": "(b) format('aiotimely'), Arrow",
         "tuples": "(b') format('aiotimely'), tuples",
         "row path": "(c) foreach row path"}


class Counted:
    """An aiotimely computation in a thread: a source, a sink counting rows and noting when each time completes."""

    def __init__(self, make_source: Any, count: Any) -> None:
        self.rows: dict[int, int] = {}
        self.passed: dict[int, float] = {}   # time -> wall clock when the frontier passed it
        self.address: str | None = None
        self.failure: list[BaseException] = []
        self.listening = threading.Event()
        self.ingress: Any = None

        async def watch(inp: Any) -> None:
            low = 0
            async for _ in inp.activations():
                for t, batch in inp.batches():
                    self.rows[t] = self.rows.get(t, 0) + count(batch)
                frontier = list(inp.frontier)
                now = time.time()
                top = frontier[0] if frontier else None
                while (top is None and low in self.rows) or (top is not None and low < top):
                    self.passed[low] = now
                    low += 1

        async def build(worker: at.Worker) -> None:
            ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            worker.dataflow(lambda s: make_source(self, s, ready).sink(watch, name="Count"))
            self.address = await ready
            self.listening.set()

        def run() -> None:
            try:
                at.execute(build, loop="asyncio")
            except BaseException as e:  # noqa: BLE001 - reported by the benchmark
                self.failure.append(e)
                self.listening.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        if not self.listening.wait(30) or self.failure:
            raise RuntimeError(f"the dataflow did not start: {self.failure}")

    def wait_passed(self, batch: int, query: Any) -> None:
        deadline = time.monotonic() + TIMEOUT
        while batch not in self.passed:
            if self.failure or not query.isActive or time.monotonic() > deadline:
                raise RuntimeError(f"batch {batch} did not arrive (failure {self.failure}, "
                                   f"query exception {query.exception()})")
            time.sleep(0.01)


def arrow_source(records: str) -> Any:
    def make(counted: Counted, scope: Any, ready: asyncio.Future[str]) -> Any:
        from aiotimely.connectors.spark_datasource import ArrowIngress

        counted.ingress = ArrowIngress("127.0.0.1:0", secret=SECRET, records=records)

        async def tell() -> None:
            ready.set_result(await counted.ingress.listening())

        asyncio.get_running_loop().create_task(tell())
        return counted.ingress.stream(scope)

    return make


def row_source(counted: Counted, scope: Any, ready: asyncio.Future[str]) -> Any:
    from aiotimely.connectors.spark import ingress

    return ingress(scope, "127.0.0.1:0", secret=SECRET, ready=ready)


def register_discard(spark: Any) -> None:
    """``format("discard")``: a Python data source (Arrow) whose writer reads every batch and keeps nothing."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class Discard(DataSourceStreamArrowWriter):  # type: ignore[misc]
        def write(self, iterator: Any) -> Any:
            for _ in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages: Any, batchId: int) -> None:  # noqa: N803 - Spark's name
            pass

        def abort(self, messages: Any, batchId: int) -> None:  # noqa: N803 - Spark's name
            pass

    class DiscardSource(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "discard"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
            return Discard()

    spark.dataSource.register(DiscardSource)


def rate(spark: Any, rows_per_batch: int) -> Any:
    """The rows: ``--source rate`` (generated in the JVM), or ``json`` (files of JSON lines, one per batch,
    parsed by Spark: what a pipeline reading files costs), ``ts, value`` either way."""
    folder = JSON_FOLDERS.get(rows_per_batch)
    if folder is None:
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
                .option("numPartitions", 2).load().selectExpr("unix_micros(timestamp) AS ts", "value"))
    return spark.readStream.schema("ts LONG, value LONG").option("maxFilesPerTrigger", 1).json(folder)


JSON_FOLDERS: dict[int, str] = {}
"""With ``--source json``: rows per batch -> the folder of files holding them."""


def write_json(folder: Path, files: int, rows: int) -> str:
    """``files`` files of ``rows`` JSON lines each (``{"ts": ..., "value": ...}``)."""
    folder.mkdir(parents=True)
    value = 0
    for f in range(files):
        with open(folder / f"rows-{f:03}.json", "w") as out:
            out.writelines(f'{{"ts": {1_700_000_000_000_000 + v}, "value": {v}}}\n'
                           for v in range(value, value + rows))
        value += rows
    return str(folder)


def run_spark_only(spark: Any, fmt: str, rows_per_batch: int, warm_up: int, batches: int,
                   checkpoint: str) -> dict[str, Any]:
    query = rate(spark, rows_per_batch).writeStream.format(fmt).option("checkpointLocation", checkpoint).start()
    last = warm_up + batches - 1
    deadline = time.monotonic() + TIMEOUT
    try:
        while not any(p.batchId >= last for p in query.recentProgress):
            if not query.isActive or time.monotonic() > deadline:
                raise RuntimeError(f"{fmt}: batch {last} did not end ({query.exception()})")
            time.sleep(0.05)
    finally:
        query.stop()
    ends, rows = {}, {}
    for p in query.recentProgress:
        start = datetime.datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        ends[p.batchId] = start + p.durationMs["triggerExecution"] / 1000
        rows[p.batchId] = p.numInputRows
    return _rate(ends, rows, warm_up, last)


def run_aiotimely(spark: Any, kind: str, rows_per_batch: int, warm_up: int, batches: int,
                  checkpoint: str) -> dict[str, Any]:
    if kind == "row path":
        counted = Counted(row_source, len)
    else:
        records = "arrow" if kind == "arrow" else "tuples"
        counted = Counted(arrow_source(records),
                          (lambda batch: sum(b.num_rows for b in batch)) if records == "arrow" else len)
    assert counted.address is not None
    last = warm_up + batches - 1
    listener = None
    stream = rate(spark, rows_per_batch).writeStream.option("checkpointLocation", checkpoint)
    if kind == "row path":
        from aiotimely.connectors.spark import AiotimelyForeachWriter, EpochListener

        listener = EpochListener(counted.address, SECRET, end_on_termination=False)
        spark.streams.addListener(listener)
        query = stream.foreach(AiotimelyForeachWriter(counted.address, SECRET)).start()
    else:
        query = stream.format("aiotimely").option("address", counted.address).start()
    try:
        counted.wait_passed(last, query)
    finally:
        query.stop()
        if listener is not None:
            spark.streams.removeListener(listener)
            time.sleep(1)  # the listener's last progress event is delivered asynchronously
    if counted.ingress is not None:
        counted.ingress.close()
    else:
        from aiotimely.connectors.spark import IngressClient

        client = IngressClient(counted.address, SECRET)
        client.request("end")
        client.close()
    counted.thread.join(60)
    for b in range(last + 1):
        if counted.rows.get(b) != rows_per_batch:
            raise RuntimeError(f"{kind}: batch {b} brought {counted.rows.get(b)} rows, not {rows_per_batch}")
    return _rate(counted.passed, counted.rows, warm_up, last)


def _rate(ends: dict[int, float], rows: dict[int, int], warm_up: int, last: int) -> dict[str, Any]:
    seconds = ends[last] - ends[warm_up - 1]
    n = sum(rows[b] for b in range(warm_up, last + 1))
    return {"rows": n, "seconds": seconds, "rows_per_s": n / seconds,
            "batch_seconds": [round(ends[b] - ends[b - 1], 3) for b in range(warm_up, last + 1)]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = command_line(__doc__, "small batches, checks that every row arrives")
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows per micro-batch, but for (c)")
    parser.add_argument("--row-path-rows", type=int, default=200_000, help="rows per micro-batch for (c)")
    parser.add_argument("--batches", type=int, default=5, help="batches measured")
    parser.add_argument("--warm-up", type=int, default=6, help="batches left out first (the JIT warms up)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds, the variants taking turns; medians")
    parser.add_argument("--arrow-batch", type=int, default=0,
                        help="spark.sql.execution.arrow.maxRecordsPerBatch (0: Spark's default, 10,000)")
    parser.add_argument("--tuples", action="store_true", help="also (b') with rows as tuples")
    parser.add_argument("--source", choices=["rate", "json"], default="rate",
                        help="Spark's rate source, or files of JSON lines that Spark parses (one per batch)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.row_path_rows, args.batches, args.warm_up, args.repeats = 20_000, 2_000, 2, 1, 1
    tmp = Path(tempfile.mkdtemp(prefix="aiotimely-spark-arrow-"))
    JSON_FOLDERS.clear()
    if args.source == "json":
        files = args.warm_up + args.batches   # every run (a fresh checkpoint) reads them from the first again
        for n in {args.rows, args.row_path_rows}:
            JSON_FOLDERS[n] = write_json(tmp / f"json-{n}", files, n)
    os.environ.setdefault("AIOTIMELY_SECRET", SECRET)
    from aiotimely.connectors.spark import local_session
    from aiotimely.connectors.spark_datasource import register

    spark = local_session("local[2]", workdir=str(tmp / "spark"), app="aiotimely-bench-arrow")
    if args.arrow_batch:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.arrow_batch))
    register(spark, secret=SECRET)
    register_discard(spark)
    kinds = ["noop", "discard", "arrow"] + (["tuples"] if args.tuples else []) + ["row path"]
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    try:
        for r in range(args.repeats):
            for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                checkpoint = str(tmp / f"ck-{kind.replace(' ', '-')}-{r}")
                if kind in ("noop", "discard"):
                    run = run_spark_only(spark, kind, args.rows, args.warm_up, args.batches, checkpoint)
                else:
                    n = args.row_path_rows if kind == "row path" else args.rows
                    run = run_aiotimely(spark, kind, n, args.warm_up, args.batches, checkpoint)
                samples[kind].append(run)
                print(f"{kind}: {run['rows_per_s']:,.0f} rows/s ({run['batch_seconds']} s per batch)", flush=True)
    finally:
        spark.stop()
    rates = {k: statistics.median(s["rows_per_s"] for s in v) for k, v in samples.items()}
    print(f"{args.source}, local[2], {args.rows:,} rows per batch ((c): {args.row_path_rows:,}), "
          f"{args.batches} batches after {args.warm_up}; median of {args.repeats}")
    print("\n".join(f"{NAMES[k]:46} {v:>12,.0f} rows/s" for k, v in rates.items()))
    b, a, c, d = rates["arrow"], rates["noop"], rates["row path"], rates["discard"]
    print(f"(b)/(a) = {b / a:.0%} (goal >= 80%); (b)/(c) = {b / c:.1f}x (goal >= 10x); "
          f"(a')/(a) = {d / a:.0%}; (b)/(a') = {b / d:.0%}")
    results = {"source": args.source, "rows_per_batch": args.rows, "row_path_rows_per_batch": args.row_path_rows,
               "batches": args.batches,
               "warm_up": args.warm_up, "repeats": args.repeats,
               "arrow_max_records_per_batch": args.arrow_batch or 10_000,
               "rows_per_s": rates, "runs": samples, "b_over_a": b / a, "b_over_c": b / c}
    if not args.quick:
        print(f"wrote {save('spark_arrow' if args.source == 'rate' else 'spark_arrow_json', results)}")
    return results


if __name__ == "__main__":
    main()
