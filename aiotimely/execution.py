"""Running a computation: :class:`Worker`, ``execute(build, workers=W)`` and ``execute_from_args``.

All the workers of one process share one event loop. Python runs one thread of
bytecode at a time, so threads would add locking and hand-off costs without adding
parallelism; on one loop, records pass between workers by reference, without
locks or copies, and the workers take turns round by round. Parallelism comes from
processes (``processes=N``), which talk over TCP (:mod:`aiotimely.comm.cluster`).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import os
import re
import signal
import sys
import threading
from types import TracebackType
from typing import Any, Callable, NoReturn, Sequence, TypeVar, overload

from .comm.cluster import Cluster
from .comm.handshake import shared_secret
from .comm.tls import ENV_CA, ENV_CERT, ENV_KEY, TLSOption
from .dataflow.failures import ErrorPolicy
from .dataflow.input import InputHandle
from .dataflow.scope import BuildContext, Dataflow, Scope
from .dataflow.state import StateStore
from .errors import ClusterError
from .observe.serving import Served
from .stream import Stream
from .worker import Computation, Scheduler, WorkerStatistics
from .worker.computation import Halted
from .worker.computation import stall_after as _stall_after
from .worker.logging import LogRegistry
from .worker.loop import run
from .worker.watchdog import RunawayStop, Watchdog

__all__ = ["Worker", "execute", "execute_async", "execute_from_args", "parse_args", "execute_options", "add_options",
           "stop_grace", "STOP_GRACE"]

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

    # -- building ----------------------------------------------------------------------

    @overload
    def dataflow(self, fn: Callable[[Scope[Stream]], R], *, name: str | None = None,
                 timestamp: Any = int, errors: ErrorPolicy = "raise") -> R: ...

    @overload
    def dataflow(self, fn: None = None, *, name: str | None = None,
                 timestamp: Any = int, errors: ErrorPolicy = "raise") -> BuildContext[Stream]: ...

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
        if fn is not None and not callable(fn):
            hint = (": feed an InputHandle by building with it, worker.dataflow(lambda scope: "
                    "inp.to_stream(scope)...)" if isinstance(fn, InputHandle) else "")
            raise TypeError(f"worker.dataflow(fn) takes a function fn(scope) that builds the dataflow, not "
                            f"{type(fn).__name__} {fn!r}{hint}")
        scheduler = self._scheduler
        index = scheduler.new_dataflow_index()
        if name is None:
            named = getattr(fn, "__name__", "<lambda>")
            name = named if named.isidentifier() else f"dataflow-{index}"
        dataflow = Dataflow(scheduler, index, name, timestamp, Stream, self._recovery, errors)
        if fn is None:
            return BuildContext(dataflow.root, lambda: self._install(dataflow))
        try:
            result = fn(dataflow.root)
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
            if self._cancel_on_error:
                then = "the block is cancelled, and raises it"
            else:
                then = ("waiting on the worker raises it, as leaving the block will (at.Worker(cancel_on_error=True) "
                        "cancels the block at once)")
            log.error("the computation failed, so every worker stopped: %s. The worker's InputHandles refuse records "
                      "from now on; %s", error, then, exc_info=(type(error), error, error.__traceback__))
        if self._on_error is not None:
            try:
                reaction = self._on_error(error)
            except Exception:
                log.exception("the on_error callback of the Worker raised (it was called with: %s)", error)
            else:
                if inspect.isawaitable(reaction):
                    self._react(reaction)
        waiters, self._failed_waiters = self._failed_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(error)
        if body is not None and self._cancel_on_error and not body.done():
            self._cancelled = True
            body.cancel()

    def _react(self, reaction: Any) -> None:
        """Run what an ``async`` on_error returned as a task, keeping it until it ends; log it if it fails."""
        task = asyncio.ensure_future(reaction)
        self._reactions.add(task)

        def done(task: asyncio.Future[Any]) -> None:
            self._reactions.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("the on_error callback of the Worker failed", exc_info=task.exception())

        task.add_done_callback(done)

    def _ended(self) -> None:
        """The worker stopped: whoever awaits :meth:`failed` hears that it did not fail."""
        self._stopped = True
        waiters, self._failed_waiters = self._failed_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(self.failure)

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
        up to :data:`STOP_GRACE` seconds); the ``CancelledError`` then goes on, as it would have. If the worker
        cancelled it (``cancel_on_error``), the block raises the failure instead, as an ``asyncio.TaskGroup``
        does (unless the task was cancelled from outside too)."""
        scheduler = self._scheduler
        body, self._body = self._body, None
        ours = self._cancelled and body is not None and body.uncancel() == 0
        try:
            if exc_type is None:
                scheduler.end_build()
                await scheduler.step_until_done()
            elif issubclass(exc_type, asyncio.CancelledError) and scheduler.computation.error is None:
                await _drain(scheduler)
        finally:
            served, self._served = self._served, []
            for handle in served:
                await handle.close()
            await scheduler.stop()
            self._ended()
        failure = self.failure
        if ours and failure is not None and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            raise failure

    # -- looking inside ------------------------------------------------------------------

    async def serve_ui(self, port: int = 0, *, host: str = "127.0.0.1") -> Served:
        """Serve the live view of this worker's dataflows at ``http://host:port/`` (``port`` 0: any free one;
        the returned handle's ``url`` says which) until ``await served.close()`` or the end of the
        ``async with`` block. Needs ``pip install 'aiotimely[ui]'``."""
        from .observe.ui import serve_ui

        return self._keep(await serve_ui([self._scheduler], port, host=host))

    async def serve_metrics(self, port: int = 0, *, host: str = "127.0.0.1") -> Served:
        """Serve this worker's metrics for Prometheus at ``http://host:port/metrics`` (``port`` 0: any free
        one) until ``await served.close()`` or the end of the ``async with`` block. Needs
        ``pip install 'aiotimely[metrics]'``."""
        from .observe.metrics import serve_metrics

        return self._keep(await serve_metrics([self._scheduler], port, host=host))

    def _keep(self, served: Served) -> Served:
        """``served``, closed when the worker stops unless its user closed it first (closing twice is harmless)."""
        handle = _closing_once(served)
        self._served.append(handle)
        return handle

    def __repr__(self) -> str:
        return f"Worker(index={self.index}, peers={self.peers})"


STOP_GRACE = 10.0
"""Seconds a computation asked to stop (Ctrl-C, SIGTERM, or its task cancelled) gets to drain before it stops
hard; ``AIOTIMELY_STOP_GRACE`` overrides it."""


def stop_grace() -> float:
    """:data:`STOP_GRACE`, or ``AIOTIMELY_STOP_GRACE`` when set."""
    return float(os.environ.get("AIOTIMELY_STOP_GRACE", STOP_GRACE))


def execute(
    build: Callable[[Worker], Any],
    workers: int = 1,
    processes: int = 1,
    process: int = 0,
    addresses: Sequence[str] | None = None,
    *,
    loop: str = "auto",
    secret: str | bytes | None = None,
    pickle: bool = False,
    connect_timeout: float | None = None,
    peer_timeout: float | None = None,
    recovery: StateStore | None = None,
    tls: TLSOption = None,
    metrics_port: int | None = None,
    ui_port: int | None = None,
    stall_after: float | None = None,
) -> list[Any]:
    """Run ``build(worker)`` on each of this process's ``workers`` workers, then run every dataflow to completion.

    ``build`` may be a plain or an ``async`` function. Returns the list of its
    results, in worker order (this process's workers). An exception in any
    operator, on any worker or process, stops every worker and is raised here,
    naming the dataflow, the operator, the worker and the time.

    With ``processes=N``, this is process ``process`` of N, and ``addresses`` lists
    every process's ``host:port`` (default ``127.0.0.1:2101``, ``:2102``, ...). All of
    them authenticate with a shared ``secret`` (or ``AIOTIMELY_SECRET``), and wait up
    to ``connect_timeout`` seconds (or ``AIOTIMELY_CONNECT_TIMEOUT``, default 30) for
    each other. A peer that sends nothing for ``peer_timeout`` seconds (or
    ``AIOTIMELY_PEER_TIMEOUT``, default 10) is taken for stopped, hung or cut off, and
    ends the computation with an error naming it. Records of
    classes other than the msgpack basics cross processes once registered with
    :func:`aiotimely.register_type`, or, if ``pickle=True``, pickled.
    ``loop`` picks the event loop: ``"auto"`` (uvloop if installed), ``"uvloop"``,
    ``"asyncio"``. With ``recovery`` (an :class:`aiotimely.recovery.Recovery`), the dataflows are
    snapshotted and resume from their latest complete snapshot (the user guide's "Recovery").
    ``tls`` (an :class:`aiotimely.comm.tls.TLSConfig`; default from ``AIOTIMELY_TLS_*``, ``False``: none)
    encrypts the connections between processes (docs/security.md).
    ``metrics_port`` serves Prometheus metrics and ``ui_port`` the live dataflow view of this process's
    workers (process ``p`` listens on the port plus ``p``; 0: any free port), each said in one line on
    stderr, until the computation ends. A worker that a build waits on (a probe's ``wait_beyond``,
    ``step_while``) and that does nothing for ``stall_after`` seconds (default ``AIOTIMELY_STALL_AFTER``, or 10;
    0: never) logs what holds time back (a forgotten ``advance_to``, a capability kept).

    Ctrl-C (SIGINT) or SIGTERM, when the program has not taken them over, stops it gracefully: the sources
    end, the builds still running are cancelled, the inputs close and the dataflows drain what they hold
    (committed Kafka offsets) for up to :data:`STOP_GRACE` seconds; with ``recovery`` the dataflows are
    suspended instead, at a final snapshot that a restart resumes from (no window closes early); a second
    signal stops it at once. Then one line on stderr says how it went, and ``SystemExit`` ends the program with status
    130 (SIGINT) or 143 (SIGTERM). See docs/cli.md.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        raise RuntimeError("aiotimely.execute() runs an event loop of its own, and this thread runs one already: "
                           "inside async code use 'await aiotimely.execute_async(build, ...)' (same arguments), "
                           "or 'async with aiotimely.Worker() as worker:'")
    stop = _Stop(_stop_signals())
    try:
        result: list[Any] = run(_execute(build, workers, processes, process, addresses, secret=secret,
                                         pickle=pickle, connect_timeout=connect_timeout, peer_timeout=peer_timeout,
                                         recovery=recovery, tls=tls, metrics_port=metrics_port, ui_port=ui_port,
                                         stall_after=stall_after, stop=stop), loop)
    except asyncio.CancelledError:
        if not stop.signals:
            raise
        print(stop.line(), file=sys.stderr, flush=True)
        raise SystemExit(128 + stop.signals[0]) from None
    except RunawayStop as runaway:
        print(f"{STOPPED}by {signal.Signals(runaway.signum).name} at once: {runaway.message}: the event loop was "
              "not free to stop gracefully (an operator's logic that loops must await, e.g. "
              "'await asyncio.sleep(0)'); its cleanup did not run", file=sys.stderr, flush=True)
        raise SystemExit(runaway.code) from None
    return result


async def execute_async(
    build: Callable[[Worker], Any],
    workers: int = 1,
    processes: int = 1,
    process: int = 0,
    addresses: Sequence[str] | None = None,
    *,
    secret: str | bytes | None = None,
    pickle: bool = False,
    connect_timeout: float | None = None,
    peer_timeout: float | None = None,
    recovery: StateStore | None = None,
    tls: TLSOption = None,
    metrics_port: int | None = None,
    ui_port: int | None = None,
    stall_after: float | None = None,
) -> list[Any]:
    """:func:`execute` on the running event loop. It leaves signals to the application: when the task awaiting
    it is cancelled (Ctrl-C in ``asyncio.run``), it stops gracefully, as :func:`execute` does on a signal, and
    then raises the ``CancelledError`` (logging one line if the dataflows did not drain)."""
    stop = _Stop([])
    try:
        return await _execute(build, workers, processes, process, addresses, secret=secret, pickle=pickle,
                              connect_timeout=connect_timeout, peer_timeout=peer_timeout, recovery=recovery,
                              tls=tls, metrics_port=metrics_port, ui_port=ui_port, stall_after=stall_after,
                              stop=stop)
    except asyncio.CancelledError:
        if stop.asked and stop.reason is not None:
            log.warning("%s", stop.line())
        raise


async def _execute(build: Callable[[Worker], Any], workers: int, processes: int, process: int,
                   addresses: Sequence[str] | None, *, secret: str | bytes | None, pickle: bool,
                   connect_timeout: float | None, peer_timeout: float | None, recovery: StateStore | None,
                   tls: TLSOption, metrics_port: int | None, ui_port: int | None, stop: _Stop,
                   stall_after: float | None = None) -> list[Any]:
    """The computation of :func:`execute` and :func:`execute_async`. Cancelling the task that runs it asks it to
    stop: before the workers run, at once; then gracefully (:func:`_wait_draining`); it ends with the
    ``CancelledError`` either way, and ``stop`` says how it went."""
    _check_shape(workers, processes, process)
    if not callable(build):
        raise TypeError(f"execute(build, ...) takes a function build(worker) that builds the worker's dataflows, "
                        f"not {type(build).__name__} {build!r}")
    stall_after = _stall_after(stall_after)  # (a bad setting is refused before anything starts)
    event_loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    handled = stop.install(event_loop, task)
    try:
        return await _start(build, workers, processes, process, addresses, secret=secret, pickle=pickle,
                            connect_timeout=connect_timeout, peer_timeout=peer_timeout, recovery=recovery,
                            tls=tls, metrics_port=metrics_port, ui_port=ui_port, stop=stop,
                            stall_after=stall_after)
    except asyncio.CancelledError:
        stop.asked = True
        raise
    finally:
        stop.uninstall(event_loop, handled)


def _check_shape(workers: Any, processes: Any, process: Any) -> None:
    """Refuse a number of workers, processes or a process index that is not a fitting int, saying which."""
    for what, value, least in (("workers", workers, 1), ("processes", processes, 1), ("process", process, 0)):
        if type(value) is not int:
            raise TypeError(f"{what} must be an int, not {type(value).__name__} {value!r}"
                            + (f" (use {int(value)})" if isinstance(value, str) and value.strip().isdigit() else ""))
        if value < least:
            raise ValueError(f"{what} must be at least {least}, not {value}")
    if process >= processes:
        raise ValueError(f"process {process} of {processes} processes does not exist (process is an index: "
                         f"0..{processes - 1})")


async def _start(build: Callable[[Worker], Any], workers: int, processes: int, process: int,
                 addresses: Sequence[str] | None, *, secret: str | bytes | None, pickle: bool,
                 connect_timeout: float | None, peer_timeout: float | None, recovery: StateStore | None,
                 tls: TLSOption, metrics_port: int | None, ui_port: int | None, stop: _Stop,
                 stall_after: float | None = None) -> list[Any]:
    """Connect to the other processes, if any, and run the workers."""
    cluster = None
    if processes > 1:
        addresses = list(addresses) if addresses else [f"127.0.0.1:{2101 + p}" for p in range(processes)]
        if len(addresses) != processes:
            raise ClusterError(f"{len(addresses)} addresses for {processes} processes")
        if connect_timeout is None:
            connect_timeout = float(os.environ.get("AIOTIMELY_CONNECT_TIMEOUT", "30"))
        if peer_timeout is None:
            peer_timeout = float(os.environ.get("AIOTIMELY_PEER_TIMEOUT", "10"))
        cluster = Cluster(addresses, process, workers, shared_secret(secret, "a computation over several processes"),
                          allow_pickle=pickle, connect_timeout=connect_timeout, peer_timeout=peer_timeout,
                          tls=tls)
        try:
            await _connect(cluster, stop)
        except BaseException:
            await cluster.close()
            raise
        computation = Computation(processes * workers, fabric=cluster.fabric, distributed=True,
                                  recoverable=recovery is not None, stall_after=stall_after)
        cluster.on_failure = computation.fail
    else:
        computation = Computation(workers, recoverable=recovery is not None, stall_after=stall_after)
    return await _run_workers(build, computation, cluster, process, workers, processes, recovery,
                              metrics_port, ui_port, stop)


async def _connect(cluster: Cluster, stop: _Stop) -> None:
    """``cluster.start()``. Asked to stop meanwhile (this task cancelled), go on connecting, for up to the grace
    period: the other processes may be running already, and one that left now would fail them. Then the
    computation starts stopping (``stop.early``): it drains what little it holds, with theirs. Asked again, or
    still not connected by then, give up."""
    starting = asyncio.ensure_future(cluster.start())
    try:
        await asyncio.shield(starting)
        return
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
    stop.early = True
    try:
        done, _ = await asyncio.wait([starting], timeout=stop_grace())
    except asyncio.CancelledError:
        done = set()
    if not done:
        starting.cancel()
        await asyncio.wait([starting])
        stop.reason = "it stopped while connecting to the other processes"
        raise asyncio.CancelledError()
    starting.result()  # (its error, if it failed)


async def _run_workers(build: Callable[[Worker], Any], computation: Computation, cluster: Cluster | None,
                       process: int, workers: int, processes: int, recovery: StateStore | None,
                       metrics_port: int | None, ui_port: int | None, stop: _Stop) -> list[Any]:
    first = process * workers
    members = [Worker(first + i, processes * workers, computation=computation, recovery=recovery)
               for i in range(workers)]
    for worker in members:
        worker._scheduler.start()
    builds: set[asyncio.Task[Any]] = set()  # the workers' tasks while they run an async build function

    async def run_worker(worker: Worker) -> Any:
        try:
            result = build(worker)
            if inspect.isawaitable(result):
                me = asyncio.current_task()
                assert me is not None
                builds.add(me)
                try:
                    if computation.stopping:
                        raise asyncio.CancelledError()
                    result = await result
                except asyncio.CancelledError:
                    if not computation.stopping or computation.suspending or me.cancelling() > 1:
                        raise  # (stopped hard, or suspended: an input closed now would end open windows)
                    me.uncancel()  # the stop ended the build (_wait_draining): its inputs close as any build's do
                    result = None
                finally:
                    builds.discard(me)
            worker._scheduler.end_build()
            await worker.step_until_done()
            return result
        except BaseException as exc:
            computation.fail(exc)
            raise

    def cancel_builds(error: BaseException) -> None:  # (a build awaiting what the dataflows do not feed)
        for building in list(builds):
            building.cancel()

    served: list[Served] = []
    tasks: list[asyncio.Task[Any]] = []
    drained = False
    forget = computation.on_failure(cancel_builds)
    try:
        served = await _serve([w._scheduler for w in members], process, cluster, metrics_port, ui_port)
        tasks = [asyncio.ensure_future(run_worker(w)) for w in members]
        stopped = await _wait_draining(tasks, computation, builds, early=stop.early, cluster=cluster)
        if stopped is _SUSPENDED:
            drained = True  # (every peer took its final snapshots too: nothing to tell them)
            stop.suspended = True
            raise asyncio.CancelledError()
        error = computation.error or _failure(tasks)
        if error is not None:
            raise error
        outcomes = [t.result() for t in tasks]
        if cluster is not None:
            await cluster.finish()
        drained = True
        if stopped:
            raise asyncio.CancelledError()  # drained: now the cancellation asked for
        return outcomes
    except BaseException as error:
        stopping = computation.stopping or isinstance(error, asyncio.CancelledError)
        if not drained:
            if stopping:
                stop.reason = _reason(error, started=bool(tasks))
            if cluster is not None:
                await _tell_peers(cluster, error if not isinstance(error, asyncio.CancelledError)
                                  else Halted(f"process {process} {stop.outcome()}"))
        if stopping:
            stop.asked = True
            raise asyncio.CancelledError() from None
        raise
    finally:
        forget()
        for pending in tasks:
            pending.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for worker in members:
            await worker._scheduler.stop()
            worker._ended()
        for handle in served:
            await _close_quietly(handle)
        if cluster is not None:
            await cluster.close()


_SUSPENDED = "suspended"
"""What :func:`_wait_draining` returns when a recoverable computation stopped at its final snapshots."""


async def _wait_draining(tasks: list[asyncio.Task[Any]], computation: Computation,
                         builds: set[asyncio.Task[Any]], *, early: bool = False,
                         cluster: Cluster | None = None) -> bool | str:
    """Wait until every worker's task has ended; return whether a stop was asked for meanwhile, or
    :data:`_SUSPENDED` once a recoverable computation asked to stop has its final snapshots.

    A cancellation of the task waiting here (a signal, or the caller's own) asks the computation to stop. The
    first one stops it gracefully: the sources end (:meth:`Computation.request_stop`), the builds still running
    are cancelled, which closes their inputs, and the dataflows drain what they hold and complete. A recoverable
    computation is suspended instead (:func:`_suspend`): nothing ends, and the workers stop where they are once
    every dataflow's final snapshot is complete everywhere. Another cancellation, or the end of the grace
    period, stops it hard (:class:`Halted`). ``early``: the stop was asked for before the workers ran."""
    loop = asyncio.get_running_loop()
    asked = 0
    deadline: float | None = None
    grace = stop_grace()
    suspension: asyncio.Task[None] | None = None   # while it is waited for
    suspensions: list[asyncio.Task[None]] = []     # (owned here: cancelled when the wait ends)

    def stop_gracefully() -> None:
        nonlocal deadline, suspension
        computation.request_stop()
        if computation.suspending:
            suspension = asyncio.ensure_future(_suspend(computation, cluster))
            suspensions.append(suspension)
        else:
            for building in list(builds):
                building.cancel()
        deadline = loop.time() + grace

    if early:
        asked = 1
        stop_gracefully()
    try:
        while True:
            try:
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                if suspension is None:
                    _, pending = await asyncio.wait(tasks, timeout=timeout)
                    if not pending:
                        return asked > 0
                    _halt(computation, tasks, f"the grace period ended ({grace:g} s, AIOTIMELY_STOP_GRACE)")
                    deadline = None
                    continue
                live = [task for task in tasks if not task.done()]
                done, _ = await asyncio.wait([suspension, *live], timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if all(task.done() for task in tasks):
                    return asked > 0  # (the dataflows completed meanwhile)
                if suspension.done():
                    failed = computation.error or suspension.exception()
                    if failed is None:
                        return _SUSPENDED
                    computation.fail(failed)  # (a peer failed before it said goodbye): the workers stop on it
                    suspension = None
                elif not done:
                    _halt(computation, tasks, f"the grace period ended ({grace:g} s, AIOTIMELY_STOP_GRACE)")
                    deadline = None
                    suspension = None
            except asyncio.CancelledError:
                asked += 1
                if asked == 1:
                    stop_gracefully()
                else:
                    _halt(computation, tasks, "asked to stop a second time")
                    deadline = None
    finally:
        for task in suspensions:
            if task.done():
                if not task.cancelled():
                    task.exception()  # (said already, as the computation's failure)
            else:
                task.cancel()


async def _suspend(computation: Computation, cluster: Cluster | None) -> None:
    """A recoverable computation asked to stop: wait until every dataflow's final snapshot is complete
    everywhere, and (over several processes) until every other process says it has its own too: the workers
    go on running meanwhile, as the peers' snapshots need them."""
    await computation.final_snapshots()
    if cluster is not None:
        await cluster.say_goodbye()


def _halt(computation: Computation, tasks: list[asyncio.Task[Any]], reason: str) -> None:
    """Stop hard: every worker stops where it is, and its task ends."""
    computation.fail(Halted(reason))
    for task in tasks:
        task.cancel()


def _failure(tasks: list[asyncio.Task[Any]]) -> BaseException | None:
    """The first error a worker's task ended with."""
    for task in tasks:
        if task.cancelled():
            return asyncio.CancelledError()
        if task.exception() is not None:
            return task.exception()
    return None


def _reason(error: BaseException, *, started: bool) -> str | None:
    """Why a computation asked to stop did not drain (``None``: there was nothing to drain yet)."""
    if isinstance(error, asyncio.CancelledError):
        return "stopped while they ran" if started else None
    if isinstance(error, Halted):
        return str(error)
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0]}" if first else type(error).__name__


class _Stop:
    """How a stop went, for the one line that says it; and the signals :func:`execute` takes over while it runs
    (each cancels the computation's task: the first drains it, a second stops it hard)."""

    def __init__(self, signals: list[int]) -> None:
        self.handles = signals
        self.signals: list[int] = []
        """The signals received, in order."""
        self.asked = False
        """The computation was asked to stop (a signal, or its task cancelled)."""
        self.reason: str | None = None
        """Why the dataflows did not drain (``None``: they did, or had not started)."""
        self.early = False
        """The stop was asked for while the processes were connecting."""
        self.suspended = False
        """The dataflows keep snapshots: they stopped at a final snapshot, complete everywhere (not drained)."""
        self.watchdog: Watchdog | None = None
        """Forces the stop when an operator never yields (see :mod:`aiotimely.worker.watchdog`)."""

    def install(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> list[int]:
        handled = []
        for sig in self.handles:
            try:
                loop.add_signal_handler(sig, self._arrived, sig, task)
            except (NotImplementedError, RuntimeError, ValueError):  # (not on this platform or loop)
                continue
            handled.append(sig)
        if handled:
            self.watchdog = Watchdog(loop, handled)
            self.watchdog.install()
        return handled

    def uninstall(self, loop: asyncio.AbstractEventLoop, handled: list[int]) -> None:
        if self.watchdog is not None:
            self.watchdog.uninstall()
            self.watchdog = None
        for sig in handled:
            loop.remove_signal_handler(sig)

    def _arrived(self, sig: int, task: asyncio.Task[Any]) -> None:
        self.signals.append(sig)
        task.cancel()

    def outcome(self) -> str:
        if self.reason is not None:
            return f"{DID_NOT_DRAIN}{self.reason}"
        return SUSPENDED if self.suspended else DRAINED

    def line(self) -> str:
        """The line that says it: ``aiotimely: stopped by SIGINT after the dataflows drained``, or why they did not."""
        by = f"by {signal.Signals(self.signals[0]).name}" if self.signals else "(its task was cancelled)"
        return f"{STOPPED}{by} {self.outcome()}"


STOPPED = "aiotimely: stopped "
DRAINED = "after the dataflows drained"
SUSPENDED = "at a final snapshot (a restart with the same recovery directory resumes from it)"
DID_NOT_DRAIN = "before the dataflows drained: "


def _stop_signals() -> list[int]:
    """The signals :func:`execute` stops on: SIGINT and SIGTERM, on the main thread, unless the program has
    handlers of its own for them."""
    if threading.current_thread() is not threading.main_thread():
        return []
    found = []
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) is default:
            found.append(int(sig))
    return found


async def _drain(scheduler: Scheduler) -> None:
    """A ``Worker``'s block was cancelled: stop gracefully, for up to the grace period (:func:`_wait_draining`
    for one worker of an application); say in one logged line if the dataflows did not drain."""
    computation = scheduler.computation
    computation.request_stop()
    grace = stop_grace()
    if computation.suspending:  # recoverable: nothing ends; stop once the final snapshots are complete
        waiting = asyncio.ensure_future(computation.final_snapshots())
        missed = "before its final snapshots were complete (a restart resumes from the latest complete one): "
    else:
        scheduler.end_build()
        waiting = asyncio.ensure_future(scheduler.step_until_done())
        missed = DID_NOT_DRAIN
    try:
        await asyncio.wait([waiting], timeout=grace)
    except asyncio.CancelledError:  # cancelled again: stop at once
        pass
    if not waiting.done():
        waiting.cancel()
        log.warning("%s(its task was cancelled) %sthe grace period ended (%g s, AIOTIMELY_STOP_GRACE)",
                    STOPPED, missed, grace)
    elif not waiting.cancelled() and waiting.exception() is not None:
        log.warning("%s(its task was cancelled) %s%s", STOPPED, missed,
                    _reason(waiting.exception() or Exception(), started=True))


async def _serve(schedulers: list[Scheduler], process: int, cluster: Cluster | None, metrics_port: int | None,
                 ui_port: int | None) -> list[Served]:
    """Start the metrics endpoint and the live view asked for, each said in one line on stderr."""
    served: list[Served] = []
    try:
        if metrics_port is not None:
            from .observe.metrics import serve_metrics

            handle = await serve_metrics(schedulers, _port(metrics_port, process), process=process, cluster=cluster)
            served.append(handle)
            print(f"aiotimely: metrics at {handle.url} (process {process})", file=sys.stderr, flush=True)
        if ui_port is not None:
            from .observe.ui import serve_ui

            handle = await serve_ui(schedulers, _port(ui_port, process), process=process, cluster=cluster)
            served.append(handle)
            print(f"aiotimely: live dataflow view at {handle.url} (process {process})", file=sys.stderr,
                  flush=True)
    except BaseException:
        for handle in served:
            await _close_quietly(handle)
        raise
    return served


def _port(port: int, process: int) -> int:
    """Process ``p`` listens on ``port + p`` (0: any free port)."""
    if port < 0 or port > 65535:
        raise ValueError(f"port {port} is not in 0..65535")
    return port + process if port else 0


def _closing_once(served: Served) -> Served:
    closed = False

    async def close() -> None:
        nonlocal closed
        if not closed:
            closed = True
            await served.close()

    return Served(served.url, close)


async def _close_quietly(served: Served) -> None:
    try:
        await served.close()
    except (asyncio.CancelledError, Exception) as exc:  # stopping already: what stopped it is what counts
        log.warning("could not close %s: %s: %s", served.url, type(exc).__name__, exc)


async def _tell_peers(cluster: Cluster, error: BaseException) -> None:
    """Tell the peers still connected why this process stops (the first real error, not a reset link)."""
    try:
        await cluster.abort(error)
    except (asyncio.CancelledError, Exception):  # we are failing already: the original error is what counts
        pass


# -- the command line ------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: what is wrong, and where to look."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def add_options(parser: argparse.ArgumentParser | Any, *, launcher: bool = False) -> None:
    """Add aiotimely's options to ``parser`` (or an argument group): ``-w -n`` and, unless for the ``aiotimely run``
    ``launcher``, ``-p --hostfile``; ``--metrics-port --ui``; ``--tls-cert --tls-key --tls-ca``."""
    parser.add_argument("-w", "--workers", type=int, default=1, metavar="N", help="workers per process (default 1)")
    parser.add_argument("-n", "--processes", type=int, default=1, metavar="N",
                        help="number of processes (default 1)")
    if not launcher:
        parser.add_argument("-p", "--process", type=int, default=0, metavar="I",
                            help="index of this process, in 0..N-1 (default 0)")
        parser.add_argument("--hostfile", default=None, metavar="FILE",
                            help="file of host:port lines, one per process (default 127.0.0.1:2101, :2102, ...)")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                        help="serve Prometheus metrics on PORT (process p on PORT+p; 0: any free port)")
    parser.add_argument("--ui", dest="ui_port", type=int, default=None, metavar="PORT",
                        help="serve the live dataflow view on PORT (process p on PORT+p; 0: any free port)")
    parser.add_argument("--tls-cert", default=None, metavar="FILE",
                        help="this process's TLS certificate (PEM): the processes talk over TLS")
    parser.add_argument("--tls-key", default=None, metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--tls-ca", default=None, metavar="FILE",
                        help="the CA certificates to trust (PEM): peers must present a certificate it signed")


_PROGRAM_ARGUMENTS = ("program arguments go after '--', or declare the program's options with "
                      "execute_from_args(build, parser=an argparse.ArgumentParser)")
_NUMBER = re.compile(r"^-\d+(\.\d*)?$")


def parse_args(argv: Sequence[str] | None = None, *, parser: argparse.ArgumentParser | None = None,
               prog: str | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The command line of a program run by aiotimely (``sys.argv[1:]`` by default): ``-w/--workers``,
    ``-n/--processes``, ``-p/--process``, ``--hostfile``, ``--metrics-port``, ``--ui``, ``--tls-cert``,
    ``--tls-key``, ``--tls-ca``, and ``-h/--help``.

    Returns the options and the program's own arguments: positional ones, and everything after ``--``. An
    option it does not know is an error (status 2, one line naming it). A program with options of its own
    passes ``parser``, an ``argparse.ArgumentParser`` declaring them: the returned namespace then holds them
    too (the program's arguments list is empty), and ``-h`` shows both. The TLS options are set in
    ``os.environ`` (``AIOTIMELY_TLS_CERT``, ``_KEY``, ``_CA``), where :func:`execute` finds them.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if parser is not None:
        combined = _Parser(prog=prog or parser.prog, usage=parser.usage, description=parser.description,
                           epilog=parser.epilog, formatter_class=parser.formatter_class, parents=[parser],
                           add_help=not parser.add_help, allow_abbrev=False)
        add_options(combined.add_argument_group("aiotimely options"))
        args, rest = combined.parse_args(argv), []
    else:
        own = _Parser(prog=prog, allow_abbrev=False,
                      description="Options of aiotimely. Positional arguments, and everything after '--', are the "
                                  "program's own.")
        add_options(own)
        cut = argv.index("--") if "--" in argv else len(argv)
        args, extra = own.parse_known_args(argv[:cut])
        unknown = [a for a in extra if a.startswith("-") and a != "-" and not _NUMBER.match(a)]
        if unknown:
            own.exit(2, f"{own.prog}: unrecognized option {unknown[0]!r}: {_PROGRAM_ARGUMENTS} "
                        f"(see {own.prog} -h)\n")
        rest = extra + argv[cut + 1:]
    for option, variable in (("tls_cert", ENV_CERT), ("tls_key", ENV_KEY), ("tls_ca", ENV_CA)):
        value = getattr(args, option, None)
        if value:
            os.environ[variable] = os.path.abspath(value)
    return args, rest


def execute_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`execute` that a command line parsed by :func:`parse_args` gives
    (``workers``, ``processes``, ``process``, ``addresses`` from the host file, ``metrics_port``, ``ui_port``)."""
    addresses = None
    if args.hostfile:
        with open(args.hostfile) as f:
            addresses = [line.strip() for line in f if line.strip()]
    return {"workers": args.workers, "processes": args.processes, "process": args.process, "addresses": addresses,
            "metrics_port": args.metrics_port, "ui_port": args.ui_port}


def execute_from_args(build: Callable[[Worker], Any], argv: Sequence[str] | None = None, *,
                      parser: argparse.ArgumentParser | None = None, **options: Any) -> list[Any]:
    """:func:`execute` configured from a command line (``sys.argv[1:]`` by default) as :func:`parse_args` reads
    it, with ``parser`` declaring the program's own options, if it has any; ``options`` are more keyword
    arguments of :func:`execute` (they win over the command line's)."""
    args, _ = parse_args(argv, parser=parser)
    return execute(build, **{**execute_options(args), **options})
