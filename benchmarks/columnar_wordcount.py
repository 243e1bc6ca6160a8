"""Benchmark ``columnar-wordcount``: the 2,000,000-word Zipf corpus (:mod:`benchmarks.corpus`) counted on a columnar
stream, against ``collections.Counter`` over the lines and the record path's batch-level count, in one run.

Each timing starts before the corpus file is read (as Counter's does) and ends with the final counts: the lines
become one-column frames of ``--batch`` lines (100 lines, 100,000 words, by default), and the dataflow is

    at.from_arrow(scope, frames)
      .map_batches(lambda df: df.select(pl.col("line").str.split(" ").alias("word")).explode("word")
                                .group_by("word").len("n"))          # a combiner: each batch's counts
      .reduce(pl.col("n").sum(), key="word")                         # exchanged by word, summed at completion

on 1 worker and on 2 processes of 1 worker (each reads every other line, as the record path's does). The counts
are checked equal to Counter's, outside the timing; the peak RSS of each run's largest process is beside it.
``--threads 1`` gives per-core figures (``POLARS_MAX_THREADS=1``), ``--threads 0`` Polars' default; by default
both.

    python -m benchmarks columnar-wordcount [--quick] [--repeats 3] [--batch LINES] [--threads 1]
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .colrun import finish, peak_mib, warm_up, ratio_rows, run_child, run_cluster
from .common import command_line, save
from .corpus import corpus

BATCH_LINES = 100


def build_count(path: Path, batch: int) -> Any:
    import polars as pl

    import aiotimely as at

    def combine(df: pl.DataFrame) -> pl.DataFrame:
        return df.select(pl.col("line").str.split(" ").alias("word")).explode("word").group_by("word").len("n")

    def build(worker: at.Worker) -> tuple[float, list[Any]]:
        warm_up()
        started = time.perf_counter()        # (once every process is connected: start-up left out)
        with open(path) as f:
            lines = pl.DataFrame({"line": f.read().splitlines()[worker.index::worker.peers]})
        out: list[Any] = []
        worker.dataflow(lambda scope: at.from_arrow(scope, lines, rows=batch)
                        .map_batches(combine, schema={"word": pl.String, "n": pl.UInt32}, name="Combine")
                        .reduce(pl.col("n").sum(), key="word")
                        .inspect_batch(lambda _t, df: out.append((time.perf_counter(), df))))
        return started, out

    return build


def counts_of(frames: list[Any]) -> dict[str, int]:
    return {w: n for f in frames for w, n in f.iter_rows()}


def counter_counts(path: Path) -> dict[str, int]:
    counts: Counter[str] = Counter()
    with open(path) as f:
        for line in f:
            counts.update(line.split())
    return dict(counts)


def _child(argv: list[str]) -> None:
    import aiotimely as at

    what, path = argv[0], Path(argv[1])
    if what == "counter":
        start = time.perf_counter()
        counts = counter_counts(path)
        seconds = time.perf_counter() - start
    else:
        results = at.execute(build_count(path, int(argv[2])), workers=1)
        seconds = finish(results)
        counts = counts_of([f for _, r in results for _, f in r])
    print(json.dumps({"seconds": seconds, "counts": counts, "peak_mib": peak_mib()}))


def _worker(argv: list[str]) -> None:
    import aiotimely as at

    path, batch, *timely = argv
    results = at.execute_from_args(build_count(Path(path), int(batch)), timely)
    seconds = finish(results)
    counts = counts_of([f for _, r in results for _, f in r])
    print(json.dumps({"seconds": seconds, "counts": counts, "peak_mib": peak_mib()}))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1:])
        return {}
    if argv[:1] == ["--worker"]:
        _worker(argv[1:])
        return {}
    parser = command_line(__doc__, "the first 100 lines, one repeat, both thread settings: checks the counts only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=BATCH_LINES)
    parser.add_argument("--threads", type=int, choices=(0, 1), action="append")
    args = parser.parse_args(argv)
    path = corpus(100) if args.quick else corpus()
    batch = 10 if args.quick else args.batch
    repeats = 1 if args.quick else args.repeats
    threads = args.threads or [1, 0]
    expected = counter_counts(path)
    words = sum(expected.values())
    module = "benchmarks.columnar_wordcount"
    results: dict[str, Any] = {"words": words, "batch_lines": batch, "repeats": repeats, "runs": {}}

    def measure(name: str, child: list[str], env: dict[str, str] | None = None, cluster: bool = False) -> None:
        samples, peaks = [], []
        for _ in range(repeats):
            if cluster:
                reports = run_cluster(module, [str(path), str(batch)], 2, env)
                counts = {w: n for r in reports for w, n in r["counts"].items()}
                seconds, peak = max(r["seconds"] for r in reports), max(r["peak_mib"] for r in reports)
            else:
                report = run_child(module, child, env)
                counts, seconds, peak = report["counts"], report["seconds"], report["peak_mib"]
            assert counts == expected, f"{name}: wrong counts ({len(counts)} words, {sum(counts.values())} in all)"
            samples.append(seconds)
            peaks.append(peak)
        results["runs"][name] = {"seconds": sorted(samples), "median": sorted(samples)[len(samples) // 2],
                                 "peak_mib": max(peaks)}

    measure("collections.Counter", ["counter", str(path)])
    for t in threads:
        env = {"POLARS_MAX_THREADS": str(t)} if t else {}
        label = "1 thread" if t else "default threads"
        measure(f"columnar, 1 worker ({label})", ["columnar", str(path), str(batch)], env)
        measure(f"columnar, 2 processes ({label})", [], env, cluster=True)
    print(ratio_rows(f"columnar wordcount: {words:,} words, batches of {batch} lines; median of {repeats} "
                     "(peak RSS: the largest process)", results["runs"], words, "words/s",
                     [("columnar, 1 worker ({t}) vs Counter", "collections.Counter", "columnar, 1 worker ({t})"),
                      ("columnar, 2 processes vs 1 worker ({t})", "columnar, 1 worker ({t})",
                       "columnar, 2 processes ({t})")], threads))
    results["cpus"] = os.cpu_count()
    if not args.quick:
        print(f"wrote {save('columnar_wordcount', results)}")
    return results


if __name__ == "__main__":
    main()
