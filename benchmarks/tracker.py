"""Microbenchmark: pointstamp updates per second through the progress tracker.

Graphs: a chain of 1,000 operators, and a random DAG of 1,000 operators (each
input fed by a random earlier operator; 10 sources). Workloads, per graph:

* ``advance``: a source moves its capability from t to t+1 (two updates), and the
  new frontier propagates to everything downstream — the work a tick costs;
* ``records``: a record at t+1 appears at a random input and is consumed later
  (one update each), dominated by the frontier where it lands — the common case,
  which should cost O(1) whatever the graph's size.

Each figure is the median of several repeats (min/max shown too). Run::

    python -m benchmarks.tracker            # full run, writes benchmarks/results/tracker.json
    python -m benchmarks.tracker --quick    # a smoke run: checks results, fast
"""

from __future__ import annotations

import platform
import random
import statistics
import time

from aiotimely.progress import Antichain, GraphBuilder, Source, Target, Tracker

from .common import command_line, save


def chain(n: int):
    builder = GraphBuilder(int, name=f"chain{n}")
    for i in range(1, n + 1):
        builder.add_node(i, 0 if i == 1 else 1, 1, name=f"op{i}")
        if i > 1:
            builder.add_edge(Source(i - 1, 0), Target(i, 0))
    return builder.build(), [1]


def random_dag(n: int, sources: int = 10, seed: int = 7):
    rng = random.Random(seed)
    builder = GraphBuilder(int, name=f"dag{n}")
    heads = []
    for i in range(1, n + 1):
        inputs = 0 if i <= sources else rng.choice((1, 1, 2))
        builder.add_node(i, inputs, 1, name=f"op{i}")
        if inputs == 0:
            heads.append(i)
        for port in range(inputs):
            builder.add_edge(Source(rng.randrange(1, i), 0), Target(i, port))
    return builder.build(), heads


def advance(graph, heads, steps: int) -> tuple[float, int, int]:
    """Sources take turns moving their capability forward; returns (seconds, updates, frontier changes)."""
    tracker = Tracker(graph)
    for h in heads:
        tracker.update(Source(h, 0), 0, 1)
    tracker.propagate_all()
    tracker.pushed()
    times = {h: 0 for h in heads}
    moved = 0
    start = time.perf_counter()
    for step in range(steps):
        h = heads[step % len(heads)]
        t = times[h]
        tracker.update(Source(h, 0), t + 1, 1)
        tracker.update(Source(h, 0), t, -1)
        times[h] = t + 1
        tracker.propagate_all()
        moved += len(tracker.pushed())
    elapsed = time.perf_counter() - start
    low, high = min(times.values()), max(times.values())
    for loc in graph.locations:  # every frontier lies between the slowest and the fastest source
        frontier = list(tracker.frontier(loc))
        assert len(frontier) <= 1 and all(low <= t <= high for t in frontier), (loc, frontier)
    if len(heads) == 1:
        assert tracker.frontier(graph.locations[-1]) == Antichain([high])
    return elapsed, 2 * steps, moved


def records(graph, heads, steps: int) -> tuple[float, int, int]:
    """Records appear at random inputs and are consumed, all above the frontier."""
    rng = random.Random(1)
    tracker = Tracker(graph)
    for h in heads:
        tracker.update(Source(h, 0), 0, 1)
    tracker.propagate_all()
    tracker.pushed()
    targets = [loc for loc in graph.locations if type(loc) is Target]
    picks = [rng.choice(targets) for _ in range(steps)]
    start = time.perf_counter()
    for step, target in enumerate(picks):
        tracker.update(target, 1 + step % 5, 1)
        tracker.propagate_all()
        tracker.update(target, 1 + step % 5, -1)
        tracker.propagate_all()
    elapsed = time.perf_counter() - start
    assert not tracker.pushed()  # nothing moved: all dominated
    return elapsed, 2 * steps, 0


def measure(fn, graph, heads, steps, repeats):
    runs = [fn(graph, heads, steps) for _ in range(repeats)]
    rates = sorted(updates / elapsed for elapsed, updates, _ in runs)
    moved = runs[0][2]
    return {
        "updates_per_s": {"min": rates[0], "median": statistics.median(rates), "max": rates[-1]},
        "us_per_step": 1e6 * statistics.median(elapsed for elapsed, _, _ in runs) / steps,
        "frontier_changes_per_step": moved / steps,
    }


def main(argv=None) -> dict:
    parser = command_line(__doc__, "small sizes, one repeat: a smoke run")
    parser.add_argument("--operators", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    n = 50 if args.quick else args.operators
    repeats = 1 if args.quick else args.repeats
    steps = {"advance": 20 if args.quick else 400, "records": 200 if args.quick else 50_000}

    results: dict = {"operators": n, "runs": {}}
    print(f"tracker microbenchmark: {n} operators, median of {repeats} (min..max); python {platform.python_version()}")
    print(f"{'graph':8} {'workload':9} {'updates/s':>12} {'(min..max)':>22} {'us/step':>9} "
          f"{'frontier changes/step':>22}")
    for gname, (graph, heads) in (("chain", chain(n)), ("dag", random_dag(n))):
        for wname, fn in (("advance", advance), ("records", records)):
            r = measure(fn, graph, heads, steps[wname], repeats)
            results["runs"][f"{gname}/{wname}"] = r
            u = r["updates_per_s"]
            print(f"{gname:8} {wname:9} {u['median']:12,.0f} {u['min']:10,.0f}..{u['max']:<10,.0f} "
                  f"{r['us_per_step']:9.1f} {r['frontier_changes_per_step']:22.1f}")
    if not args.quick:
        print(f"wrote {save('tracker', results)}")
    return results


if __name__ == "__main__":
    main()
