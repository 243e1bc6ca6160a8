"""Benchmark ``latency`` (the timestamp-token paper, section 7.2 and 7.3): coordination idioms under fine timestamps.

Section 7.2: an open-loop generator offers words at a fixed rate; each word's
timestamp is its scheduled generation time in nanoseconds, quantized to 2^k ns. A
rolling unique-word count processes words in timestamp order and emits the count
for each word. Latency is measured from a word's scheduled time to its count's
arrival at the sink. Three idioms over the same engine:

* ``tokens``: the operator keeps one capability, downgraded from time to time as
  the input frontier completes them (timestamp tokens);
* ``notificator``: the operator asks for a notification at every distinct time
  (Naiad-style), one capability per pending time;
* ``watermarks``: the generator sends in-band watermark records (Flink-style) with
  the last complete quantum; the operator holds one capability at time 0 and
  orders records by their (quantized) event time;
* ``timed``: timestamp tokens with timed batches (section 6.2): each record carries
  its quantized time inside batches sent at the generator's coarser capability;
  the operator reads them by time once the frontier passes them
  (``input.timed_order()``) and sends timed output under one capability, moved
  once per activation.

A run "collapses" when its maximum latency passes 1 s.

``--control`` runs the watermark idiom a second time at every (rate, quantum),
interleaved with the others, and compares watermarks with themselves as the timed
idiom is compared with watermarks: a ratio the measure gives between two runs of the
same code is its noise, and a timed / watermarks ratio means something only beyond it.

Between the two sections, the closed loop: a round of K words (each its own time)
through the timed and the watermark word counts, as CPU time per round. A p99.9 of
the open loop is often one stall of the machine; the ratio of these two costs is
what it comes down to without them.

Section 7.3: a chain of N no-op operators, idle; the input's time advances every
millisecond with no data, and the latency of that advance reaching the end of the
chain is measured, with frontiers (tokens) and with watermark records forwarded
by every operator.

    python -m benchmarks.latency [--quick] [--rate 100000] [--seconds 2]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from sortedcontainers import SortedDict

import aiotimely as at

from .common import command_line, save

WORDS = [f"w{i}" for i in range(5000)]
COLLAPSE_NS = 1_000_000_000
ROUND_WORDS = (6, 30)
"""Words per round in the closed loop (:func:`round_cost`)."""


def percentile(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0


# -- section 7.2 ------------------------------------------------------------------------


def generator(scope: at.Scope, rate: int, seconds: float, bits: int, mode: str, clock: dict) -> at.Stream:
    """Open loop: the words due by now, grouped by quantized time; the capability follows the clock."""
    total = int(rate * seconds)
    interval = 1e9 / rate

    async def generate(output, cap):
        start = clock["start"] = time.perf_counter_ns()
        sent = 0
        while sent < total:
            now = time.perf_counter_ns() - start
            due = min(total, int(now / interval) + 1)
            if mode == "timed":  # one batch under the capability; every record with its own quantum
                output.session(cap).give_timed([((s := int(i * interval)) >> bits, (WORDS[i % 5000], s))
                                                for i in range(sent, due)])
                cap.downgrade(max(cap.time, now >> bits))
            elif mode == "watermarks":  # the event time travels in the record, quantized like the tokens' times
                records = [(WORDS[i % 5000], int(i * interval)) for i in range(sent, due)]
                session = output.session(cap)
                session.give_many(records)
                session.give(("", (now >> bits) - 1))    # watermark: no later record has a quantum this early
            else:
                group: list = []
                group_time = None
                for i in range(sent, due):
                    scheduled = int(i * interval)
                    t = scheduled >> bits
                    if t != group_time:
                        if group:
                            output.session(cap).give_many(group)
                        group, group_time = [], t
                        cap.downgrade(t)
                    group.append((WORDS[i % 5000], scheduled))
                if group:
                    output.session(cap).give_many(group)
                cap.downgrade(max(cap.time, now >> bits))
            sent = due
            await asyncio.sleep(0)
        if mode == "watermarks":
            output.session(cap).give(("", 1 << 62))      # the end: every quantum is complete
        cap.drop()

    return at.source(scope, "Generator", generate)


def count_tokens(words: at.Stream) -> at.Stream:
    @words.unary_frontier(name="CountTokens")
    async def count(input, output, cap):
        cap.drop()
        seen: set = set()
        pending = SortedDict()                            # time -> words, an ordered map as in the paper
        held = None                                       # one capability, at the earliest pending time
        async for _ in input.activations():
            for time_, batch in input.drain():
                words_at = pending.get(time_.time)
                if words_at is None:
                    pending[time_.time] = words_at = []
                words_at.extend(batch)
                if held is None:
                    held = time_.retain()
                elif time_.time < held.time:
                    earlier = time_.retain()
                    held.drop()
                    held = earlier
            if held is None:
                continue
            frontier = input.frontier
            while pending and not frontier.less_equal(pending.peekitem(0)[0]):
                t, batch = pending.popitem(0)
                held.downgrade(t)
                session = output.session(held)
                for word, scheduled in batch:
                    if word not in seen:
                        seen.add(word)
                    session.give((len(seen), scheduled))
            if pending:
                held.downgrade(pending.peekitem(0)[0])
            else:
                held.drop()
                held = None

    return count


def count_notificator(words: at.Stream) -> at.Stream:
    @words.unary_notify(name="CountNotificator")
    async def count(input, output, notificator):
        seen: set = set()
        pending: dict = {}
        async for _ in input.activations():
            for time_, batch in input.drain():
                pending.setdefault(time_.time, []).extend(batch)
                notificator.notify_at(time_)
            for cap in notificator.ready():
                session = output.session(cap)
                for word, scheduled in pending.pop(cap.time):
                    if word not in seen:
                        seen.add(word)
                    session.give((len(seen), scheduled))

    return count


def count_watermarks(words: at.Stream, bits: int) -> at.Stream:
    @words.unary(name="CountWatermarks", interest=at.FrontierInterest.IF_CAPABILITY)  # woken at the end
    async def count(input, output, cap):
        seen: set = set()
        buffered: list = []
        async for _ in input.activations():
            for _time, batch in input.drain():
                for record in batch:
                    if record[0]:
                        buffered.append(record)
                        continue
                    mark = record[1]                      # a watermark: every quantum up to it is here
                    ready = [r for r in buffered if r[1] >> bits <= mark]
                    buffered = [r for r in buffered if r[1] >> bits > mark]
                    ready.sort(key=lambda r: r[1])
                    session = output.session(cap)
                    for word, scheduled in ready:
                        if word not in seen:
                            seen.add(word)
                        session.give((len(seen), scheduled))
        cap.drop()

    return count


def count_timed(words: at.Stream) -> at.Stream:
    @words.unary_frontier(name="CountTimed", interest=at.FrontierInterest.IF_CAPABILITY)  # woken while records wait
    async def count(input, output, cap):
        cap.drop()
        seen: set = set()
        order = input.timed_order()
        async for _ in input.activations():
            session = None
            for t, (word, scheduled) in order.records():   # every complete record, in time order
                if word not in seen:
                    seen.add(word)
                if session is None:
                    session = order.session(output)
                session.give_at(t, (len(seen), scheduled))

    return count


IDIOMS = {"tokens": count_tokens, "notificator": count_notificator, "watermarks": count_watermarks,
          "timed": count_timed}
CONTROL = "watermarks again"
"""``--control``: the watermark idiom run a second time, to compare with the first (the measure's own noise)."""


def word_latency(idiom: str, rate: int, seconds: float, bits: int) -> dict[str, Any]:
    clock: dict = {}
    latencies: list[int] = []

    def sink(_t: Any, records: list) -> None:
        now = time.perf_counter_ns() - clock["start"]
        if idiom == "timed":
            latencies.extend(now - scheduled for _quantum, (_count, scheduled) in records)
        else:
            latencies.extend(now - scheduled for _count, scheduled in records)

    def build(worker: at.Worker) -> None:
        def make(scope: at.Scope) -> None:
            words = generator(scope, rate, seconds, bits, idiom, clock)
            counted = count_watermarks(words, bits) if idiom == "watermarks" else IDIOMS[idiom](words)
            counted.inspect_batch(sink)

        worker.dataflow(make)

    at.execute(build)
    latencies.sort()
    assert len(latencies) == int(rate * seconds), (idiom, len(latencies))
    worst = latencies[-1]
    return {"idiom": idiom, "rate": rate, "quantum_bits": bits, "p50_us": percentile(latencies, 0.5) / 1e3,
            "p999_us": percentile(latencies, 0.999) / 1e3, "max_us": worst / 1e3, "collapsed": worst > COLLAPSE_NS}


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for repeated runs: the median p50 and p99.9, the worst maximum, collapsed if any run collapsed."""
    def median(key: str) -> float:
        values = sorted(r[key] for r in runs)
        return values[len(values) // 2]

    return {**runs[0], "p50_us": median("p50_us"), "p999_us": median("p999_us"),
            "max_us": max(r["max_us"] for r in runs), "collapsed": any(r["collapsed"] for r in runs),
            "p999_runs_us": [r["p999_us"] for r in runs], "p999_least_us": min(r["p999_us"] for r in runs)}


def round_cost(idiom: str, rounds: int, words: int) -> float:
    """Closed loop: CPU microseconds per round of ``words`` words, each word with its own time (a quantum of
    1 ns), for the ``timed`` or ``watermarks`` idiom: what a round costs without the open loop's waiting, and
    without the machine's stalls deciding the figure (CPU time, not wall time). With no words, a round where
    time only moves on (the capability, or a watermark record)."""
    delivered = [0]

    async def generate(output, cap):
        sent = 0
        for r in range(1, rounds + 1):
            if idiom == "timed":
                output.session(cap).give_timed([(sent + i, (WORDS[(sent + i) % 5000], sent + i))
                                                for i in range(words)])
                sent += words
                cap.downgrade(max(sent, r))
            else:
                session = output.session(cap)
                session.give_many([(WORDS[(sent + i) % 5000], sent + i) for i in range(words)])
                sent += words
                session.give(("", max(sent, r) - 1))
            await asyncio.sleep(0)
        if idiom == "watermarks":
            output.session(cap).give(("", 1 << 62))
        cap.drop()

    def build(worker: at.Worker) -> None:
        def make(scope: at.Scope) -> None:
            generated = at.source(scope, "Generator", generate)
            counted = count_watermarks(generated, 0) if idiom == "watermarks" else count_timed(generated)
            counted.inspect_batch(lambda _t, records: delivered.__setitem__(0, delivered[0] + len(records)))

        worker.dataflow(make)

    start = time.process_time()
    at.execute(build)
    elapsed = time.process_time() - start
    assert delivered[0] == rounds * words, (idiom, delivered[0])
    return elapsed / rounds * 1e6


def round_instructions(idiom: str, words: int, rounds: tuple[int, int] = (500, 1500)) -> float | None:
    """Instructions per closed-loop round (:func:`round_cost`), counted by valgrind's cachegrind: a count,
    which the machine's noise does not move (it repeats to the last digit), as the difference between two run
    lengths divided by the rounds between them. ``None`` without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    root = Path(__file__).resolve().parent.parent
    counts = []
    for n in rounds:
        code = f"from benchmarks.latency import round_cost; round_cost({idiom!r}, {n}, {words})"
        done = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                               sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True,
                              env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)})
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count in valgrind's output: {done.stderr[-500:]}")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (rounds[1] - rounds[0])


# -- section 7.3 ------------------------------------------------------------------------


def chain_latency(idiom: str, length: int, ticks: int, period_s: float = 0.001) -> dict[str, Any]:
    """Time advancing through ``length`` idle no-op operators: frontiers (tokens) or forwarded watermarks."""
    sent: dict[int, int] = {}
    latencies: list[int] = []

    async def ticking(output, cap):
        for t in range(1, ticks + 1):
            await asyncio.sleep(period_s)
            sent[t] = time.perf_counter_ns()
            if idiom == "watermarks":
                output.session(cap).give(t)            # the watermark travels as a record
            else:
                cap.downgrade(t)                        # the frontier moves; no operator runs
        cap.drop()

    def chain(scope: at.Scope) -> None:
        stream = at.source(scope, "Ticks", ticking)
        for _ in range(length):
            stream = stream.map(lambda t: t)    # with watermarks, every operator runs to forward each one
        if idiom == "watermarks":
            stream.inspect(lambda t: latencies.append(time.perf_counter_ns() - sent[t]))
        else:
            @stream.sink(name="End")
            async def end(input):
                seen = 0
                async for _ in input.activations():
                    for _ in input.drain():
                        pass
                    done = [t for t in range(seen + 1, ticks + 1) if t in sent and not input.frontier.less_than(t)]
                    for t in done:
                        latencies.append(time.perf_counter_ns() - sent[t])
                    seen = max(done, default=seen)

    at.execute(lambda worker: worker.dataflow(chain))
    latencies.sort()
    return {"idiom": idiom, "length": length, "p50_us": percentile(latencies, 0.5) / 1e3,
            "p99_us": percentile(latencies, 0.99) / 1e3, "ticks": len(latencies)}


def main(argv: list[str] | None = None) -> dict:
    parser = command_line(__doc__, "a short run at low rate, two quanta, short chains")
    parser.add_argument("--rate", type=int, nargs="+", default=[25_000, 40_000, 100_000])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--bits", type=int, nargs="+", default=[24, 20, 16, 12, 8, 4, 0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of timed and watermarks per (rate, quantum), interleaved; the p99.9 compared is "
                             "the median over the runs (one run's p99.9 is often a single stall of the machine), "
                             "and the summary compares each idiom's lowest p99.9 too (its least disturbed run)")
    parser.add_argument("--control", action="store_true",
                        help="also run watermarks a second time at every (rate, quantum) and compare them with "
                             "the first as timed is compared with watermarks: the measure's own noise")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of a closed-loop round (idle, and of K words) in each "
                             "idiom with valgrind's cachegrind, where the machine's noise does not reach")
    parser.add_argument("--same-process", action="store_true",
                        help="run every measurement in this process (by default each word-count run has a fresh "
                             "process, so that no run pays for the garbage an earlier one left: a collapsed run "
                             "leaves a large heap whose collections then stall the next)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rate, args.seconds, args.bits, args.lengths = [20_000], 0.3, [20, 0], [8, 32]
    words, chains = [], []
    print("section 7.2: rolling unique-word count, open loop; latency in microseconds")
    print(f"{'rate/s':>8} {'quantum':>9} {'idiom':>16} {'p50':>10} {'p99.9':>10} {'max':>10}")
    fresh = None if args.same_process or args.quick else ProcessPoolExecutor(
        max_workers=1, max_tasks_per_child=1, mp_context=multiprocessing.get_context("spawn"))
    repeat = 1 if args.quick else max(1, args.repeat)
    measured = [*IDIOMS, CONTROL] if args.control else list(IDIOMS)
    for rate in args.rate:
        for bits in args.bits:
            runs: dict[str, list[dict[str, Any]]] = {idiom: [] for idiom in measured}
            for attempt in range(repeat):
                for idiom in measured:
                    if attempt and idiom not in ("timed", "watermarks", CONTROL):
                        continue
                    code = "watermarks" if idiom == CONTROL else idiom
                    r = (word_latency(code, rate, args.seconds, bits) if fresh is None
                         else fresh.submit(word_latency, code, rate, args.seconds, bits).result())
                    runs[idiom].append({**r, "idiom": idiom})
            for idiom in measured:
                r = _median_run(runs[idiom])
                words.append(r)
                flag = "  collapsed" if r["collapsed"] else ""
                spread = (f"  (p99.9 of {len(r['p999_runs_us'])} runs: "
                          f"{', '.join(f'{p:.0f}' for p in r['p999_runs_us'])})" if len(runs[idiom]) > 1 else "")
                print(f"{rate:8,} {'2^' + str(bits) + ' ns':>9} {idiom:>16} {r['p50_us']:10.0f} {r['p999_us']:10.0f} "
                      f"{r['max_us']:10.0f}{flag}{spread}")
    rounds, repeats = (200, 1) if args.quick else (3000, 5)
    print(f"closed loop: CPU microseconds per round ({rounds} rounds of K words, each word its own time), "
          f"median of {repeats} alternating runs")
    costs: dict[tuple[str, int], float] = {}
    for words_per_round in ROUND_WORDS:
        runs_of: dict[str, list[float]] = {"timed": [], "watermarks": []}
        for _ in range(repeats):
            for idiom in runs_of:
                runs_of[idiom].append(round_cost(idiom, rounds, words_per_round) if fresh is None
                                      else fresh.submit(round_cost, idiom, rounds, words_per_round).result())
        for idiom, values in runs_of.items():
            costs[idiom, words_per_round] = statistics.median(values)
            print(f"{'K=' + str(words_per_round):>8} {idiom:>12} {costs[idiom, words_per_round]:10.1f} "
                  f"(min {min(values):.1f})")
    if fresh is not None:
        fresh.shutdown()
    instructions: dict[tuple[str, int], float] = {}
    if args.instructions and shutil.which("valgrind") is None:
        print("closed loop: valgrind is not installed, so no instruction counts")
    elif args.instructions:
        print("closed loop: instructions per round (valgrind cachegrind; K=0: time moves on, no words)")
        for words_per_round in (0, *ROUND_WORDS):
            for idiom in ("timed", "watermarks"):
                count = round_instructions(idiom, words_per_round)
                assert count is not None   # (valgrind is installed)
                instructions[idiom, words_per_round] = count
                print(f"{'K=' + str(words_per_round):>8} {idiom:>12} {count / 1000:10.1f}k")
    print("section 7.3: time advancing through idle no-op operators; latency in microseconds")
    print(f"{'length':>8} {'idiom':>12} {'p50':>10} {'p99':>10}")
    for length in args.lengths:
        for idiom in ("tokens", "watermarks"):
            r = chain_latency(idiom, length, ticks=50 if args.quick else 300)
            chains.append(r)
            print(f"{length:8} {idiom:>12} {r['p50_us']:10.0f} {r['p99_us']:10.0f}")
    tokens = {r["length"]: r["p50_us"] for r in chains if r["idiom"] == "tokens"}
    summary = {"tokens chain p50 longest/shortest": tokens[max(tokens)] / tokens[min(tokens)]}
    for k in ROUND_WORDS:   # what the open loop's p99.9 ratio comes down to once the machine's stalls are out
        summary[f"closed-loop round, {k} words: timed / watermarks"] = costs["timed", k] / costs["watermarks", k]
    for k in (0, *ROUND_WORDS):
        if ("timed", k) in instructions and ("watermarks", k) in instructions:
            summary[f"closed-loop round, {k} words, instructions: timed / watermarks"] = (
                instructions["timed", k] / instructions["watermarks", k])
    for rate in args.rate:   # the paper's claim, with timed batches: within 2x of watermarks, never collapsed alone
        runs = {(r["quantum_bits"], r["idiom"]): r for r in words if r["rate"] == rate}
        for idiom in ("timed", CONTROL):
            if idiom not in measured:
                continue
            # (the control's ratio counts either way: which of two runs of the same code is slower is chance)
            def ratio(a: float, b: float, either: bool = idiom == CONTROL) -> float:
                return max(a / b, b / a) if either else a / b

            ratios = [ratio(runs[b, idiom]["p999_us"], max(runs[b, "watermarks"]["p999_us"], 1.0)) for b in args.bits]
            # each idiom's least disturbed run: a p99.9 is often one stall of the machine, which hits either idiom
            least = max(ratio(runs[b, idiom]["p999_least_us"], max(runs[b, "watermarks"]["p999_least_us"], 1.0))
                        for b in args.bits)
            within = sum(r <= 2 for r in ratios)
            if idiom == "timed":
                summary[f"{rate}/s timed p99.9 / watermarks p99.9, worst quantum"] = max(ratios)
                summary[f"{rate}/s the same, each idiom's lowest p99.9 of its runs"] = least
                summary[f"{rate}/s quanta where timed p99.9 is within 2x of watermarks'"] = within
            else:
                summary[f"{rate}/s control, watermarks run again: p99.9 ratio either way, worst quantum"] = max(ratios)
                summary[f"{rate}/s control, the same, each run set's lowest p99.9"] = least
                summary[f"{rate}/s control: quanta within 2x either way"] = within
        summary[f"{rate}/s quanta where timed collapsed and watermarks did not"] = sum(
            runs[b, "timed"]["collapsed"] and not runs[b, "watermarks"]["collapsed"] for b in args.bits)
    for name, value in summary.items():
        print(f"{name}: {value}" if isinstance(value, int) else f"{name}: {value:.2f}x")  # a count, or a ratio
    results = {"words": words, "chains": chains, "rounds": [{"idiom": i, "words": k, "cpu_us": v}
                                                           for (i, k), v in costs.items()],
               "instructions": [{"idiom": i, "words": k, "per_round": v} for (i, k), v in instructions.items()],
               "summary": summary}
    if not args.quick:
        print(f"wrote {save('latency', results)}")
    return results


if __name__ == "__main__":
    main()
