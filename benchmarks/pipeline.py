"""Benchmark ``pipeline``: 2,000,000 ints through map(+1) -> filter(even) -> sink.

Side by side in one run: aiotimely (1 worker; asyncio and uvloop), bytewax 0.21.1
(1,000 ints per batch, and 1 per batch), and the plain-Python loop calling the same
two functions. Each timing is the in-process time of the work (start-up excluded),
the median of several repeats; every variant's count and sum are checked equal.

    python -m benchmarks.pipeline [--quick] [--repeats 5]
"""

from __future__ import annotations

from typing import Any

import aiotimely as at

from .common import command_line, have, in_process_seconds, missing, repeat, run_peer, save, table, timed

N = 2_000_000


def _inc(x: int) -> int:
    return x + 1


def _even(x: int) -> bool:
    return x % 2 == 0


def aiotimely_pipeline(n: int, loop: str, batch: int = 1000, up_front: bool = False) -> tuple[float, tuple[int, int]]:
    """The ints come from a source that makes each batch when there is room for it (as bytewax's
    does, of ``BATCH_SIZE`` = 1,024 ints), or, ``up_front``, every batch of ``batch`` ints is sent into an
    ``InputHandle`` before the dataflow runs (then all ``n`` ints are allocated and live at once, which
    costs about a fifth more at 2,000,000)."""
    def build(worker: at.Worker) -> list[int]:
        total = [0, 0]

        def sink(_time: Any, xs: list) -> None:
            total[0] += len(xs)
            total[1] += sum(xs)

        if up_front:
            inp = at.InputHandle()
            worker.dataflow(lambda s: inp.to_stream(s).map(_inc).filter(_even).inspect_batch(sink))
            for lo in range(0, n, batch):
                inp.send_batch(range(lo, min(n, lo + batch)))
        else:
            worker.dataflow(lambda s: at.to_stream(range(n), s).map(_inc).filter(_even).inspect_batch(sink))
        return total

    seconds, results = timed(lambda: at.execute(build, loop=loop))
    return seconds, tuple(results[0])


def plain_loop(n: int) -> tuple[float, tuple[int, int]]:
    def work() -> tuple[int, int]:
        count = total = 0
        for x in range(n):
            y = _inc(x)
            if _even(y):
                count += 1
                total += y
        return count, total

    return timed(work)


def bytewax_pipeline(batch: int) -> tuple[float, tuple[int, int]]:
    records = run_peer(["-m", "bytewax.run", f"benchmarks.peers.bytewax_flows:pipeline({batch})"])
    return in_process_seconds(records), (sum(r["items"] for r in records), sum(r["sum"] for r in records))


def main(argv: list[str] | None = None) -> dict:
    parser = command_line(__doc__, "200,000 ints, one repeat, no bytewax batch 1")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n = 200_000 if args.quick else N
    repeats = 1 if args.quick else args.repeats
    expected = (n // 2, sum(y for y in range(1, n + 1) if y % 2 == 0))

    rows: list[tuple[str, dict, str]] = []
    results: dict[str, Any] = {"n": n, "runs": {}}

    def record(name: str, fn, note: str = "") -> None:
        s, outcome = repeat(fn, repeats)
        assert tuple(outcome) == expected, f"{name}: {outcome} != {expected}"
        rows.append((name, s, note))
        results["runs"][name] = s

    record("plain Python loop", lambda: plain_loop(n), "the floor: the two functions called per int")
    record("aiotimely 1 worker (asyncio)", lambda: aiotimely_pipeline(n, "asyncio"), "to_stream(range(n))")
    if have("uvloop"):
        record("aiotimely 1 worker (uvloop)", lambda: aiotimely_pipeline(n, "uvloop"), "to_stream(range(n))")
    record("aiotimely, all sent up front", lambda: aiotimely_pipeline(n, "asyncio", up_front=True),
           "InputHandle.send_batch x 2,000, then run (asyncio)")
    if have("bytewax") and n == N:
        record("bytewax 0.21.1, batch 1000", lambda: bytewax_pipeline(1000))
        if not args.quick:
            s, outcome = repeat(lambda: bytewax_pipeline(1), 1)
            assert tuple(outcome) == expected
            rows.append(("bytewax 0.21.1, batch 1", s, "one run"))
            results["runs"]["bytewax 0.21.1, batch 1"] = s
    else:
        rows.append(("bytewax 0.21.1", {}, missing("bytewax") or "quick mode"))
    baseline = "bytewax 0.21.1, batch 1000" if "bytewax 0.21.1, batch 1000" in results["runs"] else "plain Python loop"
    print(table(f"pipeline: {n:,} ints, map(+1) -> filter(even) -> sink; median of {repeats}", rows, n,
                "ints/s", baseline))
    if not args.quick:
        print(f"wrote {save('pipeline', results)}")
    return results


if __name__ == "__main__":
    main()
