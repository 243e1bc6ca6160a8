"""The guide's service pattern, as a real Starlette application served by uvicorn: the worker lives in the app's
lifespan, handlers only feed the dataflow, a health endpoint answers from ``worker.failure``, and ``on_error`` asks
uvicorn to stop (SIGTERM: it stops gracefully). ``STOP_DELAY`` seconds pass between the failure and the stop
(so that a test sees the handlers answer 503 meanwhile)::

    python -m uvicorn tests.hardening.service_app:app --port PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

import aiotimely as at


def stop_the_server(error: BaseException) -> None:
    asyncio.get_running_loop().call_later(float(os.environ.get("STOP_DELAY", "0")), signal.raise_signal,
                                          signal.SIGTERM)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with at.Worker(on_error=stop_the_server) as worker:
        inp: at.InputHandle[int] = at.InputHandle()
        worker.dataflow(lambda scope: inp.to_stream(scope).map(lambda x: 100 // x).probe(), name="ratios")
        app.state.worker, app.state.inp = worker, inp
        yield
        if worker.failure is None:
            inp.close()


async def send(request: Request) -> Any:
    inp = request.app.state.inp
    try:
        inp.send(int(request.path_params["x"]))
        inp.advance_to(inp.time + 1)
    except at.DataflowError as error:            # the dataflow failed: the request fails with it
        return PlainTextResponse(str(error), status_code=503)
    return PlainTextResponse("ok")


async def health(request: Request) -> Any:
    failure = request.app.state.worker.failure
    return JSONResponse({"failure": None if failure is None else str(failure)}, status_code=503 if failure else 200)


app = Starlette(routes=[Route("/send/{x}", send), Route("/health", health)], lifespan=lifespan)
