"""One process of the 2-process computation tests/observe/test_metrics.py scrapes.

    python tests/observe/metrics_program.py PROCESS HOST:PORT,HOST:PORT

It serves its metrics (``execute(..., metrics_port=0)``: the URL is on stderr), then for each line ``T`` of
stdin sends the 10 records
``100 * PROCESS + 0..9`` at the current time, advances its input to ``T`` and, once the computation has
passed ``T``, prints ``reached T``. A line ``close`` (or the end of stdin) closes its input. The operator
``Route`` exchanges the records by value: each worker gets the 5 even or the 5 odd ones of each process.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiotimely as at


def main() -> None:
    process, addresses = int(sys.argv[1]), sys.argv[2].split(",")

    async def build(worker: at.Worker) -> None:
        inp: at.InputHandle[int] = at.InputHandle()

        def make(scope: at.Scope[at.Stream]) -> at.ProbeHandle:
            @inp.to_stream(scope).unary(exchange=lambda x: x, name="Route")
            async def route(input: Any, output: Any, cap: Any) -> None:
                cap.drop()
                async for _ in input.activations():
                    for time, batch in input.drain():
                        output.session(time).give_many(batch)

            probe: at.ProbeHandle = route.probe()
            return probe

        probe = worker.dataflow(make, name="routed")
        loop = asyncio.get_running_loop()
        try:
            while True:
                line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
                if not line or line == "close":
                    break
                t = int(line)
                inp.send_batch(range(100 * process, 100 * process + 10))
                inp.advance_to(t)
                await worker.step_while(lambda: probe.less_than(inp.time))
                print("reached", t, flush=True)
        finally:
            inp.close()

    at.execute(build, processes=2, process=process, addresses=addresses, metrics_port=0)


if __name__ == "__main__":
    main()
