"""A recoverable keyed-window pipeline for the stop-and-restart tests: three partitions of paced events, each
partition's position kept by key (so it moves with the workers), tumbling windows counted per key, every window
appended to a file as one JSON line. Run as a program with aiotimely's options (-w, -n, -p, --hostfile)::

    python -m tests.recovery.stop_program OUT STATE [--late SECONDS] [aiotimely options]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter

import aiotimely as at
from aiotimely.recovery import Recovery
from tests.recovery.common import partitions_source

PARTITIONS = 3
EVENTS = 3000          # per partition
PER_TIME = 10          # events of a partition per unit of time
WINDOW = 10
EVERY = 3
PACE = 0.02            # seconds a partition waits after each unit of time


def key_of(partition: int, n: int) -> str:
    return f"k{(n * 7 + partition) % 5}"


def truth() -> dict[tuple[int, str], int]:
    """A crash-free run's windows: ``(window start, key) -> count``."""
    return dict(Counter(((n // PER_TIME) // WINDOW * WINDOW, key_of(p, n))
                        for p in range(PARTITIONS) for n in range(EVENTS)))


def build(out: str, late: float):
    async def build(worker: at.Worker) -> None:
        print(f"worker {worker.index} building", flush=True)   # (the tests signal once every process says so)
        if late and worker.index == worker.peers - 1:
            await asyncio.sleep(late)          # a process that builds late, behind its peers' backlog

        events = partitions_source(worker, PARTITIONS, EVENTS, PER_TIME, lambda p, m: (p, key_of(p, m)), PACE)

        def write(record) -> None:
            key, (start, _), count = record
            with open(out, "a") as f:
                f.write(json.dumps([start, key, count]) + "\n")

        def make(scope):
            (at.source(scope, "Events", events)
             .window(at.Tumbling(WINDOW), at.Agg.count(), key=lambda e: e[1])
             .inspect(write))

        worker.dataflow(make, name="windows")

    return build


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("out")
    parser.add_argument("state")
    parser.add_argument("--late", type=float, default=0.0)
    options, rest = parser.parse_known_args(argv)
    at.execute_from_args(build(options.out, options.late), rest, recovery=Recovery(options.state, every=EVERY))


if __name__ == "__main__":
    main(sys.argv[1:])
