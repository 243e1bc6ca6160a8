"""The servers for looking inside a process of :func:`~aiotimely.execute` (its metrics and its live dataflow
page), each said in one line on stderr, and the handles that close them once."""

from __future__ import annotations

import asyncio
import logging
import sys

from ..comm.cluster import Cluster
from ..observe.serving import Served
from ..observe.view import SchedulerView

__all__ = ["serve", "port_of", "closing_once", "close_quietly"]

log = logging.getLogger("aiotimely")


async def serve(views: list[SchedulerView], process: int, cluster: Cluster | None, metrics_port: int | None,
                ui_port: int | None) -> list[Served]:
    """Start the metrics endpoint and the live view asked for, of this process's workers ``views``."""
    served: list[Served] = []
    try:
        if metrics_port is not None:
            from ..observe.metrics import serve_metrics

            handle = await serve_metrics(views, port_of(metrics_port, process), process=process, cluster=cluster)
            served.append(handle)
            print(f"aiotimely: metrics at {handle.url} (process {process})", file=sys.stderr, flush=True)
        if ui_port is not None:
            from ..observe.ui import serve_ui

            handle = await serve_ui(views, port_of(ui_port, process), process=process, cluster=cluster)
            served.append(handle)
            print(f"aiotimely: live dataflow view at {handle.url} (process {process})", file=sys.stderr,
                  flush=True)
    except BaseException:
        for handle in served:
            await close_quietly(handle)
        raise
    return served


def port_of(port: int, process: int) -> int:
    """Process ``p`` listens on ``port + p`` (0: any free port)."""
    if port < 0 or port > 65535:
        raise ValueError(f"port {port} is not in 0..65535")
    return port + process if port else 0


def closing_once(served: Served) -> Served:
    """``served``, with a ``close`` that does nothing the second time (its user and the worker both close it)."""
    closed = False

    async def close() -> None:
        nonlocal closed
        if not closed:
            closed = True
            await served.close()

    return Served(served.url, close)


async def close_quietly(served: Served) -> None:
    """Close ``served``; a failure to is logged, not raised (the computation is stopping already)."""
    try:
        await served.close()
    except (asyncio.CancelledError, Exception) as exc:  # stopping already: what stopped it is what counts
        log.warning("could not close %s: %s: %s", served.url, type(exc).__name__, exc)
