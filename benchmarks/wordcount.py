"""Benchmark ``wordcount``: the 2,000,000-word corpus of :mod:`benchmarks.corpus` (made on first use).

Side by side in one run: aiotimely (the book's per-word ``unary_frontier`` word
count, and a batch-level one that counts each batch with ``Counter`` and emits the
final counts when the input completes, as bytewax's ``count_final`` does) on 1 and
2 workers in one process and on 2 processes of 1 worker; bytewax 0.21.1 ``count_final`` on 1 and 2 workers; and
``collections.Counter`` over the lines. Each timing is the in-process time of the
work, median of several repeats; every variant's counts are checked equal.

    python -m benchmarks.wordcount [--quick] [--repeats 3]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import aiotimely as at

from .common import (ROOT, command_line, have, in_process_seconds, missing, repeat, run_peer, run_processes, save,
                     table, timed)
from .corpus import corpus

sys.path.insert(0, str(ROOT / "examples"))
from wordcount import wordcount as book_wordcount  # noqa: E402  (the example is the book's operator)

def final_wordcount(lines: at.Stream) -> at.Stream:
    """Counts per time with ``Counter`` on each worker, exchanged by word and summed: final counts per time."""
    local = lines.accumulate(None, _count_lines)
    pairs = local.flat_map(lambda counts: counts.items())
    return pairs.exchange(lambda kv: kv[0]).accumulate(None, _merge).flat_map(lambda counts: counts.items())


def _count_lines(acc: Counter | None, lines: list) -> Counter:
    acc = acc if acc is not None else Counter()
    for line in lines:
        acc.update(line.split())
    return acc


def _merge(acc: Counter | None, pairs: list) -> Counter:
    acc = acc if acc is not None else Counter()
    for word, n in pairs:
        acc[word] += n
    return acc


def wordcount_build(path: Path, variant: str):
    """The build function: each worker counts its share of the corpus's lines."""
    def build(worker: at.Worker) -> dict[str, int]:
        with open(path) as f:
            lines = f.readlines()[worker.index::worker.peers]
        result: dict[str, int] = {}
        inp = at.InputHandle()
        count = book_wordcount if variant == "book" else final_wordcount
        worker.dataflow(lambda s: count(inp.to_stream(s)).inspect_batch(lambda _t, wcs: result.update(wcs)))
        inp.send_batch(lines)
        return result

    return build


def aiotimely_run(path: Path, workers: int, variant: str) -> tuple[float, dict[str, int]]:
    build = wordcount_build(path, variant)
    seconds, results = timed(lambda: at.execute(build, workers=workers, loop="uvloop" if have("uvloop") else "asyncio"))
    merged: dict[str, int] = {}
    for r in results:
        merged.update(r)
    return seconds, merged


def aiotimely_processes(path: Path, processes: int, variant: str) -> tuple[float, dict[str, int]]:
    """Each process prints its counts and its in-process time; the run takes as long as the slowest."""
    reports = run_processes("benchmarks.wordcount", [str(path), variant], processes)
    merged: dict[str, int] = {}
    for report in reports:
        merged.update(report["counts"])
    return max(report["seconds"] for report in reports), merged


def _worker_main(argv: list[str]) -> None:
    path, variant, *timely = argv
    build = wordcount_build(Path(path), variant)
    seconds, results = timed(lambda: at.execute_from_args(build, timely))
    merged: dict[str, int] = {}
    for r in results:
        merged.update(r)
    print(json.dumps({"seconds": seconds, "counts": merged}))


def counter_run(path: Path) -> tuple[float, dict[str, int]]:
    def work() -> dict[str, int]:
        counts: Counter = Counter()
        with open(path) as f:
            for line in f:
                counts.update(line.split())
        return dict(counts)

    return timed(work)


def bytewax_run(path: Path, workers: int, processes: int = 1) -> tuple[float, dict[str, Any]]:
    flow = f"benchmarks.peers.bytewax_flows:wordcount({str(path)!r})"
    if processes > 1:
        args = ["-m", "bytewax.testing", flow, "-p", str(processes)]
    else:
        args = ["-m", "bytewax.run", flow] + (["-w", str(workers)] if workers > 1 else [])
    records = run_peer(args)
    return in_process_seconds(records), {"distinct": sum(r["items"] for r in records),
                                         "total": sum(r["sum"] for r in records)}


def summary(counts: dict[str, int]) -> dict[str, Any]:
    return {"distinct": len(counts), "total": sum(counts.values())}


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        _worker_main(argv[1:])
        return {}
    parser = command_line(__doc__, "the first 100 lines, one repeat, no bytewax")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    path = corpus(100) if args.quick else corpus()
    repeats = 1 if args.quick else args.repeats
    _, expected = counter_run(path)
    words = sum(expected.values())

    rows: list[tuple[str, dict, str]] = []
    results: dict[str, Any] = {"words": words, "runs": {}}

    def record(name: str, fn, check, note: str = "") -> None:
        s, outcome = repeat(fn, repeats)
        assert check(outcome), f"{name}: wrong counts {summary(outcome) if isinstance(outcome, dict) else outcome}"
        rows.append((name, s, note))
        results["runs"][name] = s

    exact = lambda counts: counts == expected  # noqa: E731
    record("collections.Counter", lambda: counter_run(path), exact, "the floor: one process, no dataflow")
    for workers in (1, 2):
        record(f"aiotimely final counts, {workers} worker(s)", lambda w=workers: aiotimely_run(path, w, "final"), exact,
               "Counter per time and worker, exchanged, summed")
        record(f"aiotimely book operator, {workers} worker(s)", lambda w=workers: aiotimely_run(path, w, "book"),
               exact, "one update per word")
    record("aiotimely final counts, 2 processes", lambda: aiotimely_processes(path, 2, "final"), exact,
           "1 worker each, over TCP")
    record("aiotimely book operator, 2 processes", lambda: aiotimely_processes(path, 2, "book"), exact,
           "1 worker each, over TCP")
    if have("bytewax") and not args.quick:
        for workers in (1, 2):
            record(f"bytewax count_final, {workers} worker(s)", lambda w=workers: bytewax_run(path, w),
                   lambda o: o == summary(expected))
        record("bytewax count_final, 2 processes", lambda: bytewax_run(path, 1, processes=2),
               lambda o: o == summary(expected), "bytewax.testing -p 2")
    else:
        rows.append(("bytewax 0.21.1", {}, "quick mode" if args.quick else missing("bytewax") or ""))
    baseline = "bytewax count_final, 1 worker(s)"
    if baseline not in results["runs"]:
        baseline = "collections.Counter"
    print(table(f"wordcount: {words:,} words; median of {repeats}", rows, words, "words/s", baseline))
    if not args.quick:
        print(f"wrote {save('wordcount', results)}")
    return results


if __name__ == "__main__":
    main()
