"""A recoverable columnar window pipeline for the kill-and-restart test: three partitions of paced events (each
partition's position kept by key, so it moves with the workers), as Arrow batches, tumbling windows per key over an
event-time column, every window appended to a file as one JSON line. Run as a program with aiotimely's options::

    python -m tests.columnar.window_program OUT STATE [aiotimely options]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

import polars as pl

import aiotimely as at
from aiotimely.recovery import Recovery
from tests.recovery.common import partitions_source

PARTITIONS = 3
EVENTS = 2000          # per partition
PER_TIME = 10          # events of a partition per unit of time
WINDOW = 10
EVERY = 3
PACE = 0.02
SCHEMA = {"key": pl.String, "ts": pl.Int64, "n": pl.Int64}


def row(partition: int, n: int) -> tuple[str, int, int]:
    """Event ``n`` of a partition: a key, an event time (its dataflow time, less up to 2), and 1."""
    return f"k{(n * 7 + partition) % 5}", n // PER_TIME - n % 3, 1


def truth() -> dict[tuple[int, str], int]:
    """A crash-free run's windows: ``(window start, key) -> count`` (lateness 2: no event is late)."""
    return dict(Counter((ts // WINDOW * WINDOW, key) for p in range(PARTITIONS) for n in range(EVENTS)
                        for key, ts, _ in [row(p, n)]))


def build(out: str):
    def build(worker: at.Worker) -> None:
        print(f"worker {worker.index} building", flush=True)
        events = partitions_source(worker, PARTITIONS, EVENTS, PER_TIME, row, PACE)

        def write(time, frame: pl.DataFrame) -> None:
            with open(out, "a") as f:
                for key, start, count in frame.select("key", "window_start", "count").iter_rows():
                    f.write(json.dumps([start, key, count]) + "\n")

        def make(scope):
            (at.source(scope, "Events", events).columnar(SCHEMA)
             .window(at.Tumbling(WINDOW), at.Agg.count(), key="key", time="ts", lateness=2)
             .inspect_batch(write))

        worker.dataflow(make, name="columnar-windows")

    return build


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("out")
    parser.add_argument("state")
    options, rest = parser.parse_known_args(argv)
    at.execute_from_args(build(options.out), rest, recovery=Recovery(options.state, every=EVERY))


if __name__ == "__main__":
    main(sys.argv[1:])
