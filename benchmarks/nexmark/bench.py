"""Benchmark ``nexmark``: the NEXMark queries Q0-Q8 in plain Python, on the record API and on the columnar API.

The events come from :mod:`benchmarks.nexmark.generator` (Beam's proportions, 10,000 events/s of event time, so
1,000,000 events are 100 s), cut into batches of ``--batch`` events (default 10,000: 1 s of event time); the
windows are Beam's defaults (10 s; Q4 and Q5 slide every 5 s). Each figure is one process of its own (so its
peak RSS is its own), 1 worker: the events are made first (not timed; the reference gets them as tuples, the
record API as batches of tuples, the columnar API as Polars frames: each API's own input), then the query runs
``--repeats`` times; the median is reported, as events/s and as a ratio to the plain reference of the same run.
The columnar API is measured twice: with ``POLARS_MAX_THREADS=1`` (per core) and with Polars' default threads.
Every run's rows are checked against the reference's (an order-free checksum of them). Peak RSS is the
process's after its first timed run, before any rows are checked; "inputs" is after the events are made.

    python -m benchmarks nexmark [--quick] [--events N] [--queries 1,4,5,7] [--batch N] [--repeats 3]

``--quick`` runs 20,000 events through every query on 1 and 2 workers in this process and checks each API's
rows equal the reference's (nothing timed, nothing written).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

from ..common import ROOT, command_line, save
from .params import BEAM, TESTS, Params

QUERIES = tuple(range(9))
GOAL = (1, 4, 5, 7)
"""The queries the goal is about: columnar at least 5x the plain reference."""


def rss_mib() -> float:
    """This process's peak RSS so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def checksum(rows: Any) -> list[int]:
    """``[rows, sum of their hashes mod 2**64]``: equal for equal multisets of rows, whatever their order (with
    ``PYTHONHASHSEED`` fixed, as the measuring processes have it)."""
    count, total = 0, 0
    for row in rows:
        count += 1
        total += hash(row)
    return [count, total % (1 << 64)]


def measure(api: str, query: int, events: int, batch: int, repeats: int, params: Params) -> dict[str, Any]:
    """In this process: make the events, run ``query`` on ``api`` ``repeats`` times; seconds, rows, memory."""
    import aiotimely as at

    from . import reference
    from .generator import generate
    from .run import columnar_streams, record_build

    made = time.perf_counter()
    ev = generate(events, batch=batch)
    if api == "reference":
        ev.record_batches()
    elif api == "records":
        ev.records("persons"), ev.records("auctions"), ev.records("bids")
    else:
        ev.frame("persons"), ev.frame("auctions"), ev.frame("bids")
    made = time.perf_counter() - made
    loop = "uvloop" if _have("uvloop") else "asyncio"

    def once(ev: Any) -> tuple[float, Callable[[], list[Any]]]:
        """One run of the query over ``ev``: its seconds (the run only), and a function giving its rows as tuples
        (called after the peak RSS of the run is read: the columnar rows as Python tuples are the check's)."""
        if api == "reference":
            batches = ev.record_batches()
            start = time.perf_counter()
            rows = reference.QUERIES[query](batches, params)
            return time.perf_counter() - start, lambda: rows
        if api == "records":
            got: list[Any] = []
            build = record_build(query, ev, params)

            def on_worker(worker: at.Worker) -> None:
                worker.dataflow(lambda scope: build(scope).inspect_batch(lambda _t, recs: got.extend(recs)))

            start = time.perf_counter()
            at.execute(on_worker, loop=loop)
            return time.perf_counter() - start, lambda: got
        frames: list[Any] = []

        def on_worker_columnar(worker: at.Worker) -> None:
            def make(scope: Any) -> None:
                for stream in columnar_streams(query, scope, ev, params):
                    stream.inspect_batch(lambda _t, df: frames.append(df))
            worker.dataflow(make)

        start = time.perf_counter()
        at.execute(on_worker_columnar, loop=loop)
        seconds = time.perf_counter() - start
        return seconds, lambda: [row for frame in frames for row in frame.rows()]

    once(generate(20_000, batch=min(batch, 2_000)))     # warm up: imports, Polars' first plans, the event loop
    before = rss_mib()
    seconds, sums, peak = [], [], 0.0
    for _ in range(repeats):
        took, rows = once(ev)
        seconds.append(took)
        if len(seconds) == 1:   # (ru_maxrss only grows: read it before any check of rows)
            peak = rss_mib()
        sums.append(checksum(rows()))
        del rows
    assert all(s == sums[0] for s in sums), f"{api} Q{query}: its repeats gave different rows"
    return {"seconds": seconds, "checksum": sums[0], "rss_inputs_mib": round(before, 1),
            "rss_peak_mib": round(peak, 1), "make_s": round(made, 2)}


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def run_child(api: str, query: int, args: Any, threads: str | None) -> dict[str, Any]:
    """:func:`measure` in a process of its own (``threads``: ``POLARS_MAX_THREADS``, ``None``: Polars' default)."""
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    if threads is not None:
        env["POLARS_MAX_THREADS"] = threads
    done = subprocess.run([sys.executable, "-m", "benchmarks.nexmark.bench", "--one", api, str(query),
                           "--events", str(args.events), "--batch", str(args.batch), "--repeats", str(args.repeats)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"nexmark {api} Q{query} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


RUNS = (("reference", "reference", None), ("records", "records", None),
        ("columnar 1 thread", "columnar", "1"), ("columnar default threads", "columnar", None))


def quick(events: int = 20_000) -> dict[str, Any]:
    """Every query on every API, 1 and 2 workers, in this process: rows equal to the reference's."""
    from aiotimely.testing import run_dataflow

    from .generator import generate
    from .run import columnar_build, expected, record_build, rows

    ev = generate(events, batch=1000)
    checked: dict[str, Any] = {}
    for query in QUERIES:
        want = expected(query, ev, TESTS)
        assert want or query == 2, f"Q{query} gives no rows on {events} events: the check would be empty"
        for workers in (1, 2):
            for api, build in (("records", record_build), ("columnar", columnar_build)):
                got = rows(run_dataflow(build(query, ev, TESTS), workers=workers))
                assert got == want, f"Q{query} on the {api} API, {workers} worker(s): {len(got)} rows, not the " \
                                    f"reference's {len(want)}"
        checked[f"Q{query}"] = len(want)
    print(f"nexmark --quick: {events:,} events; every query's rows equal the reference's on 1 and 2 workers, both "
          f"APIs: {checked}")
    return {"events": events, "rows": checked}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    parser = command_line(__doc__, "20,000 events, every query, both APIs, 1 and 2 workers: results checked only")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="events per batch (and per Arrow batch)")
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", nargs=2, metavar=("API", "QUERY"), help=argparse_hidden())
    args = parser.parse_args(argv)
    if args.one:
        api, query = args.one[0], int(args.one[1])
        print(json.dumps(measure(api, query, args.events, args.batch, args.repeats, BEAM)))
        return {}
    if args.quick:
        return quick()
    queries = [int(q) for q in args.queries.split(",")]
    results: dict[str, Any] = {"events": args.events, "batch": args.batch, "repeats": args.repeats,
                               "windows_ms": {"size": BEAM.size, "period": BEAM.period}, "queries": {}}
    lines = [f"nexmark: {args.events:,} events ({args.events // 10_000} s of event time), batches of {args.batch:,}, "
             f"1 worker; median of {args.repeats}; events/s and x the plain reference",
             f"{'':5} {'run':26} {'median s':>9} {'M events/s':>11} {'x ref':>7} {'peak RSS MiB':>13} "
             f"{'inputs MiB':>11}"]
    for query in queries:
        figures: dict[str, Any] = {}
        for label, api, threads in RUNS:
            figures[label] = run_child(api, query, args, threads)
        want = figures["reference"]["checksum"]
        for label, fig in figures.items():
            assert fig["checksum"] == want, f"Q{query} {label}: rows differ from the reference's ({fig['checksum']} " \
                                            f"!= {want})"
            fig["median_s"] = statistics.median(fig["seconds"])
            fig["events_per_s"] = args.events / fig["median_s"]
        base = figures["reference"]["median_s"]
        for label, fig in figures.items():
            fig["x_reference"] = base / fig["median_s"]
            lines.append(f"Q{query:<4} {label:26} {fig['median_s']:9.3f} {fig['events_per_s'] / 1e6:11.2f} "
                         f"{fig['x_reference']:6.2f}x {fig['rss_peak_mib']:13.0f} {fig['rss_inputs_mib']:11.0f}")
        results["queries"][f"Q{query}"] = figures
        print("\n".join(lines[-len(figures):]), flush=True)
    print("\n".join(lines))
    print(f"wrote {save('nexmark', results)}")
    return results


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
