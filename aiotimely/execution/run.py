"""Running a computation: :func:`execute` (its own event loop, and the signals), :func:`execute_async` (the
running loop), :func:`execute_from_args` (configured from a command line); connecting to the other processes,
then running this process's workers under a :class:`~aiotimely.execution.supervisor.Supervisor`."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..comm.cluster import Cluster
from ..comm.handshake import shared_secret
from ..comm.tls import TLSOption
from ..dataflow.state import StateStore
from ..errors import ClusterError
from ..observe.serving import Served
from ..options import execute_options, parse_args
from ..worker import Computation
from ..worker.computation import Halted
from ..worker.computation import stall_after as _stall_after
from ..worker.loop import run as run_loop
from ..worker.watchdog import RunawayStop
from .servers import close_quietly, serve
from .signals import Stop, runaway_line, stop_signals
from .stopping import why_not_drained
from .supervisor import Ended, Supervisor, connect
from .worker import Worker, start_worker, stop_worker

__all__ = ["execute", "execute_async", "execute_from_args"]

log = logging.getLogger("aiotimely")


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
    (committed Kafka offsets) for up to :data:`~aiotimely.execution.STOP_GRACE` seconds; with ``recovery`` the
    dataflows are suspended instead, at a final snapshot that a restart resumes from (no window closes early); a
    second signal stops it at once. Then one line on stderr says how it went, and ``SystemExit`` ends the program
    with status 130 (SIGINT) or 143 (SIGTERM). See docs/cli.md.
    """
    _refuse_running_loop()
    stop = Stop(stop_signals())
    settings = _Settings(workers=workers, processes=processes, process=process, addresses=addresses, secret=secret,
                         pickle=pickle, connect_timeout=connect_timeout, peer_timeout=peer_timeout,
                         recovery=recovery, tls=tls, metrics_port=metrics_port, ui_port=ui_port,
                         stall_after=stall_after)
    try:
        result: list[Any] = run_loop(_execute(build, settings, stop), loop)
    except asyncio.CancelledError:
        if not stop.signals:
            raise
        print(stop.line(), file=sys.stderr, flush=True)
        raise SystemExit(128 + stop.signals[0]) from None
    except RunawayStop as runaway:
        print(runaway_line(runaway), file=sys.stderr, flush=True)
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
    stop = Stop([])
    settings = _Settings(workers=workers, processes=processes, process=process, addresses=addresses, secret=secret,
                         pickle=pickle, connect_timeout=connect_timeout, peer_timeout=peer_timeout,
                         recovery=recovery, tls=tls, metrics_port=metrics_port, ui_port=ui_port,
                         stall_after=stall_after)
    try:
        return await _execute(build, settings, stop)
    except asyncio.CancelledError:
        if stop.asked and stop.reason is not None:
            log.warning("%s", stop.line())
        raise


def execute_from_args(build: Callable[[Worker], Any], argv: Sequence[str] | None = None, *,
                      parser: argparse.ArgumentParser | None = None, **options: Any) -> list[Any]:
    """:func:`execute` configured from a command line (``sys.argv[1:]`` by default) as
    :func:`~aiotimely.options.parse_args` reads it, with ``parser`` declaring the program's own options, if it
    has any; ``options`` are more keyword arguments of :func:`execute` (they win over the command line's)."""
    args, _ = parse_args(argv, parser=parser)
    return execute(build, **{**execute_options(args), **options})


@dataclass(frozen=True)
class _Settings:
    """The arguments of :func:`execute` and :func:`execute_async` that say what to run where, as one value."""

    workers: int
    processes: int
    process: int
    addresses: Sequence[str] | None
    secret: str | bytes | None
    pickle: bool
    connect_timeout: float | None
    peer_timeout: float | None
    recovery: StateStore | None
    tls: TLSOption
    metrics_port: int | None
    ui_port: int | None
    stall_after: float | None


def _refuse_running_loop() -> None:
    """Refuse to run :func:`execute` on a thread that runs an event loop already, saying what to use instead."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        raise RuntimeError("aiotimely.execute() runs an event loop of its own, and this thread runs one already: "
                           "inside async code use 'await aiotimely.execute_async(build, ...)' (same arguments), "
                           "or 'async with aiotimely.Worker() as worker:'")


async def _execute(build: Callable[[Worker], Any], settings: _Settings, stop: Stop) -> list[Any]:
    """The computation of :func:`execute` and :func:`execute_async`. Cancelling the task that runs it asks it to
    stop: before the workers run, at once; then gracefully (:class:`Supervisor`); it ends with the
    ``CancelledError`` either way, and ``stop`` says how it went."""
    _check_shape(settings.workers, settings.processes, settings.process)
    if not callable(build):
        raise TypeError(f"execute(build, ...) takes a function build(worker) that builds the worker's dataflows, "
                        f"not {type(build).__name__} {build!r}")
    settings = dataclasses.replace(settings, stall_after=_stall_after(settings.stall_after))  # (refused if bad)
    task = asyncio.current_task()
    assert task is not None
    with stop.handling(asyncio.get_running_loop(), task):
        try:
            return await _start(build, settings, stop)
        except asyncio.CancelledError:
            stop.asked = True
            raise


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


async def _start(build: Callable[[Worker], Any], settings: _Settings, stop: Stop) -> list[Any]:
    """Connect to the other processes, if any, and run the workers."""
    recoverable = settings.recovery is not None
    if settings.processes <= 1:
        computation = Computation(settings.workers, recoverable=recoverable, stall_after=settings.stall_after)
        return await _run_workers(build, computation, None, settings, stop)
    cluster = _cluster(settings)
    try:
        await connect(cluster, stop)
    except BaseException:
        await cluster.close()
        raise
    computation = Computation(settings.processes * settings.workers, fabric=cluster.fabric, distributed=True,
                              recoverable=recoverable, stall_after=settings.stall_after)
    cluster.on_failure = computation.fail
    return await _run_workers(build, computation, cluster, settings, stop)


def _cluster(settings: _Settings) -> Cluster:
    """The mesh of this process with the others, not connected yet (timeouts from the environment by default)."""
    processes = settings.processes
    addresses = (list(settings.addresses) if settings.addresses
                 else [f"127.0.0.1:{2101 + p}" for p in range(processes)])
    if len(addresses) != processes:
        raise ClusterError(f"{len(addresses)} addresses for {processes} processes")
    connect_timeout = settings.connect_timeout
    if connect_timeout is None:
        connect_timeout = float(os.environ.get("AIOTIMELY_CONNECT_TIMEOUT", "30"))
    peer_timeout = settings.peer_timeout
    if peer_timeout is None:
        peer_timeout = float(os.environ.get("AIOTIMELY_PEER_TIMEOUT", "10"))
    return Cluster(addresses, settings.process, settings.workers,
                   shared_secret(settings.secret, "a computation over several processes"),
                   allow_pickle=settings.pickle, connect_timeout=connect_timeout, peer_timeout=peer_timeout,
                   tls=settings.tls)


async def _run_workers(build: Callable[[Worker], Any], computation: Computation, cluster: Cluster | None,
                       settings: _Settings, stop: Stop) -> list[Any]:
    """Run this process's workers under a :class:`Supervisor`, serving their metrics and live view if asked;
    their builds' results, or the ``CancelledError`` of a stop (``stop`` says how it went), or the first error."""
    first, peers = settings.process * settings.workers, settings.processes * settings.workers
    members = [Worker(first + i, peers, computation=computation, recovery=settings.recovery)
               for i in range(settings.workers)]
    for worker in members:
        start_worker(worker)
    supervisor = Supervisor(computation, cluster)
    served: list[Served] = []
    forget = computation.on_failure(supervisor.cancel_builds)  # (a build awaiting what the dataflows do not feed)
    try:
        served = await serve([w.scheduler_view for w in members], settings.process, cluster, settings.metrics_port,
                             settings.ui_port)
        ended = await supervisor.run(build, members, early=stop.early)
        outcomes = await _outcomes(ended, computation, supervisor, cluster)
    except BaseException as error:
        if await _ended_early(error, computation, cluster, settings.process, stop, started=supervisor.started):
            raise asyncio.CancelledError() from None
        raise
    finally:
        forget()
        await supervisor.close()
        for worker in members:
            await stop_worker(worker)
        for handle in served:
            await close_quietly(handle)
        if cluster is not None:
            await cluster.close()
    stop.suspended = ended is Ended.SUSPENDED  # (every peer took its final snapshots too: nothing to tell them)
    if ended is not Ended.COMPLETED:
        stop.asked = True
        raise asyncio.CancelledError()  # drained, or suspended: now the cancellation asked for
    return outcomes


async def _outcomes(ended: Ended, computation: Computation, supervisor: Supervisor,
                    cluster: Cluster | None) -> list[Any]:
    """The builds' results once the workers ended (none if suspended), the other processes told this one
    finished; the first error, if any."""
    if ended is Ended.SUSPENDED:
        return []
    error = computation.error or supervisor.failure()
    if error is not None:
        raise error
    outcomes = supervisor.results()
    if cluster is not None:
        await cluster.finish()
    return outcomes


async def _ended_early(error: BaseException, computation: Computation, cluster: Cluster | None, process: int,
                       stop: Stop, *, started: bool) -> bool:
    """The workers ended with ``error`` before they drained or were suspended: if a stop was asked for, say in
    ``stop`` why they did not drain; tell the peers. Whether it was a stop (it then ends in a
    ``CancelledError``)."""
    stopping = computation.stopping or isinstance(error, asyncio.CancelledError)
    if stopping:
        stop.reason = why_not_drained(error, started=started)
    if cluster is not None:
        await _tell_peers(cluster, error if not isinstance(error, asyncio.CancelledError)
                          else Halted(f"process {process} {stop.outcome()}"))
    if stopping:
        stop.asked = True
    return stopping


async def _tell_peers(cluster: Cluster, error: BaseException) -> None:
    """Tell the peers still connected why this process stops (the first real error, not a reset link)."""
    try:
        await cluster.abort(error)
    except (asyncio.CancelledError, Exception):  # we are failing already: the original error is what counts
        pass
