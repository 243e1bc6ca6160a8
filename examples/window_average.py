"""The tumbling-window average of the timestamp-token paper (section 5): in one line, and by hand.

Integer readings arrive at integer times. Every ``WIDTH`` time units we report the
average of the window just closed, at the time the next window starts; windows
without data produce nothing. The library does it in one line,
``stream.window(at.Tumbling(WIDTH), at.Agg.mean())``; ``tumbling_average`` is the
paper's operator written with capabilities, kept as the teaching example: for each
open window it holds one capability, moved ("downgraded") to the window's end when
the window is first seen; it emits and drops it once the input frontier reaches the
end. Both run side by side, and must agree.

Run:  python examples/window_average.py -w 2
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict

import aiotimely as at
from aiotimely.lowlevel import InputPort, OperatorOutput

WIDTH = 10


Average = tuple[int, int, float]
"""(window start, window end, average)"""


def library_average(stream: at.Stream[int], width: int = WIDTH) -> at.Stream[Average]:
    """The one-liner: a window's result is ``((start, end), mean)``, sent at the window's end."""
    return stream.window(at.Tumbling(width), at.Agg.mean()).map(lambda r: (r[0][0], r[0][1], r[1]))


def tumbling_average(stream: at.Stream[int], width: int = WIDTH) -> at.Stream[Average]:
    @stream.unary_frontier(exchange=lambda reading: 0, name="TumblingAverage")
    async def average(input: InputPort, output: OperatorOutput, cap: at.Capability) -> None:
        cap.drop()                       # nothing to say before the first reading
        windows: SortedDict[int, list[Any]] = SortedDict()   # window end -> [capability, sum, count]
        async for _ in input.activations():
            for time, batch in input.drain():
                end = (time.time // width + 1) * width
                window = windows.get(end)
                if window is None:
                    window = windows[end] = [time.delayed(end), 0, 0]
                window[1] += sum(batch)
                window[2] += len(batch)
            # a window is complete once no time before its end can still arrive
            while windows and not input.frontier.less_than(windows.peekitem(0)[0]):
                end, (window_cap, total, count) = windows.popitem(0)
                with window_cap:
                    output.session(window_cap).give((end - width, end, total / count))

    return average


async def build(worker: at.Worker) -> dict[str, list[Average]]:
    inp = at.InputHandle[int]()
    averages: dict[str, list[Average]] = {"library": [], "by hand": []}

    def make(scope: at.Scope) -> at.ProbeHandle:
        readings = inp.to_stream(scope)
        probe = library_average(readings).inspect(averages["library"].append).probe()
        tumbling_average(readings).inspect(averages["by hand"].append).probe_with(probe)
        return probe

    probe = worker.dataflow(make)
    for t in range(0, 60):
        if t // WIDTH == 3:
            inp.advance_to(t + 1)        # a quiet window: no output for it
            continue
        if t % worker.peers == worker.index:
            inp.send(t * 2)              # the reading at time t is 2t
        inp.advance_to(t + 1)
        await worker.step_while(lambda: probe.less_than(inp.time))
    return averages


def main(argv: list[str] | None = None) -> list[Average]:
    results = at.execute_from_args(build, argv)
    averages = sorted(a for r in results for a in r["library"])
    assert averages == sorted(a for r in results for a in r["by hand"]), "the one-liner and the paper disagree"
    for start, end, avg in averages:
        print(f"[{start:3}, {end:3}): average {avg:g}")
    return averages


if __name__ == "__main__":
    main()
