"""Raw asyncio TCP + msgpack between two processes: the ``exchange`` benchmark's peer.

The parent sends; it starts the receiver as a child process (same interpreter, same loop) on a free
loopback port. A frame is a 4-byte big-endian length and a msgpack payload of 1,000 ``(str, int)``
records (the exchange benchmark's records). Each round sends ``--frames`` frames (``write`` and
``await drain()`` per frame, each packed afresh), then an empty frame; the receiver unpacks every
frame, counts the records and answers the count. A round is timed on the sender from its first write
to that answer; the first round is a warm-up.

    python -m benchmarks.peers.tcp_raw [--loop asyncio|uvloop] [--frames 2000] [--rounds 3]

Prints one JSON line: ``{"loop", "frames", "records", "round_s": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import struct
import subprocess
import sys
import time

import msgpack

from ..corpus import first_words

HEADER = struct.Struct(">I")
ACK = struct.Struct(">Q")


def records() -> list[tuple[str, int]]:
    """The 1,000 records of every frame: the words of the corpus's first line, each with a number."""
    rng = random.Random(11)
    return [(word, rng.randrange(1_000_000)) for word in first_words(1000)]


async def receive() -> None:
    done = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        total = 0
        try:
            while True:
                (n,) = HEADER.unpack(await reader.readexactly(4))
                if n == 0:
                    writer.write(ACK.pack(total))
                    await writer.drain()
                    total = 0
                    continue
                total += len(msgpack.unpackb(await reader.readexactly(n), use_list=False))
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()
            if not done.done():
                done.set_result(None)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await done
    server.close()


async def send(port: int, frames: int, rounds: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    batch, pack = records(), msgpack.packb
    times = []
    for _ in range(rounds + 1):
        start = time.perf_counter()
        for _ in range(frames):
            payload = pack(batch)
            writer.write(HEADER.pack(len(payload)) + payload)
            await writer.drain()
        writer.write(HEADER.pack(0))
        await writer.drain()
        (total,) = ACK.unpack(await reader.readexactly(8))
        times.append(time.perf_counter() - start)
        assert total == frames * len(batch), total
    writer.close()
    await writer.wait_closed()
    return times[1:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--receive", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    if args.receive:
        asyncio.run(receive())
        return
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.peers.tcp_raw", "--receive", "--loop", args.loop],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        times = asyncio.run(send(port, args.frames, args.rounds))
    finally:
        child.wait(timeout=30)
    print(json.dumps({"loop": args.loop, "frames": args.frames, "records": args.frames * 1000, "round_s": times}))


if __name__ == "__main__":
    main()
