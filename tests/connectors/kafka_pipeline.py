"""A Kafka -> Kafka pipeline run by the restart test: slow enough to be killed in the middle.

Usage: python kafka_pipeline.py BOOTSTRAP   (reads topic 'in', writes 'out', group 'pipeline')
Each output record is 'partition:offset:value' of its input record.
"""

from __future__ import annotations

import asyncio
import sys

import aiotimely as at
from aiotimely.connectors import kafka, to_async


def build(worker, bootstrap):
    committed = at.ProbeHandle()

    async def slowly(time, records):
        await asyncio.sleep(0.02)

    def make(scope):
        records = kafka.source(scope, bootstrap, "in", group_id="pipeline", commit=committed, max_records=50,
                               idle_timeout=1.5, commit_interval=0.1)
        lines = to_async(records, slowly).map(lambda r: f"{r.partition}:{r.offset}:{r.value.decode()}".encode())
        kafka.sink(lines, bootstrap, "out").probe_with(committed)

    worker.dataflow(make)


if __name__ == "__main__":
    at.execute(lambda worker: build(worker, sys.argv[1]), workers=2)
    print("finished", flush=True)
