"""Benchmark ``columnar-windows``: the windows workload (:mod:`benchmarks.win_events`: 2,000,000 events, 1,000 keys,
10 s tumbling count+sum per key, 100 ms lateness) on a columnar stream, against the plain Python loop that closes
windows and the record path's one-line window, in one run.

The events are a Polars frame (``k: String, ts: Int64, v: Int64``), made from the same list of tuples before
the clock starts (as data that comes in columns: Arrow from Spark, Parquet, Kafka decoded per batch; the
conversion's own time is reported beside it). Batches of ``--batch`` rows (100,000 by default) enter at the
index of their first event, so the input frontier follows event time as on the record path; the dataflow is

    at.from_arrow(scope, frames, times=...).window(at.Tumbling(10_000), at.Agg.count(), at.Agg.sum("v"),
                                                   key="k", time="ts", lateness=100)

on 1 worker, and on 2 processes of 1 worker (each sends every other batch; the window exchanges by ``k``).
Its results stay columns; every run's table is checked equal to the plain loop's (same checksum), outside the
timing. Each figure has the peak RSS of its process (the largest of the processes) beside it. The runs are in
processes of their own (``POLARS_MAX_THREADS`` is read when Polars is imported): ``--threads 1`` for per-core
figures, ``--threads 0`` for Polars' default; the default runs both.

    python -m benchmarks columnar-windows [--quick] [--repeats 3] [--events N] [--batch ROWS] [--threads 1]
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from .common import command_line, save
from .colrun import finish, peak_mib, warm_up, ratio_rows, run_child, run_cluster
from .win_events import LATENESS_MS, WINDOW_MS, agg_stream, gen_events, table_checksum

BATCH = 100_000


def events_frame(n: int) -> Any:
    import polars as pl

    events = gen_events(n)
    return pl.DataFrame(events, schema={"k": pl.String, "ts": pl.Int64, "v": pl.Int64}, orient="row")


def columnar_checksum(frames: list[Any]) -> dict[str, Any]:
    import polars as pl

    frame = pl.concat(frames) if frames else pl.DataFrame()
    table = {(k, w): (c, s) for k, w, c, s in frame.select("k", "window_start", "count", "v_sum").iter_rows()}
    return table_checksum(table)


def build_windows(frame: Any, batch: int) -> Any:
    import aiotimely as at

    n = frame.height

    def build(worker: at.Worker) -> tuple[float, list[Any]]:
        warm_up()
        started = time.perf_counter()          # (once every process is connected: start-up left out)
        out: list[Any] = []
        starts = list(range(worker.index * batch, n, worker.peers * batch))

        def flow(scope: Any) -> None:
            frames = (frame.slice(lo, batch) for lo in starts)
            (at.from_arrow(scope, frames, times=starts, schema=frame.schema)
             .window(at.Tumbling(WINDOW_MS), at.Agg.count(), at.Agg.sum("v"), key="k", time="ts",
                     lateness=LATENESS_MS)
             .inspect_batch(lambda _t, df: out.append((time.perf_counter(), df))))

        worker.dataflow(flow)
        return started, out

    return build


def _child(argv: list[str]) -> None:
    """One measurement in this process: ``plain N``, ``record N``, ``columnar N BATCH`` or ``convert N``; prints
    a JSON line with seconds, checksum and peak memory."""
    import aiotimely as at

    what, n = argv[0], int(argv[1])
    if what == "plain":
        events = gen_events(n)
        start = time.perf_counter()
        table, _late = agg_stream(events)
        seconds = time.perf_counter() - start
        checksum = table_checksum(table)
    elif what == "record":
        from .windows import aiotimely_run
        seconds, checksum = aiotimely_run(n, 1)
    elif what == "convert":
        import polars as pl

        events = gen_events(n)
        start = time.perf_counter()
        frame = pl.DataFrame(events, schema={"k": pl.String, "ts": pl.Int64, "v": pl.Int64}, orient="row")
        seconds = time.perf_counter() - start
        checksum = {"rows": frame.height}
    else:
        frame = events_frame(n)
        build = build_windows(frame, int(argv[2]))
        loop = "uvloop" if _have("uvloop") else "asyncio"
        results = at.execute(build, workers=1, loop=loop)
        seconds = finish(results)
        checksum = columnar_checksum([f for _, r in results for _, f in r])
    print(json.dumps({"seconds": seconds, "checksum": checksum, "peak_mib": peak_mib()}))


def _worker(argv: list[str]) -> None:
    """A process of the 2-process run: ``N BATCH`` then the cluster's arguments."""
    import aiotimely as at

    n, batch, *timely = argv
    frame = events_frame(int(n))
    build = build_windows(frame, int(batch))
    results = at.execute_from_args(build, timely)
    seconds = finish(results)
    frames = [f for _, r in results for _, f in r]
    rows = [list(r) for f in frames for r in f.select("k", "window_start", "count", "v_sum").iter_rows()]
    print(json.dumps({"seconds": seconds, "rows": rows, "peak_mib": peak_mib()}))


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1:])
        return {}
    if argv[:1] == ["--worker"]:
        _worker(argv[1:])
        return {}
    parser = command_line(__doc__, "50,000 events, one repeat, both thread settings: checks the tables only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--threads", type=int, choices=(0, 1), action="append",
                        help="POLARS_MAX_THREADS: 1 (per core) or 0 (Polars' default); by default both")
    args = parser.parse_args(argv)
    n = 50_000 if args.quick else args.events
    batch = min(args.batch, 10_000) if args.quick else args.batch
    repeats = 1 if args.quick else args.repeats
    threads = args.threads or [1, 0]
    expected = table_checksum(agg_stream(gen_events(n))[0])
    module = "benchmarks.columnar_windows"
    results: dict[str, Any] = {"events": n, "batch": batch, "repeats": repeats, "runs": {}}

    def measure(name: str, child: list[str], env: dict[str, str] | None = None, cluster: bool = False) -> None:
        samples, peaks = [], []
        for _ in range(repeats):
            if cluster:
                reports = run_cluster(module, [str(n), str(batch)], 2, env)
                table = {(k, w): (c, s) for r in reports for k, w, c, s in r["rows"]}
                checksum, seconds = table_checksum(table), max(r["seconds"] for r in reports)
                peak = max(r["peak_mib"] for r in reports)
            else:
                report = run_child(module, child, env)
                checksum, seconds, peak = report["checksum"], report["seconds"], report["peak_mib"]
            if name != "list -> Polars frame (conversion)":
                assert checksum == expected, f"{name}: its table differs: {checksum} != {expected}"
            samples.append(seconds)
            peaks.append(peak)
        results["runs"][name] = {"seconds": sorted(samples), "median": sorted(samples)[len(samples) // 2],
                                 "peak_mib": max(peaks)}

    measure("plain Python, closing windows", ["plain", str(n)])
    measure("record path, 1 worker", ["record", str(n)])
    measure("list -> Polars frame (conversion)", ["convert", str(n)])
    for t in threads:
        env = {"POLARS_MAX_THREADS": str(t)} if t else {}
        label = "1 thread" if t else "default threads"
        measure(f"columnar, 1 worker ({label})", ["columnar", str(n), str(batch)], env)
        measure(f"columnar, 2 processes ({label})", [], env, cluster=True)
    print(ratio_rows(f"columnar windows: {n:,} events, 10 s tumbling count+sum per key, batches of {batch:,} rows; "
                     f"median of {repeats} (peak RSS: the largest process)", results["runs"], n, "events/s",
                     [("columnar, 1 worker ({t}) vs plain loop", "plain Python, closing windows",
                       "columnar, 1 worker ({t})"),
                      ("columnar, 1 worker ({t}) vs record path", "record path, 1 worker", "columnar, 1 worker ({t})"),
                      ("columnar, 2 processes vs 1 worker ({t})", "columnar, 1 worker ({t})",
                       "columnar, 2 processes ({t})")], threads))
    results["cpus"] = os.cpu_count()
    if not args.quick:
        print(f"wrote {save('columnar_windows', results)}")
    return results


if __name__ == "__main__":
    main()
