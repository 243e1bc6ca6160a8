"""Benchmark ``spark``: rows per second from Spark Structured Streaming into aiotimely, against a plain TCP server.

One Spark session (local[2]); a file source of N JSON rows in 4 files, one file per
micro-batch, 2 partitions; ``writeStream.foreach`` to (a) aiotimely's ingress with
``AiotimelyForeachWriter`` and an ``EpochListener`` (exactly-once rules, the
handshake, rows at their epoch, all of it counted downstream), and (b) a bare
asyncio TCP server that counts msgpack-framed rows from a minimal writer. Each
timing runs from the query's start to the last row counted.

    python -m benchmarks spark [--quick] [--rows 200000]
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

import msgpack

import aiotimely as at

from .common import command_line, save, stats, table

HEADER = struct.Struct(">I")


class PlainWriter:
    """The floor: rows to a TCP socket, 1,000 per msgpack frame, no handshake, no acknowledgements."""

    def __init__(self, port: int) -> None:
        self.port = port

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.sock = socket.create_connection(("127.0.0.1", self.port))
        self.rows: list = []
        return True

    def process(self, row) -> None:
        self.rows.append(row.asDict())
        if len(self.rows) >= 1000:
            self._send()

    def _send(self) -> None:
        payload = msgpack.packb(self.rows)
        self.sock.sendall(HEADER.pack(len(payload)) + payload)
        self.rows = []

    def close(self, error) -> None:
        if self.rows:
            self._send()
        self.sock.close()


def plain_server(n: int, started: threading.Event, port_box: list, done: list) -> None:
    async def main() -> None:
        finished = asyncio.get_running_loop().create_future()
        count = [0]

        async def handle(reader, writer):
            try:
                while True:
                    (size,) = HEADER.unpack(await reader.readexactly(4))
                    count[0] += len(msgpack.unpackb(await reader.readexactly(size)))
                    if count[0] >= n and not finished.done():
                        finished.set_result(time.perf_counter())
            except (asyncio.IncompleteReadError, asyncio.CancelledError):
                pass

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_box.append(server.sockets[0].getsockname()[1])
        started.set()
        done.append(await finished)
        server.close()

    asyncio.run(main())


def ours_server(n: int, started: threading.Event, address_box: list, done: list) -> None:
    from aiotimely.connectors.spark import ingress

    async def build(worker: at.Worker) -> None:
        ready = asyncio.get_running_loop().create_future()
        count = [0]

        def seen(_t, rows) -> None:
            count[0] += len(rows)
            if count[0] >= n and not done:
                done.append(time.perf_counter())

        worker.dataflow(lambda s: ingress(s, "127.0.0.1:0", ready=ready).inspect_batch(seen))
        address_box.append(await ready)
        started.set()

    at.execute(build, loop="asyncio")


def main(argv: list[str] | None = None) -> dict:
    parser = command_line(__doc__, "4,000 rows")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    n, repeats = (4_000, 1) if args.quick else (args.rows, args.repeats)
    os.environ.setdefault("AIOTIMELY_SECRET", "spark-benchmark")
    tmp = Path(tempfile.mkdtemp(prefix="aiotimely-spark-bench-"))
    source = tmp / "rows"
    source.mkdir()
    for f in range(4):
        with open(source / f"rows-{f}.json", "w") as out:
            for i in range(f, n, 4):
                out.write(json.dumps({"id": i, "page": "p%d" % (i % 7), "value": i * 0.5}) + "\n")
    from aiotimely.connectors.spark import AiotimelyForeachWriter, EpochListener, local_session

    spark = local_session("local[2]", workdir=str(tmp / "spark"), app="aiotimely-bench")
    samples: dict[str, list[float]] = {"plain": [], "aiotimely": []}
    try:
        spark.read.json(str(source)).count()   # warm the JVM up before timing anything
        for r in range(repeats):
            for kind in (("plain", "aiotimely") if r % 2 == 0 else ("aiotimely", "plain")):
                started, box, done = threading.Event(), [], []
                target = plain_server if kind == "plain" else ours_server
                thread = threading.Thread(target=target, args=(n, started, box, done), daemon=True)
                thread.start()
                started.wait()
                listener = None
                if kind == "plain":
                    writer = PlainWriter(box[0])
                else:
                    writer = AiotimelyForeachWriter(box[0])
                    listener = EpochListener(box[0])
                    spark.streams.addListener(listener)
                rows = (spark.readStream.schema("id INT, page STRING, value DOUBLE").option("maxFilesPerTrigger", 1)
                        .json(str(source)).repartition(2))
                start = time.perf_counter()
                (rows.writeStream.foreach(writer).option("checkpointLocation", str(tmp / f"ck-{kind}-{r}"))
                 .trigger(availableNow=True).start().awaitTermination())
                thread.join(120)
                if listener is not None:
                    spark.streams.removeListener(listener)
                if not done:
                    raise RuntimeError(f"{kind}: not every row arrived (thread alive: {thread.is_alive()})")
                samples[kind].append(done[0] - start)
    finally:
        spark.stop()
    results = {"rows": n, "runs": {k: stats(v) for k, v in samples.items()}}
    print(table(f"spark -> TCP: {n:,} rows, file source, 4 micro-batches, 2 partitions; median of {repeats}",
                [("Spark -> plain asyncio TCP server", results["runs"]["plain"], "no handshake, no dedup"),
                 ("Spark -> aiotimely ingress", results["runs"]["aiotimely"], "exactly once, at the epoch")],
                n, "rows/s", "Spark -> plain asyncio TCP server"))
    if not args.quick:
        print(f"wrote {save('spark', results)}")
    return results


if __name__ == "__main__":
    main()
