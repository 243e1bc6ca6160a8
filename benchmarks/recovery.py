"""Benchmark ``recovery``: windowed word count with snapshots about every second vs none, and restarts.

A source of ``WORDS`` words (a fixed vocabulary, 10,000 words per unit of time) keeps
its position; a keyed window operator counts each word per window of 20 time
units, applying times in order (``time_order``) and keeping its windows with
``keyed_state``; a sink takes the counts. Side by side in one run, one worker:

* throughput with no recovery, and with ``Recovery(every=EVERY)`` (SQLite in a
  temporary directory; ``EVERY`` is chosen near one second of this machine's
  throughput), as words/s and the ratio (goal: snapshots cost at most 10%);
* restart: a run that crashes after half the words, then a run that resumes from
  the same directory: seconds from ``execute`` to its first output, and the words
  it did not have to read again.

    python -m benchmarks.recovery [--quick] [--repeats 3]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiotimely as at
from aiotimely.recovery import Recovery

from .common import command_line, repeat, save, stats

WORDS = 40_000_000
PER_TIME = 10_000
WINDOW = 20
VOCABULARY = [f"w{i}" for i in range(1000)]


def wordcount_build(words: int, outputs: list[Any], crash_at: int | None = None) -> Any:
    def build(worker: at.Worker) -> None:
        async def source(output: Any, cap: Any) -> None:
            position = output.keyed_state("position", dict)
            cap.downgrade(output.resume_time())
            n = position.get(0, 0)
            while n < words:
                t = n // PER_TIME
                if t > cap.time:
                    cap.downgrade(t)
                if crash_at is not None and n >= crash_at:
                    raise RuntimeError("a crash, on purpose")
                output.session(cap).give_many(VOCABULARY[i % 1000] for i in range(n, n + PER_TIME))
                n += PER_TIME
                position[0] = n
                await asyncio.sleep(0)
            cap.drop()

        def make(scope: Any) -> None:
            words_ = at.source(scope, "Words", source)

            @words_.unary_frontier(exchange=lambda w: w, name="WindowCounts")
            async def counts(input: Any, output: Any, cap: Any) -> None:
                windows = input.keyed_state("windows", dict)      # word -> {window: count}
                ends = {start + WINDOW: cap.delayed(start + WINDOW) for per in windows.values() for start in per}
                cap.drop()

                def close(upto: float) -> None:
                    for end in sorted(e for e in ends if e <= upto):
                        with ends.pop(end) as window_cap:
                            start = end - WINDOW
                            session = output.session(window_cap)
                            for word in list(windows):
                                n = windows[word].pop(start, 0)
                                if not windows[word]:
                                    del windows[word]
                                if n:
                                    session.give((start, word, n))

                order = input.time_order()
                async for _ in input.activations():
                    for time_, batch in order.ready():
                        close(time_.time)
                        start = time_.time // WINDOW * WINDOW
                        if start + WINDOW not in ends:
                            ends[start + WINDOW] = time_.delayed(start + WINDOW)
                        for word in batch:
                            per = windows.get(word)
                            if per is None:
                                per = windows[word] = {}
                            per[start] = per.get(start, 0) + 1
                    frontier = list(input.frontier)
                    close(min(frontier) if frontier else float("inf"))

            counts.inspect_batch(lambda _t, batch: outputs.append((time.perf_counter(), sum(n for _, _, n in batch))))

        worker.dataflow(make, name="windows")

    return build


def throughput(words: int, every: int | None) -> tuple[float, int]:
    outputs: list[Any] = []
    with tempfile.TemporaryDirectory() as folder:
        recovery = Recovery(Path(folder) / "state", every=every) if every else None
        start = time.perf_counter()
        at.execute(wordcount_build(words, outputs), recovery=recovery, loop="asyncio")
        seconds = time.perf_counter() - start
    return seconds, sum(n for _, n in outputs)


def restart(words: int, every: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        recovery = Recovery(Path(folder) / "state", every=every)
        try:
            at.execute(wordcount_build(words, [], crash_at=words // 2), recovery=recovery, loop="asyncio")
        except at.DataflowError:
            pass
        outputs: list[Any] = []
        start = time.perf_counter()
        at.execute(wordcount_build(words, outputs), recovery=Recovery(Path(folder) / "state", every=every),
                   loop="asyncio")
        first = outputs[0][0] - start if outputs else float("nan")
    return {"seconds_to_first_output": first}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = command_line(__doc__, "400,000 words, snapshots every 10 units, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", type=int, default=0, help="snapshot interval in time units (0: about 1 s)")
    args = parser.parse_args(argv)
    words = 400_000 if args.quick else WORDS
    repeats = 1 if args.quick else args.repeats
    expected = words // PER_TIME * PER_TIME
    warm, counted = throughput(words, None)
    assert counted == expected, (counted, expected)
    every = args.every or (10 if args.quick else max(1, round(words / PER_TIME / warm)))   # ~ 1 s
    runs: dict[str, Any] = {}
    off: list[float] = []
    on: list[float] = []
    for _ in range(repeats):  # alternate, so that the machine's moods fall on both
        seconds, counted = throughput(words, None)
        assert counted == expected
        off.append(seconds)
        seconds, counted = throughput(words, every)
        assert counted == expected
        on.append(seconds)
    runs["no recovery"] = stats(off)
    runs[f"snapshots every {every} units"] = stats(on)
    ratio = runs["no recovery"]["median"] / runs[f"snapshots every {every} units"]["median"]
    restarted = repeat(lambda: (0.0, restart(words, every)), 1)[1]
    print(f"recovery: {words:,} words, windows of {WINDOW} units ({PER_TIME:,} words per unit); median of {repeats}")
    for name, s in runs.items():
        print(f"  {name:34} {s['median']:7.3f} s  {words / s['median'] / 1e6:6.2f} M words/s")
    print(f"  snapshots cost: {100 * (1 - ratio):.1f}% of throughput (ratio {ratio:.3f}; goal >= 0.90)")
    print(f"  restart after a crash halfway: first output after {restarted['seconds_to_first_output']:.3f} s")
    results = {"words": words, "every": every, "runs": runs, "ratio": ratio, "restart": restarted}
    if not args.quick:
        print(f"wrote {save('recovery', results)}")
    return results


if __name__ == "__main__":
    main()
