"""Run a dataflow on one or more workers of this process and collect what its output streams carried, by time.

``build(scope)`` builds the dataflow on each worker and returns the stream to
collect (or a dict of named streams); every worker captures its share, and the
result merges them: an :class:`~aiotimely.testing.Outputs` (records by time, and the
final frontier). A run that does not complete within ``timeout`` seconds fails
with :class:`DataflowTimeout`, showing what was collected and where the frontier
stopped, instead of hanging the test suite.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Mapping, Union, overload

from ..dataflow.capture import Captured, capture
from ..dataflow.failures import ErrorPolicy
from ..dataflow.stream import StreamCore
from ..execution import Worker, execute_async
from ..worker.loop import run
from .outputs import Outputs

if TYPE_CHECKING:
    from ..scope import Scope
    from ..stream import Stream

__all__ = ["run_dataflow", "run_dataflow_async", "DataflowTimeout", "Build", "collect", "merge"]

TIMEOUT = 60.0
"""Seconds a test run may take by default before it fails with :class:`DataflowTimeout`."""

Build = Callable[["Scope[Stream[Any]]"], Union["Stream[Any]", Mapping[str, "Stream[Any]"]]]
"""A dataflow under test: ``build(scope)`` returns the stream to collect, or a dict of named streams."""


class DataflowTimeout(TimeoutError):
    """A test run did not complete in time; the message shows what was collected and the frontiers reached."""


def collect(result: Any, where: str = "build") -> dict[str | None, Captured]:
    """Capture the stream(s) a build function returned, on this worker: ``{None: capture}`` for one stream,
    ``{name: capture}`` for a dict of them."""
    if isinstance(result, StreamCore):
        return {None: capture(result)}
    if isinstance(result, Mapping) and result and all(isinstance(s, StreamCore) for s in result.values()):
        return {str(name): capture(stream) for name, stream in result.items()}
    raise TypeError(f"{where} returned {result!r}: a dataflow under test must return the stream to collect, "
                    "or a dict of named streams")


def merge(per_worker: Mapping[int, Mapping[str | None, Any]], minimum: Any = 0) -> Any:
    """The :class:`Outputs` of every worker's captures merged (a dict of them, by name, for named streams)."""
    names = next(iter(per_worker.values())).keys() if per_worker else [None]
    merged = {name: Outputs.from_events({w: captures[name] for w, captures in per_worker.items()}, minimum)
              for name in names}
    return merged[None] if list(merged) == [None] else merged


@overload
def run_dataflow(build: Callable[[Scope[Stream[Any]]], Stream[Any]], *, workers: int = 1, timestamp: Any = int,
                 timeout: float = TIMEOUT, loop: str = "auto", errors: ErrorPolicy = "raise") -> Outputs: ...


@overload
def run_dataflow(build: Callable[[Scope[Stream[Any]]], Mapping[str, Stream[Any]]], *, workers: int = 1,
                 timestamp: Any = int, timeout: float = TIMEOUT, loop: str = "auto",
                 errors: ErrorPolicy = "raise") -> dict[str, Outputs]: ...


def run_dataflow(build: Build, *, workers: int = 1, timestamp: Any = int, timeout: float = TIMEOUT,
                 loop: str = "auto", errors: ErrorPolicy = "raise") -> Any:
    """Build the dataflow with ``build(scope)`` on ``workers`` workers of this process, run it to completion,
    and return what the returned stream carried (:class:`Outputs`), or a dict of them for a dict of streams.

    ``timestamp`` is the dataflow's timestamp type, ``errors`` its error policy (as for ``worker.dataflow``);
    ``loop`` the event loop (as for :func:`aiotimely.execute`).
    Raises what the dataflow raised, or :class:`DataflowTimeout` after ``timeout`` seconds."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False  # (run outside the handler: what fails in the dataflow is not chained to this error)
    else:
        running = True
    if not running:
        return run(run_dataflow_async(build, workers=workers, timestamp=timestamp, timeout=timeout, errors=errors),
                   loop)
    raise RuntimeError("run_dataflow runs an event loop of its own, and cannot from inside a running one (an async "
                       "test): use 'await run_dataflow_async(build, ...)' there")


async def run_dataflow_async(build: Build, *, workers: int = 1, timestamp: Any = int,
                             timeout: float = TIMEOUT, errors: ErrorPolicy = "raise") -> Any:
    """:func:`run_dataflow` on the running event loop (an ``async`` test's)."""
    capturing = Capturing(build, timestamp, errors)
    task = asyncio.ensure_future(execute_async(capturing.on_worker, workers=workers))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:  # what was collected, before stopping the workers changes the frontiers
            raise DataflowTimeout(_timeout_message(capturing.where, workers, timeout, capturing.so_far()))
        task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=10.0)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the error raised (if any) is the test's
    return capturing.outputs()


class Capturing:
    """Builds ``build(scope)``'s dataflow on each worker (``on_worker``, a build function for ``execute``) and
    captures what the streams it returns carry, to merge over the workers once they are done."""

    def __init__(self, build: Build, timestamp: Any = int, errors: ErrorPolicy = "raise") -> None:
        self.build = build
        self.timestamp = timestamp
        self.errors: ErrorPolicy = errors
        self.where = getattr(build, "__qualname__", repr(build))
        """What errors and timeouts call the build function."""
        self.captures: dict[int, dict[str | None, Captured]] = {}
        self.minimum: Any = 0

    def on_worker(self, worker: Worker) -> None:
        def make(scope: Scope[Stream[Any]]) -> None:
            self.minimum = scope.ttype.minimum
            self.captures[worker.index] = collect(self.build(scope), self.where)

        name = getattr(self.build, "__name__", "")
        worker.dataflow(make, name=name if name.isidentifier() else None, timestamp=self.timestamp,
                        errors=self.errors)

    def outputs(self) -> Any:
        """What every worker captured, merged (:class:`Outputs`, or a dict of them)."""
        return merge(self.captures, self.minimum)

    def so_far(self) -> Any:
        """What was captured so far, or ``None`` if no worker built its dataflow yet."""
        return self.outputs() if self.captures else None


def _timeout_message(where: str, workers: int, timeout: float, so_far: Any) -> str:
    lines = [f"the dataflow of {where} on {workers} worker{'s' if workers != 1 else ''} did not complete within "
             f"{timeout} s (a source that never closes? an input left open?)"]
    if so_far is None:
        lines.append("it was not built yet")
    else:
        for name, outputs in (so_far.items() if isinstance(so_far, dict) else [(None, so_far)]):
            lines.append(f"collected so far{'' if name is None else f' from {name!r}'}:")
            lines.append(outputs.format("  "))
    return "\n".join(lines)
