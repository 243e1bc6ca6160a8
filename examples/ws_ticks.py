"""Websocket ticks -> windowed average per symbol -> websocket subscribers, all on loopback.

A feed server sends 300 price ticks (three symbols, seeded random walk) to
whoever connects; aiotimely follows the feed (``client_source``), gives each tick
the time of its 50-tick window (``EventTime``), averages prices per symbol and
window with one capability per open window, and pushes each window's averages to
its subscribers (``server_sink``), one of which prints them.

Run:  python examples/ws_ticks.py        (needs: pip install 'aiotimely[websockets]')
"""

from __future__ import annotations

import asyncio
import json
import random

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

import aiotimely as at
from aiotimely.cli import free_ports
from aiotimely.connectors import EventTime
from aiotimely.connectors.websockets import client_source, server_sink

TICKS, WINDOW = 300, 50


async def feed(connection, go: asyncio.Event) -> None:
    await go.wait()                                  # once the subscriber listens
    rng = random.Random(7)
    prices = {"AAA": 100.0, "BBB": 50.0, "CCC": 10.0}
    for seq in range(TICKS):
        symbol = rng.choice(sorted(prices))
        prices[symbol] = round(prices[symbol] * (1 + rng.uniform(-0.01, 0.01)), 4)
        await connection.send(json.dumps({"seq": seq, "symbol": symbol, "price": prices[symbol]}))
    await connection.close()


def window_averages(ticks: at.Stream) -> at.Stream:
    @ticks.unary_frontier(name="WindowAverage")
    async def averages(input, output, cap):
        cap.drop()
        windows: dict = {}                          # window -> [capability, {symbol: [sum, count]}]
        async for _ in input.activations():
            for time, batch in input.drain():
                window = windows.get(time.time)
                if window is None:
                    window = windows[time.time] = [time.retain(), {}]
                for tick in batch:
                    acc = window[1].setdefault(tick["symbol"], [0.0, 0])
                    acc[0] += tick["price"]
                    acc[1] += 1
            for w in sorted(w for w in windows if not input.frontier.less_equal(w)):
                window_cap, sums = windows.pop(w)
                with window_cap:
                    output.session(window_cap).give({
                        "window": w, "averages": {s: round(total / n, 4) for s, (total, n) in sorted(sums.items())}})

    return averages


async def subscriber(port: int, lines: list, connected: asyncio.Event) -> None:
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


async def build(worker: at.Worker) -> list:
    feed_port, sink_port = free_ports(2)
    lines: list = []
    ready, go = asyncio.Event(), asyncio.Event()
    async with serve(lambda connection: feed(connection, go), "127.0.0.1", feed_port):
        ticks_time = EventTime(lambda tick: tick["seq"] // WINDOW)
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
