"""What the worker knows of dataflows, and what dataflow code may ask of the worker.

The worker runs dataflows only through :class:`Schedule`: run a round, say whether
something outside may still wake it, say what keeps it from completing, close.
Dataflow code reaches the worker only through :class:`WorkerHandle`: its place in
the computation, its fabric, activations, a task group for helper tasks,
waiters that fail with the computation, and the ``"timely"`` log.

A worker waited on that does nothing for a while says what holds time back: who waits,
in words (:class:`Awaited`), and what each dataflow holds (:class:`Hold`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterator, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from ..comm.fabric import Fabric
    from .activations import Activations
    from .logging import Logger, TimelyEvent
    from .statistics import Counted

__all__ = ["Awaited", "Hold", "Schedule", "WorkerHandle"]

T = TypeVar("T")


class Awaited(NamedTuple):
    """What a task waiting on the worker waits for, in words: for a stall report
    (:meth:`WorkerHandle.describe_waits`)."""

    what: str
    """E.g. ``a probe in dataflow 'x' waits for time 0 to complete``."""
    dataflow: int | None
    """The index of the dataflow it waits on (``None``: any of the worker's)."""
    scope: tuple[int, ...] | None = None
    """The path of the scope whose ``time`` it waits to pass (``None``: no particular time)."""
    time: Any = None


class Hold(NamedTuple):
    """A time an operator of a dataflow holds back on one worker: by a capability, or by records waiting at its
    input; with what releases it, in words."""

    dataflow: int
    scope: tuple[int, ...]
    """The path of the operator's scope: times compare within a scope."""
    time: Any
    less_equal: Callable[[Any, Any], bool]
    """The scope's partial order."""
    operator: str
    """The operator in words: name, index, scopes, dataflow, worker."""
    why: str
    """What it waits for, and how to release the time."""
    on_io: bool
    """The operator waits for something outside the dataflow (a connection, a timer): it may well be idle."""


class Schedule(Protocol):
    """A dataflow (its root scope), as the worker runs it."""

    name: str
    path: tuple[int, ...]

    def schedule(self) -> bool:
        """Run what asked to run; return whether the dataflow is still incomplete."""
        ...

    def may_be_woken(self) -> bool:
        """True while something outside the worker (an awaited future, an activator) may still wake it."""
        ...

    def blockers(self) -> list[str]:
        """What keeps it from completing, in words, for a user."""
        ...

    def holds(self) -> list[Hold]:
        """Every time its operators hold back on this worker (for a stall report: it runs then only)."""
        ...

    async def close(self) -> None:
        """The computation is shutting down: stop every operator's logic, letting its cleanup run."""
        ...

    def operators(self) -> Iterator[Counted]:
        """Every operator of the dataflow, nested scopes' too (for statistics)."""
        ...


class WorkerHandle(Protocol):
    """The part of a worker that dataflow code uses."""

    index: int
    peers: int
    fabric: Fabric
    activations: Activations
    operators_run: int
    logging: Logger[TimelyEvent] | None
    """The ``"timely"`` log while someone listens, else ``None``: check it, then log (see :mod:`.logging`)."""

    def activate(self, path: tuple[int, ...]) -> None:
        """Schedule the operator or scope at ``path`` for the next round (from the worker's thread)."""
        ...

    def activate_later(self, path: tuple[int, ...]) -> None:
        """Schedule the operator at ``path`` for the next round, not again in the current one."""
        ...

    def activate_threadsafe(self, path: tuple[int, ...]) -> None:
        """:meth:`activate`, from any thread."""
        ...

    def activator(self, path: tuple[int, ...]) -> Callable[[], None]:
        """A function that activates ``path`` (the worker's thread only)."""
        ...

    def call_in_worker_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` now if on the worker's thread, else soon on it."""
        ...

    def at_build_end(self, fn: Callable[[], None], dataflow: int | None = None) -> None:
        """Call ``fn()`` once the worker's build is over (its build function returned or its block ended); with
        ``dataflow`` (its index), only if that dataflow is not complete by then (``fn`` is dropped when it
        completes, and what it holds with it)."""
        ...

    def on_stop(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` when the computation is asked to stop gracefully (a source ends then; at once if it was
        asked already); returns a function that forgets ``fn``."""
        ...

    def on_final_snapshot(self, take: Callable[[], asyncio.Future[None]]) -> Callable[[], None]:
        """A recoverable dataflow: ``take()`` is called when the computation is suspended (a stop of a recoverable
        computation) and returns a future done once the dataflow's final snapshot is complete everywhere;
        returns a function that forgets ``take``."""
        ...

    def waiter(self) -> asyncio.Future[None]:
        """A future on the worker's loop that fails with the computation's error if the worker stops first."""
        ...

    def describe_waits(self, owner: T, describe: Callable[[T], list[Awaited]]) -> None:
        """``describe(owner)`` says what ``owner`` (a probe) waits for now, if anything: asked only when a worker
        waited on does nothing for a while, to say so (so a wait costs nothing more); ``owner`` is held weakly."""
        ...

    def watch_failure(self, owner: T, told: Callable[[T, BaseException], None]) -> None:
        """Call ``told(owner, error)`` as soon as the computation fails (at once if it has), holding ``owner``
        weakly (an input refuses records from then on, at no cost per record)."""
        ...

    def start_soon(self, coro: Coroutine[Any, Any, Any], *, name: str,
                   error: Callable[[Exception], BaseException] | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a helper task owned by the worker: cancelled and awaited when it stops; if it fails,
        the computation fails with ``error(exception)`` (by default, an error naming ``name``)."""
        ...
