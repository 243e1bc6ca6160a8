"""Websocket ticks -> windowed average per symbol -> websocket subscribers, all on loopback.

A feed server sends 300 price ticks (three symbols, seeded random walk) to
whoever connects; aiotimely follows the feed (``client_source``), gives each tick
its sequence number as its time (``EventTime``), averages prices per symbol in
50-tick windows (``stream.window``: each window is sent once the frontier passes
its end), and pushes each window's averages to its subscribers (``server_sink``),
one of which prints them.

Run:  python examples/ws_ticks.py        (needs: pip install 'aiotimely[websockets]')
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

import aiotimely as at
from aiotimely.launch import free_ports
from aiotimely.connectors import EventTime
from aiotimely.connectors.websockets import client_source, server_sink

TICKS, WINDOW = 300, 50


async def feed(connection: ServerConnection, go: asyncio.Event) -> None:
    await go.wait()                                  # once the subscriber listens
    rng = random.Random(7)
    prices = {"AAA": 100.0, "BBB": 50.0, "CCC": 10.0}
    for seq in range(TICKS):
        symbol = rng.choice(sorted(prices))
        prices[symbol] = round(prices[symbol] * (1 + rng.uniform(-0.01, 0.01)), 4)
        await connection.send(json.dumps({"seq": seq, "symbol": symbol, "price": prices[symbol]}))
    await connection.close()


Tick = dict[str, Any]
"""``{"seq": 7, "symbol": "AAA", "price": 100.2}``"""


def window_averages(ticks: at.Stream[Tick]) -> at.Stream[dict[str, Any]]:
    """The average price per symbol and 50-tick window (one line of the library), then one message per window
    with every symbol's average, sent once the window is complete."""
    averages = ticks.window(at.Tumbling(WINDOW), at.Agg.mean(lambda tick: tick["price"]),
                            key=lambda tick: tick["symbol"])
    return averages.exchange(lambda _row: 0).accumulate({}, one_message)


def one_message(message: dict[str, Any], rows: list[Any]) -> dict[str, Any]:
    """Gather a window's ``(symbol, (start, end), average)`` rows into one message (all come at its end)."""
    window, averages = message.get("window"), dict(message.get("averages", {}))
    for symbol, (start, _end), average in rows:
        window, averages[symbol] = start // WINDOW, round(average, 4)
    return {"window": window, "averages": dict(sorted(averages.items()))}


async def subscriber(port: int, lines: list[str], connected: asyncio.Event) -> None:
    for _ in range(100):
        try:
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                connected.set()
                async for message in ws:
                    result = json.loads(message)
                    averages = "  ".join(f"{s} {p:9.4f}" for s, p in result["averages"].items())
                    lines.append(f"window {result['window']}: {averages}")
                    print(lines[-1], flush=True)
                return
        except OSError:
            await asyncio.sleep(0.02)


async def build(worker: at.Worker) -> list[str]:
    feed_port, sink_port = free_ports(2)
    lines: list[str] = []
    ready, go = asyncio.Event(), asyncio.Event()
    async with serve(lambda connection: feed(connection, go), "127.0.0.1", feed_port):
        ticks_time = EventTime(lambda tick: tick["seq"])
        worker.dataflow(lambda scope: server_sink(
            window_averages(client_source(scope, f"ws://127.0.0.1:{feed_port}", time=ticks_time)),
            port=sink_port, ready=ready))
        await ready.wait()
        listening = asyncio.ensure_future(subscriber(sink_port, lines, go))
        await worker.step_until_done()
        await asyncio.wait_for(listening, 10)
    return lines


if __name__ == "__main__":
    at.execute(build)
