"""Benchmark ``columnar-exchange``: records per second from one process to another on a columnar stream, against
the record path's exchange (:mod:`benchmarks.exchange`), in one run.

2 processes x 1 worker. The records are those of :mod:`benchmarks.exchange` (the words of the corpus's first
line, each with a number: ``(str, int)``), 2,000,000 of them; on the columnar stream they are a frame
``word: String, n: Int64`` cut into batches of ``--batch`` rows (100,000 by default; ``--batch 1000`` is the
record path's batch size), with ``n`` odd so that ``exchange("n")`` routes every row to worker 1 (the bulk key
hashes each batch, finds one route, and sends the batch whole as Arrow IPC). Timed on worker 0 from the first
batch to the dataflow's completion (which needs worker 1's acknowledgement), as the record path's is; worker 1
checks the count. Peak RSS: the larger process's. ``POLARS_MAX_THREADS=1`` and Polars' default both, unless
``--threads`` says one.

    python -m benchmarks columnar-exchange [--quick] [--repeats 3] [--batch ROWS] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from .colrun import peak_mib, ratio_rows, run_cluster, warm_up
from .common import command_line, save
from .peers.tcp_raw import records as frame_records

RECORDS = 2_000_000
BATCH = 100_000


async def build(worker: Any) -> None:
    import polars as pl

    import aiotimely as at

    n, batch = int(os.environ["EXCHANGE_RECORDS"]), int(os.environ["EXCHANGE_BATCH"])
    words = [w for w, _ in frame_records()]
    frame = pl.DataFrame({"word": (words * (n // len(words) + 1))[:n], "n": pl.int_range(0, n, eager=True) * 2 + 1})
    received = [0]
    warm_up()
    mine = [frame.slice(lo, batch) for lo in range(0, n, batch)] if worker.index == 0 else []
    worker.dataflow(lambda s: at.from_arrow(s, mine, schema=frame.schema).exchange("n")
                    .inspect_batch(lambda _t, df: received.__setitem__(0, received[0] + df.height)))
    start = time.perf_counter()
    await worker.step_until_done()
    elapsed = time.perf_counter() - start
    if worker.index == 1:
        assert received[0] == n, received
    print(json.dumps({"seconds": elapsed, "records": n, "peak_mib": peak_mib()}), flush=True)


def record_worker(argv: list[str]) -> None:
    """A process of the record path's run (benchmarks.exchange's dataflow), with its peak memory."""
    import io
    from contextlib import redirect_stdout

    import aiotimely as at

    from . import exchange

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        at.execute_from_args(exchange.build, argv)
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"seconds": 0.0}
    print(json.dumps({**report, "peak_mib": peak_mib()}), flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        import aiotimely as at
        at.execute_from_args(build, argv[1:])
        return {}
    if argv[:1] == ["--record-worker"]:
        record_worker(argv[1:])
        return {}
    parser = command_line(__doc__, "100,000 records, one repeat, both thread settings")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--threads", type=int, choices=(0, 1), action="append")
    parser.add_argument("--records", type=int, default=RECORDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = 100_000 if args.quick else args.records
    batch = min(args.batch, 10_000) if args.quick else args.batch
    repeats = 1 if args.quick else args.repeats
    threads = args.threads or [1, 0]
    module = "benchmarks.columnar_exchange"
    results: dict[str, Any] = {"records": n, "batch": batch, "repeats": repeats, "runs": {}}

    def measure(name: str, env: dict[str, str], record_path: bool = False) -> None:
        samples, peaks = [], []
        for _ in range(repeats):
            reports = run_cluster(module, [], 2, {**env, "EXCHANGE_RECORDS": str(n), "EXCHANGE_BATCH": str(batch)},
                                  worker_flag="--record-worker" if record_path else "--worker")
            samples.append(reports[0]["seconds"])
            peaks.append(max(r["peak_mib"] for r in reports))
        results["runs"][name] = {"seconds": sorted(samples), "median": sorted(samples)[len(samples) // 2],
                                 "peak_mib": max(peaks)}

    measure("record path, 2 processes (1,000-record batches)", {}, record_path=True)
    for t in threads:
        label = "1 thread" if t else "default threads"
        measure(f"columnar, 2 processes ({label})", {"POLARS_MAX_THREADS": str(t)} if t else {})
    print(ratio_rows(f"columnar exchange: {n:,} (str, int) records from process 0 to process 1, batches of "
                     f"{batch:,} rows; median of {repeats} (peak RSS: the larger process)", results["runs"], n,
                     "records/s", [("columnar ({t}) vs record path", "record path, 2 processes (1,000-record batches)",
                                    "columnar, 2 processes ({t})")], threads))
    if not args.quick:
        print(f"wrote {save('columnar_exchange', results)}")
    return results


if __name__ == "__main__":
    main()
