"""websockets in and out: a server that accepts clients, a client that follows a feed, a server that pushes.

Needs ``pip install 'aiotimely[websockets]'``. Messages are JSON by default
(``decode=`` / ``encode=`` change that). Each server runs on worker 0 of the
computation (the process that hosts it), bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable

from .aiter import TimePolicy, from_aiter

__all__ = ["server_source", "client_source", "server_sink"]

log = logging.getLogger("aiotimely.connectors.websockets")


def _websockets():
    try:
        from websockets.asyncio.client import connect
        from websockets.asyncio.server import serve
        from websockets.exceptions import ConnectionClosed
    except ImportError:
        raise ImportError("the websockets connector needs: pip install 'aiotimely[websockets]'") from None
    return serve, connect, ConnectionClosed


async def _until(queue: asyncio.Queue, stop: asyncio.Event | None) -> Any:
    """The next item of ``queue``, or the stop sentinel once ``stop`` is set."""
    if stop is None:
        return await queue.get()
    getter = asyncio.ensure_future(queue.get())
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait([getter, stopper], return_when=asyncio.FIRST_COMPLETED)
    if getter in done:
        stopper.cancel()
        return getter.result()
    getter.cancel()
    return _STOP


_STOP = object()


def server_source(
    scope: Any,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    decode: Callable[[Any], Any] = json.loads,
    time: TimePolicy | None = None,
    stop: asyncio.Event | None = None,
    ready: asyncio.Event | None = None,
    name: str = "WebsocketServer",
) -> Any:
    """A stream of every message any client sends to a server at ``host:port`` (on worker 0).

    The stream ends when ``stop`` is set; ``ready`` is set once the server listens.
    A message that ``decode`` refuses fails the computation, naming it.
    """
    serve, _, ConnectionClosed = _websockets()

    async def messages():
        queue: asyncio.Queue = asyncio.Queue(maxsize=10_000)

        async def handler(connection):
            try:
                async for message in connection:
                    await queue.put(message)        # a full queue slows the client down: back-pressure
            except ConnectionClosed:
                pass

        async with serve(handler, host, port):
            if ready is not None:
                ready.set()
            while True:
                message = await _until(queue, stop)
                if message is _STOP:
                    return
                try:
                    yield decode(message)
                except ValueError as e:
                    raise ValueError(f"{name} on {host}:{port}: cannot decode {message!r:.200}: {e}") from None

    return from_aiter(scope, messages(), time=time, name=name)


def client_source(
    scope: Any,
    url: str,
    *,
    decode: Callable[[Any], Any] = json.loads,
    time: TimePolicy | None = None,
    name: str = "WebsocketClient",
) -> Any:
    """A stream of the messages of the feed at ``url`` (followed by worker 0); it ends when the feed closes."""
    _, connect, ConnectionClosed = _websockets()

    async def messages():
        async with connect(url) as connection:
            try:
                async for message in connection:
                    yield decode(message)
            except ConnectionClosed:
                return

    return from_aiter(scope, messages(), time=time, name=name)


def server_sink(
    stream: Any,
    host: str = "127.0.0.1",
    port: int = 8766,
    *,
    encode: Callable[[Any], Any] = json.dumps,
    ready: asyncio.Event | None = None,
    queue_limit: int = 10_000,
    name: str = "WebsocketSink",
) -> Any:
    """Push every record to every client connected to a server at ``host:port`` (on worker 0).

    A client that disconnects is forgotten, and one that falls ``queue_limit``
    messages behind is disconnected; neither stops the dataflow. Records reaching
    other workers are exchanged to worker 0. Returns the stream, unchanged.
    """
    serve, _, ConnectionClosed = _websockets()
    scope = stream.scope
    subscribers: dict[Any, asyncio.Queue] = {}

    async def handler(connection):
        queue: asyncio.Queue = asyncio.Queue(maxsize=queue_limit)
        subscribers[connection] = queue
        try:
            while True:
                message = await queue.get()
                if message is _STOP:
                    return
                await connection.send(message)
        except ConnectionClosed:
            pass
        finally:
            subscribers.pop(connection, None)

    def publish(message: Any) -> None:
        for connection, queue in list(subscribers.items()):
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                log.warning("%s: a subscriber fell %d messages behind; disconnecting it", name, queue_limit)
                subscribers.pop(connection, None)
                asyncio.ensure_future(connection.close())

    async def logic(input, output, cap):
        cap.drop()
        if scope.worker.index != 0:
            async for _ in input.activations():
                for time, batch in input.drain():
                    output.session(time).give_many(batch)
            return
        async with serve(handler, host, port):
            if ready is not None:
                ready.set()
            async for _ in input.activations():
                for time, batch in input.drain():
                    for record in batch:
                        publish(encode(record))
                    output.session(time).give_many(batch)
            for queue in list(subscribers.values()):
                await queue.put(_STOP)          # let every subscriber receive what was published
            while subscribers:
                await asyncio.sleep(0.005)

    return stream.unary_frontier(logic, exchange=lambda record: 0, name=name)
