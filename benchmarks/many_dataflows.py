"""Benchmark ``many-dataflows`` (the "speeding up timely 100x" post): progress cost in big, mostly idle dataflows.

D dataflows, each ``INPUT -> REGION { ARRANGE -> FILTER x K } -> PROBE``, on one
worker. ARRANGE is a stateful operator that holds a capability for every time it
has data until its input frontier passes that time; the filters keep everything.
Each step sends one record into one input (round robin), advances every input by
one, and steps until every probe has caught up.

With ARRANGE's frontier interest ``ALWAYS``, every step wakes every region and
propagates through its K filters; with ``IF_CAPABILITY`` a region holding no
capability is not visited, so a step should cost the same for K = 1,000 as for
K = 10. Reported: build time and memory per operator, mean, median and p99 step
time, the median CPU time of this process per step (what other jobs on a shared
machine change least), and the ALWAYS / IF_CAPABILITY ratio.

    python -m benchmarks.many_dataflows [--quick] [--dataflows 1000] [--filters 1000] [--steps 20]
"""

from __future__ import annotations

import asyncio
import gc
import resource
import statistics
import time
from typing import Any

import aiotimely as at

from .common import command_line, save

ALWAYS, IF_CAPABILITY = at.FrontierInterest.ALWAYS, at.FrontierInterest.IF_CAPABILITY


def arrange(stream: at.Stream, interest: at.FrontierInterest) -> at.Stream:
    @stream.unary(interest=interest, name="Arrange")
    async def arranged(input, output, cap):
        cap.drop()
        held: dict = {}
        async for _ in input.activations():
            for at_time, batch in input.drain():
                entry = held.get(at_time.time)
                if entry is None:
                    entry = held[at_time.time] = (at_time.retain(), [])
                entry[1].extend(batch)
            for t in [t for t in held if not input.frontier.less_equal(t)]:
                cap_t, records = held.pop(t)
                with cap_t:
                    output.session(cap_t).give_many(records)

    return arranged


def dataflow(scope: at.Scope, inp: at.InputHandle, filters: int, interest: at.FrontierInterest) -> at.ProbeHandle:
    with scope.region(name="region") as region:
        stream = arrange(inp.to_stream(scope).enter(region), interest)
        for _ in range(filters):
            stream = stream.filter(lambda x: True)
        out = stream.leave()
    return out.probe()


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


async def measure(dataflows: int, filters: int, steps: int, interest: at.FrontierInterest,
                  freeze: bool = True) -> dict[str, Any]:
    gc.collect()
    before = rss_mib()
    async with at.Worker() as worker:
        start = time.perf_counter()
        inputs = [at.InputHandle() for _ in range(dataflows)]
        probes = [worker.dataflow(lambda s, i=i: dataflow(s, inputs[i], filters, interest)) for i in range(dataflows)]
        built = time.perf_counter() - start
        for _ in range(3):  # every operator runs once, then the dataflows are quiet
            await worker.step()
        memory = rss_mib() - before
        if freeze:  # the dataflows live as long as the process: keep the cyclic GC from rescanning them
            gc.collect()
            gc.freeze()
        operators = dataflows * (filters + 3)
        times, cpu = [], []
        for t in range(1, steps + 1):
            start, start_cpu = time.perf_counter(), time.process_time()
            inputs[t % dataflows].send(t)
            for inp in inputs:
                inp.advance_to(t)
            await worker.step_while(lambda t=t: any(p.less_than(t) for p in probes))
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        times.sort()
        for inp in inputs:
            inp.close()
    gc.unfreeze()
    return {
        "dataflows": dataflows, "filters": filters, "interest": interest.name, "operators": operators,
        "build_s": built, "build_us_per_operator": 1e6 * built / operators,
        "memory_mib": memory, "bytes_per_operator": memory * 2**20 / operators,
        "step_mean_ms": 1e3 * statistics.mean(times),
        "step_median_ms": 1e3 * statistics.median(times),
        "step_cpu_ms": 1e3 * statistics.median(cpu),
        "step_p99_ms": 1e3 * times[min(len(times) - 1, int(0.99 * len(times)))],
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = command_line(__doc__, "D=20, K in (10, 50), 5 steps")
    parser.add_argument("--dataflows", type=int, default=1000)
    parser.add_argument("--filters", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    d, ks, steps = (20, [10, 50], 5) if args.quick else (args.dataflows, args.filters, args.steps)
    runs = []
    print(f"many-dataflows: D={d}, K in {ks}, {steps} steps; one worker")
    print(f"{'K':>6} {'interest':>13} {'operators':>10} {'build s':>8} {'us/op':>7} {'MiB':>7} {'B/op':>7} "
          f"{'step ms':>9} {'median':>9} {'cpu ms':>9} {'p99 ms':>9}")
    for k in ks:
        for interest in (IF_CAPABILITY, ALWAYS):
            r = asyncio.run(measure(d, k, steps, interest))
            runs.append(r)
            print(f"{k:6} {interest.name:>13} {r['operators']:10,} {r['build_s']:8.2f} "
                  f"{r['build_us_per_operator']:7.1f} {r['memory_mib']:7.0f} {r['bytes_per_operator']:7.0f} "
                  f"{r['step_mean_ms']:9.2f} {r['step_median_ms']:9.2f} {r['step_cpu_ms']:9.2f} "
                  f"{r['step_p99_ms']:9.2f}")
    summary = {}
    for k in ks:
        pair = {r["interest"]: r for r in runs if r["filters"] == k}
        summary[f"K={k} ALWAYS/IF_CAPABILITY"] = pair["ALWAYS"]["step_mean_ms"] / pair["IF_CAPABILITY"]["step_mean_ms"]
    for column, what in (("step_mean_ms", "step"), ("step_median_ms", "median step"), ("step_cpu_ms", "cpu step")):
        ifcap = {r["filters"]: r[column] for r in runs if r["interest"] == "IF_CAPABILITY"}
        summary[f"IF_CAPABILITY {what} K=max / K=min"] = ifcap[max(ks)] / ifcap[min(ks)]
    for name, value in summary.items():
        print(f"{name}: {value:.2f}x")
    results = {"runs": runs, "summary": summary}
    if not args.quick:
        print(f"wrote {save('many_dataflows', results)}")
    return results


if __name__ == "__main__":
    main()
