"""The book's hello: records exchanged between workers by value, printed with their time.

Run:  python examples/hello.py -w 2
"""

from __future__ import annotations

import aiotimely as at


async def build(worker: at.Worker) -> None:
    index = worker.index
    inp = at.InputHandle()
    probe = worker.dataflow(
        lambda scope: inp.to_stream(scope)
        .exchange(lambda x: x)
        .inspect(lambda x: print(f"worker {index}:\thello {x}"))
        .probe()
    )
    # introduce data and watch!
    for round in range(10):
        if index == 0:
            inp.send(round)
        inp.advance_to(round + 1)
        await worker.step_while(lambda: probe.less_than(inp.time))


if __name__ == "__main__":
    at.execute_from_args(build)
