"""websockets in and out: a server that accepts clients, a client that follows a feed, a server that pushes.

Needs ``pip install 'aiotimely[websockets]'``. Messages are JSON by default
(``decode=`` / ``encode=`` change that). Each server runs on worker 0 of the
computation (the process that hosts it), bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

from .aiter import TimePolicy, from_aiter

if TYPE_CHECKING:
    from websockets.asyncio.client import connect as _Connect
    from websockets.asyncio.server import Server, ServerConnection
    from websockets.exceptions import ConnectionClosed as _ConnectionClosed

    from ..dataflow import Capability, InputPort, OperatorOutput

    from ..scope import Scope
    from ..stream import Stream

    _Serve = Callable[[Callable[[ServerConnection], Awaitable[None]], str, int], Server]

__all__ = ["server_source", "client_source", "server_sink"]

log = logging.getLogger("aiotimely.connectors.websockets")


def _websockets() -> tuple[_Serve, type[_Connect], type[_ConnectionClosed]]:
    try:
        from websockets.asyncio.client import connect
        from websockets.asyncio.server import serve
        from websockets.exceptions import ConnectionClosed
    except ImportError:
        raise ImportError("the websockets connector needs: pip install 'aiotimely[websockets]'") from None
    return serve, connect, ConnectionClosed


_STOP = object()


def _decoded(decode: Callable[[Any], Any], message: Any, where: str) -> Any:
    """``decode(message)``; if it refuses the message — as malformed (``ValueError``) or nested too deeply to
    decode (``RecursionError``: JSON nested some thousands deep) — a ``ValueError`` naming ``where`` and the
    message, truncated."""
    try:
        return decode(message)
    except (ValueError, RecursionError) as e:
        why = f"nested too deeply ({e})" if isinstance(e, RecursionError) else str(e)
        raise ValueError(f"{where}: cannot decode {message!r:.200}: {why}") from None


async def _stop_when_set(stop: asyncio.Event, queue: asyncio.Queue[Any]) -> None:
    """Once ``stop`` is set, queue the stop sentinel behind the messages already received."""
    await stop.wait()
    await queue.put(_STOP)


def server_source(
    scope: Scope[Stream],
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    decode: Callable[[Any], Any] = json.loads,
    time: TimePolicy | None = None,
    stop: asyncio.Event | None = None,
    ready: asyncio.Event | None = None,
    name: str = "WebsocketServer",
) -> Stream:
    """A stream of every message any client sends to a server at ``host:port`` (on worker 0).

    The stream ends when ``stop`` is set, after the messages received before it;
    ``ready`` is set once the server listens. In a recoverable dataflow it resumes
    as a live feed: messages received after the snapshot, or while the computation
    was down, are not seen again.
    A message that ``decode`` refuses (a ``ValueError``, or a ``RecursionError``: nested too deeply) fails the
    computation with a ``ValueError`` naming it.
    """
    serve, _, ConnectionClosed = _websockets()
    worker = scope.worker

    async def messages() -> AsyncIterator[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=10_000)

        async def handler(connection: ServerConnection) -> None:
            try:
                async for message in connection:
                    await queue.put(message)        # a full queue slows the client down: back-pressure
            except ConnectionClosed:
                pass

        async with serve(handler, host, port):
            if ready is not None:
                ready.set()
            watch = None if stop is None else worker.start_soon(_stop_when_set(stop, queue),
                                                                name=f"{name}'s stop watch")
            try:
                while True:
                    message = await queue.get()
                    if message is _STOP:
                        return
                    yield _decoded(decode, message, f"{name} on {host}:{port}")
            finally:
                if watch is not None:
                    watch.cancel()

    return from_aiter(scope, messages(), time=time, resume="live", name=name)


def client_source(
    scope: Scope[Stream],
    url: str,
    *,
    decode: Callable[[Any], Any] = json.loads,
    time: TimePolicy | None = None,
    name: str = "WebsocketClient",
) -> Stream:
    """A stream of the messages of the feed at ``url`` (followed by worker 0); it ends when the feed closes.

    A message that ``decode`` refuses fails the computation as in :func:`server_source`."""
    _, connect, ConnectionClosed = _websockets()

    async def messages() -> AsyncIterator[Any]:
        async with connect(url) as connection:
            try:
                async for message in connection:
                    yield _decoded(decode, message, f"{name} of {url}")
            except ConnectionClosed:
                return

    return from_aiter(scope, messages(), time=time, resume="live", name=name)


def server_sink(
    stream: Stream,
    host: str = "127.0.0.1",
    port: int = 8766,
    *,
    encode: Callable[[Any], Any] = json.dumps,
    ready: asyncio.Event | None = None,
    queue_limit: int = 10_000,
    name: str = "WebsocketSink",
) -> Stream:
    """Push every record to every client connected to a server at ``host:port`` (on worker 0).

    A client that disconnects is forgotten, and one that falls ``queue_limit``
    messages behind is disconnected; neither stops the dataflow. Records reaching
    other workers are exchanged to worker 0. Returns the stream, unchanged.
    """
    serve, _, ConnectionClosed = _websockets()
    worker = stream.scope.worker
    subscribers: dict[ServerConnection, asyncio.Queue[Any]] = {}
    finishing = [False]
    all_gone = asyncio.Event()

    async def handler(connection: ServerConnection) -> None:
        if finishing[0]:
            return                              # the stream is complete: nothing more to push
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=queue_limit)
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
            if not subscribers:
                all_gone.set()

    def publish(message: Any) -> None:
        for connection, queue in list(subscribers.items()):
            try:
                queue.put_nowait(message)
            except asyncio.QueueFull:
                log.warning("%s: a subscriber fell %d messages behind; disconnecting it", name, queue_limit)
                subscribers.pop(connection, None)
                worker.start_soon(connection.close(), name=f"{name}: disconnecting a slow subscriber")

    async def logic(input: InputPort, output: OperatorOutput, cap: Capability) -> None:
        cap.drop()
        if worker.index != 0:
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
            finishing[0] = True
            if subscribers:
                all_gone.clear()
                for queue in list(subscribers.values()):
                    await queue.put(_STOP)      # let every subscriber receive what was published
                await all_gone.wait()

    result: Stream = stream.unary_frontier(logic, exchange=lambda record: 0, name=name)
    return result
