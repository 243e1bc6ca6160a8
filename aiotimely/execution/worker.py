"""The :class:`Worker` facade: one timely worker on an asyncio event loop, as an application or a build function
sees it (building dataflows, stepping, failure, looking inside), over the worker's
:class:`~aiotimely.worker.Scheduler`."""

from __future__ import annotations

import asyncio
import inspect
import logging
from types import TracebackType
from typing import Any, Callable, TypeVar, cast, overload

from ..dataflow.failures import ErrorPolicy
from ..dataflow.input import InputHandle
from ..dataflow.scope import BuildContext, Dataflow
from ..dataflow.state import Snapshotter, StateStore
from ..observe.serving import Served
from ..observe.view import SchedulerView
from ..scope import Scope
from ..stream import Stream
from ..worker import Computation, Scheduler, WorkerStatistics
from ..worker.computation import Halted
from ..worker.computation import stall_after as _stall_after
from ..worker.logging import LogRegistry
from .servers import closing_once
from .stopping import drain

__all__ = ["Worker", "start_worker", "end_build", "stop_worker"]

R = TypeVar("R")

log = logging.getLogger("aiotimely")


class Worker:
    """One timely worker on an asyncio event loop.

    Use ``async with aiotimely.Worker() as worker:`` inside an application (one
    worker, the running loop), or let :func:`aiotimely.execute` create several.

    When a dataflow fails inside the block, the failure is logged at once (logger ``aiotimely``, ERROR, with its
    traceback), the worker's inputs refuse records, ``worker.failure`` holds it and ``await worker.failed()``
    returns it; ``on_error(error)`` is called with it, and with ``cancel_on_error=True`` the task running the block
    is cancelled, as an ``asyncio.TaskGroup`` cancels its body, and the block raises the failure. ``stall_after``
    (seconds; default ``AIOTIMELY_STALL_AFTER`` or :data:`~aiotimely.worker.computation.STALL_AFTER`, 10; 0: never)
    is how long a wait on the worker (a probe's, ``step_while``) may see it do nothing before it logs what holds
    time back.
    """

    def __init__(self, index: int = 0, peers: int = 1, *, computation: Computation | None = None,
                 recovery: StateStore | None = None, on_error: Callable[[BaseException], Any] | None = None,
                 cancel_on_error: bool = False, stall_after: float | None = None) -> None:
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be a function called with the computation's failure, not "
                            f"{type(on_error).__name__} {on_error!r}")
        if computation is None:
            computation = Computation(peers, recoverable=recovery is not None, stall_after=stall_after)
        elif stall_after is not None:
            computation.stall_after = _stall_after(stall_after)
        self._scheduler = Scheduler(index, peers, computation)
        self._recovery = recovery
        self._served: list[Served] = []
        self._on_error = on_error
        self._cancel_on_error = cancel_on_error
        self._body: asyncio.Task[Any] | None = None
        """The task running the ``async with`` block, while it runs (an application's worker only)."""
        self._cancelled = False
        """The worker cancelled the block (``cancel_on_error``)."""
        self._stopped = False
        self._failed_waiters: list[asyncio.Future[BaseException | None]] = []
        self._reactions: set[asyncio.Future[Any]] = set()
        computation.on_failure(self._computation_failed)

    @property
    def index(self) -> int:
        """This worker's index, in ``range(peers)``."""
        return self._scheduler.index

    @property
    def peers(self) -> int:
        """The number of workers in the computation (every process's)."""
        return self._scheduler.peers

    @property
    def scheduler_view(self) -> SchedulerView:
        """The worker's scheduler, read only, as :mod:`aiotimely.observe` reads it: e.g.
        ``serve_ui([worker.scheduler_view])``, ``MetricsCollector([...])``, ``to_dot(worker.scheduler_view)``."""
        return self._scheduler

    # -- building ----------------------------------------------------------------------

    @overload
    def dataflow(self, fn: Callable[[Scope[Stream]], R], *, name: str | None = None,
                 timestamp: Any = int, errors: ErrorPolicy = "raise") -> R: ...

    @overload
    def dataflow(self, fn: None = None, *, name: str | None = None,
                 timestamp: Any = int, errors: ErrorPolicy = "raise") -> BuildContext[Scope[Stream]]: ...

    def dataflow(self, fn: Callable[[Scope[Stream]], R] | None = None, *, name: str | None = None,
                 timestamp: Any = int, errors: ErrorPolicy = "raise") -> Any:
        """Build a dataflow: ``worker.dataflow(fn)`` calls ``fn(scope)`` and returns its result, or
        ``async with worker.dataflow() as scope:`` builds it when the block ends.

        ``name`` is what errors and logs call it; by default, the name of ``fn`` (if it has one), else
        ``dataflow-N``. ``timestamp`` is the dataflow's timestamp type (``int`` by default). ``errors`` is the
        error policy of its record-at-a-time operators (``map``, ``flat_map``, ``filter``, ``inspect``,
        ``inspect_time``, ``map_in_place``, ``exchange``) not given one: ``"raise"`` (the first record that fails
        fails the dataflow), ``"skip"`` or ``"dead_letter"`` (see :meth:`Scope.dead_letters`).
        """
        _check_build_function(fn)
        index = self._scheduler.new_dataflow_index()
        store = self._recovery
        snapshots = (lambda root: Snapshotter(root, store)) if store is not None else None
        dataflow = Dataflow(self._scheduler, index, _dataflow_name(fn, name, index), timestamp, Stream,
                            snapshots, errors, scope_type=Scope)
        if fn is None:
            return BuildContext(cast("Scope[Stream]", dataflow.root), lambda: self._install(dataflow))
        return self._build(dataflow, fn)

    def _build(self, dataflow: Dataflow[Stream], fn: Callable[[Scope[Stream]], R]) -> R:
        """``fn(root)``, then the dataflow installed; if ``fn`` fails, the operators it built never run."""
        try:
            result = fn(cast("Scope[Stream]", dataflow.root))
        except BaseException:
            dataflow.root.abandon()  # (the operators built so far never run: their logic is closed unstarted)
            raise
        if asyncio.iscoroutine(result):
            result.close()
            raise TypeError("worker.dataflow(fn) needs a plain function; build asynchronously with "
                            "'async with worker.dataflow() as scope:'")
        self._install(dataflow)
        return result

    def _install(self, dataflow: Dataflow[Stream]) -> None:
        root = dataflow.root
        try:
            root._finish()
        except BaseException:
            root.abandon()
            raise
        self._scheduler.install(dataflow.index, root)
        root.start()

    # -- running ----------------------------------------------------------------------

    async def step(self) -> None:
        """Let the worker do one round of scheduling."""
        await self._scheduler.step()

    async def step_while(self, predicate: Callable[[], bool]) -> None:
        """Step while ``predicate()`` is true (e.g. ``lambda: probe.less_than(inp.time)``)."""
        await self._scheduler.step_while(predicate)

    async def step_until_done(self) -> None:
        """Run until every dataflow of this worker is complete."""
        await self._scheduler.step_until_done()

    def statistics(self) -> WorkerStatistics:
        """What the worker has done so far: rounds, dataflows, operator activations."""
        return self._scheduler.statistics()

    # -- failure ----------------------------------------------------------------------

    @property
    def failure(self) -> BaseException | None:
        """The error the computation failed with (an operator's :class:`~aiotimely.DataflowError`, a peer's
        :class:`~aiotimely.ClusterError`, ...), or ``None`` while it has not failed."""
        error = self._scheduler.computation.error
        return None if error is None or isinstance(error, (Halted, asyncio.CancelledError)) else error

    async def failed(self) -> BaseException | None:
        """Wait until the computation fails and return the error (at once if it has failed already); ``None``
        once the worker stopped without failing. E.g. ``raise await worker.failed()`` in a task of the
        application's ``asyncio.TaskGroup`` stops the application with the failure."""
        error = self.failure
        if error is not None or self._stopped:
            return error
        waiter: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self._failed_waiters.append(waiter)
        try:
            return await waiter
        finally:
            if waiter in self._failed_waiters:
                self._failed_waiters.remove(waiter)

    def _computation_failed(self, error: BaseException) -> None:
        """The computation failed (called at once, from :meth:`Computation.fail`): tell whoever asked."""
        body = self._body
        if body is not None:  # an application's block still running: nothing else would say it before it ends
            self._log_failure(error)
        if self._on_error is not None:
            self._call_on_error(self._on_error, error)
        self._answer_waiters(error)
        if body is not None and self._cancel_on_error and not body.done():
            self._cancelled = True
            body.cancel()

    def _log_failure(self, error: BaseException) -> None:
        """Say at once, with its traceback, that the computation failed, and what the block will see of it."""
        if self._cancel_on_error:
            then = "the block is cancelled, and raises it"
        else:
            then = ("waiting on the worker raises it, as leaving the block will (at.Worker(cancel_on_error=True) "
                    "cancels the block at once)")
        log.error("the computation failed, so every worker stopped: %s. The worker's InputHandles refuse records "
                  "from now on; %s", error, then, exc_info=(type(error), error, error.__traceback__))

    def _call_on_error(self, on_error: Callable[[BaseException], Any], error: BaseException) -> None:
        """``on_error(error)``, logged if it raises; what an ``async`` one returns runs as a task."""
        try:
            reaction = on_error(error)
        except Exception:
            log.exception("the on_error callback of the Worker raised (it was called with: %s)", error)
        else:
            if inspect.isawaitable(reaction):
                self._react(reaction)

    def _react(self, reaction: Any) -> None:
        """Run what an ``async`` on_error returned as a task, keeping it until it ends; log it if it fails."""
        task = asyncio.ensure_future(reaction)
        self._reactions.add(task)

        def done(task: asyncio.Future[Any]) -> None:
            self._reactions.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("the on_error callback of the Worker failed", exc_info=task.exception())

        task.add_done_callback(done)

    def _answer_waiters(self, answer: BaseException | None) -> None:
        """Whoever awaits :meth:`failed` gets ``answer``."""
        waiters, self._failed_waiters = self._failed_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(answer)

    def _ended(self) -> None:
        """The worker stopped: whoever awaits :meth:`failed` hears that it did not fail."""
        self._stopped = True
        self._answer_waiters(self.failure)

    def log_register(self) -> LogRegistry:
        """The worker's logs (timely's ``log_register``): ``insert("timely", callback)`` gets batches of
        ``(elapsed, worker, event)``, events being :data:`aiotimely.TimelyEvent` s; ``remove(name)`` stops one.
        Insert before building the dataflows to see them built (their ``OperatesEvent`` s and ``ChannelsEvent`` s)."""
        return self._scheduler.log_registry

    # -- async with ----------------------------------------------------------------------

    async def __aenter__(self) -> Worker:
        self._scheduler.start()
        self._body = asyncio.current_task()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        """The block ended: run every dataflow to completion. If the block's task was cancelled (Ctrl-C in
        ``asyncio.run``), stop gracefully first: the sources end, the inputs close and the dataflows drain (for
        up to :data:`~aiotimely.execution.STOP_GRACE` seconds); the ``CancelledError`` then goes on, as it would
        have. If the worker cancelled it (``cancel_on_error``), the block raises the failure instead, as an
        ``asyncio.TaskGroup`` does (unless the task was cancelled from outside too)."""
        scheduler = self._scheduler
        body, self._body = self._body, None
        ours = self._cancelled and body is not None and body.uncancel() == 0
        try:
            if exc_type is None:
                scheduler.end_build()
                await scheduler.step_until_done()
            elif issubclass(exc_type, asyncio.CancelledError) and scheduler.computation.error is None:
                await drain(scheduler)
        finally:
            served, self._served = self._served, []
            for handle in served:
                await handle.close()
            await self._stop()
        failure = self.failure
        if ours and failure is not None and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            raise failure

    async def _stop(self) -> None:
        """Stop the scheduler (its dataflows closed), then tell whoever awaits :meth:`failed`."""
        await self._scheduler.stop()
        self._ended()

    # -- looking inside ------------------------------------------------------------------

    async def serve_ui(self, port: int = 0, *, host: str = "127.0.0.1") -> Served:
        """Serve the live view of this worker's dataflows at ``http://host:port/`` (``port`` 0: any free one;
        the returned handle's ``url`` says which) until ``await served.close()`` or the end of the
        ``async with`` block. Needs ``pip install 'aiotimely[ui]'``."""
        from ..observe.ui import serve_ui

        return self._keep(await serve_ui([self.scheduler_view], port, host=host))

    async def serve_metrics(self, port: int = 0, *, host: str = "127.0.0.1") -> Served:
        """Serve this worker's metrics for Prometheus at ``http://host:port/metrics`` (``port`` 0: any free
        one) until ``await served.close()`` or the end of the ``async with`` block. Needs
        ``pip install 'aiotimely[metrics]'``."""
        from ..observe.metrics import serve_metrics

        return self._keep(await serve_metrics([self.scheduler_view], port, host=host))

    def _keep(self, served: Served) -> Served:
        """``served``, closed when the worker stops unless its user closed it first (closing twice is harmless)."""
        handle = closing_once(served)
        self._served.append(handle)
        return handle

    def __repr__(self) -> str:
        return f"Worker(index={self.index}, peers={self.peers})"


def _check_build_function(fn: Any) -> None:
    """Refuse a ``fn`` for :meth:`Worker.dataflow` that cannot be called, saying what it takes."""
    if fn is not None and not callable(fn):
        hint = (": feed an InputHandle by building with it, worker.dataflow(lambda scope: "
                "inp.to_stream(scope)...)" if isinstance(fn, InputHandle) else "")
        raise TypeError(f"worker.dataflow(fn) takes a function fn(scope) that builds the dataflow, not "
                        f"{type(fn).__name__} {fn!r}{hint}")


def _dataflow_name(fn: Any, name: str | None, index: int) -> str:
    """``name``, or by default the name of ``fn`` if it has one that is an identifier, else ``dataflow-N``."""
    if name is not None:
        return name
    named = getattr(fn, "__name__", "<lambda>")
    return named if named.isidentifier() else f"dataflow-{index}"


# -- what execute does to the workers it makes (an application's worker does it in ``async with``) ----------------


def start_worker(worker: Worker) -> None:
    """Start ``worker``'s scheduler on the running event loop."""
    worker._scheduler.start()


def end_build(worker: Worker) -> None:
    """``worker``'s build is over: what waited for that runs (its inputs still open close)."""
    worker._scheduler.end_build()


async def stop_worker(worker: Worker) -> None:
    """Stop ``worker``'s scheduler (its dataflows closed), then tell whoever awaits ``worker.failed()``."""
    await worker._stop()
