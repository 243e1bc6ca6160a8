"""The live dataflow page: the graph of a process's dataflows, and what holds time back, updating as it runs.

:func:`serve_ui` serves, on one port, the page (plain HTTP GETs for its static files,
answered by the ``websockets`` server's ``process_request`` hook) and a websocket at
``/ws`` on which it pushes a frame (:mod:`.frames`) every :data:`INTERVAL` seconds,
whenever something changed. The page lays the graph out with dagre (vendored under
``static/``, so it works offline) and writes each operator's input frontiers,
capabilities held, queue depths and rate into it in place; an operator that holds
time back is highlighted, with the reason, in a panel beside the graph.

The page needs the ``websockets`` package: ``pip install 'aiotimely[ui]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
from http import HTTPStatus
from importlib import resources
from typing import TYPE_CHECKING, Any, Sequence

from .frames import LiveFeed
from .serving import Served
from .view import SchedulerView

if TYPE_CHECKING:
    from ..comm.cluster import Cluster

__all__ = ["serve_ui", "INTERVAL", "SHARE", "static_files"]

INTERVAL = 0.25
"""Seconds between two looks at the workers while a page is open; a frame is sent only when what the page
shows changed."""
SHARE = 5.0
"""A look that took ``s`` seconds is followed by a pause of at least ``SHARE * s`` (the page takes at most about a
fifth of the event loop, for big graphs)."""

log = logging.getLogger("aiotimely.ui")


def static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files by URL path (``"/"`` for the page itself), with their content types."""
    files: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        if entry.is_file():
            kind = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind.endswith("javascript"):
                kind += "; charset=utf-8"
            files["/static/" + entry.name] = (entry.read_bytes(), kind)
    files["/"] = files["/static/index.html"]
    return files


async def serve_ui(schedulers: Sequence[SchedulerView], port: int = 0, *, host: str = "127.0.0.1",
                   process: int = 0, cluster: Cluster | None = None) -> Served:
    """Serve the live page of ``schedulers`` (this process's workers' views, ``worker.scheduler_view``) at
    ``http://host:port/`` (``port`` 0: any free port; the returned ``Served.url`` says which), until
    ``await served.close()``. Call it on the workers' event loop. ``process`` (or ``cluster``, which knows) is
    this process's index in a computation over several; the page then shows this process's workers."""
    try:
        from websockets.asyncio.server import ServerConnection, broadcast, serve
        from websockets.datastructures import Headers
        from websockets.http11 import Request, Response
    except ImportError:
        raise ImportError("the live dataflow page needs the websockets package: pip install 'aiotimely[ui]'") from None

    files = static_files()
    # every process runs as many workers as this one (execute's layout), unless the cluster says otherwise
    processes = max(1, schedulers[0].peers // len(schedulers)) if schedulers else 1
    if cluster is not None:
        process, processes = cluster.index, cluster.processes
    feed = LiveFeed(list(schedulers), process=process, processes=processes)
    clients: set[ServerConnection] = set()

    def answer(connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/ws":
            return None  # the websocket handshake goes on
        if path == "/frame.json":
            body, kind = current().encode(), "application/json"
        elif path in files:
            body, kind = files[path]
        else:
            return connection.respond(HTTPStatus.NOT_FOUND, f"no {path} here: the live page is at /\n")
        headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", "no-cache")])
        return Response(200, "OK", headers, body)

    def current() -> str:
        """The workers as they are now (the pages open get it too, if it is news)."""
        text = feed.frame()
        if text is not None and clients:
            broadcast(clients, text)
        assert feed.latest is not None
        return feed.latest

    async def talk(connection: ServerConnection) -> None:
        frame = current()
        clients.add(connection)
        try:
            await connection.send(frame)
            await connection.wait_closed()
        finally:
            clients.discard(connection)

    async def push() -> None:
        loop = asyncio.get_running_loop()
        while True:
            spent = 0.0
            if clients:  # nobody watching: no snapshots taken
                start = loop.time()
                try:
                    text = feed.frame()
                except Exception:  # a look at a worker between two of its states: log it, look again later
                    log.exception("the live page could not take a snapshot of the workers")
                    text = None
                if text is not None:
                    broadcast(clients, text)
                spent = loop.time() - start
            # a big graph takes long to look at: look less often, so the page costs the workers at most a fifth
            await asyncio.sleep(max(INTERVAL, SHARE * spent))

    server = await serve(talk, host, port, process_request=answer, compression=None,
                         logger=logging.getLogger("aiotimely.ui.websockets"))
    pusher = asyncio.get_running_loop().create_task(push(), name="aiotimely live page")
    bound = server.sockets[0].getsockname()[1] if server.sockets else port

    async def close() -> None:
        pusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pusher
        server.close()
        await server.wait_closed()

    return Served(_url(host, bound), close)


def _url(host: str, port: Any) -> str:
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"  # listening everywhere: this machine's loopback reaches it
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"
