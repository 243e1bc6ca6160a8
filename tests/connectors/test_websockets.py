"""Real websockets on loopback: a server source, a client source, and a server pushing to subscribers."""

from __future__ import annotations

import asyncio
import json

import pytest

import aiotimely as at
from aiotimely.launch import free_ports
from aiotimely.connectors.websockets import client_source, server_sink, server_source

websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.asyncio.server import serve  # noqa: E402


def test_a_server_source_takes_messages_from_every_client(run):
    (port,) = free_ports(1)

    async def build(worker):
        stop, ready = asyncio.Event(), asyncio.Event()
        got = []
        probe = worker.dataflow(lambda s: server_source(s, port=port, stop=stop, ready=ready)
                                .inspect(got.append).probe())
        await ready.wait()

        async def client(name, n):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                for i in range(n):
                    await ws.send(json.dumps({"from": name, "i": i}))

        await asyncio.gather(client("a", 20), client("b", 30))
        while len(got) < 50:
            await worker.step()
        stop.set()
        await worker.step_until_done()
        return got, probe.done()

    got, done = run(build)[0]
    expected = [("a", i) for i in range(20)] + [("b", i) for i in range(30)]
    assert sorted((m["from"], m["i"]) for m in got) == sorted(expected)
    assert done


def test_a_client_source_follows_a_feed_until_it_closes(run):
    (port,) = free_ports(1)

    async def build(worker):
        async def feed(ws):
            for i in range(100):
                await ws.send(json.dumps(i))
            await ws.close()

        async with serve(feed, "127.0.0.1", port):
            got = []
            worker.dataflow(lambda s: client_source(s, f"ws://127.0.0.1:{port}").inspect(got.append))
            await worker.step_until_done()
        return got

    assert run(build)[0] == list(range(100))


def test_a_server_sink_pushes_to_subscribers_and_survives_one_leaving(run):
    (port,) = free_ports(1)

    async def build(worker):
        ready = asyncio.Event()
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: server_sink(inp.to_stream(s), port=port, ready=ready).probe())
        await ready.wait()
        stayer = await connect(f"ws://127.0.0.1:{port}")
        leaver = await connect(f"ws://127.0.0.1:{port}")
        for _ in range(50):
            await worker.step()
        received = {"stayer": [], "leaver": []}

        async def listen(ws, name, limit=None):
            async for message in ws:
                received[name].append(json.loads(message))
                if limit and len(received[name]) == limit:
                    await ws.close()
                    return

        listeners = [asyncio.ensure_future(listen(stayer, "stayer")),
                     asyncio.ensure_future(listen(leaver, "leaver", 5))]
        for t in range(20):
            inp.send({"t": t})
            inp.advance_to(t + 1)
            await probe.wait_beyond(t)
            await asyncio.sleep(0.002)
        inp.close()
        await worker.step_until_done()
        await asyncio.wait_for(listeners[0], 5)
        return received

    received = run(build)[0]
    assert [m["t"] for m in received["stayer"]] == list(range(20))
    assert [m["t"] for m in received["leaver"]] == list(range(5))


NESTED = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("message, why", [("{not json", "Expecting property name"),
                                          (NESTED, "nested too deeply")])
def test_a_message_a_server_source_cannot_decode_fails_the_computation_naming_it(run, message, why):
    """Broken JSON, or JSON nested deeper than the decoder can go (which raises RecursionError, not ValueError):
    either fails the computation with the same located error, naming the message, truncated."""
    (port,) = free_ports(1)

    async def build(worker):
        ready = asyncio.Event()
        got = []
        worker.dataflow(lambda s: server_source(s, port=port, ready=ready).inspect(got.append))
        await ready.wait()
        async with connect(f"ws://127.0.0.1:{port}") as ws:
            await ws.send(json.dumps({"ok": 1}))
            await ws.send(message)
            await worker.step_until_done()

    with pytest.raises(at.DataflowError) as caught:
        run(build)
    text = str(caught.value)
    assert f"WebsocketServer on 127.0.0.1:{port}: cannot decode {message[:20]!r}"[:-1] in text
    assert why in text and len(text) < 2000
    cause = caught.value.__cause__
    assert type(cause) is ValueError and cause.__cause__ is None and cause.__suppress_context__


@pytest.mark.parametrize("message, why", [("{not json", "Expecting property name"),
                                          (NESTED, "nested too deeply")])
def test_a_message_a_client_source_cannot_decode_fails_the_computation_naming_it(run, message, why):
    (port,) = free_ports(1)

    async def build(worker):
        async def feed(ws):
            await ws.send(json.dumps(1))
            await ws.send(message)
            await ws.wait_closed()

        async with serve(feed, "127.0.0.1", port):
            worker.dataflow(lambda s: client_source(s, f"ws://127.0.0.1:{port}"))
            await worker.step_until_done()

    with pytest.raises(at.DataflowError) as caught:
        run(build)
    text = str(caught.value)
    assert f"WebsocketClient of ws://127.0.0.1:{port}: cannot decode {message[:20]!r}"[:-1] in text
    assert why in text and len(text) < 2000
    assert type(caught.value.__cause__) is ValueError
