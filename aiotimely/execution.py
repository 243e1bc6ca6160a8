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
import os
from types import TracebackType
from typing import Any, Callable, Sequence, TypeVar, overload

from .comm.cluster import Cluster
from .comm.handshake import shared_secret
from .comm.tls import TLSOption
from .dataflow.scope import BuildContext, Dataflow, Scope
from .dataflow.state import StateStore
from .errors import ClusterError
from .stream import Stream
from .worker import Computation, Scheduler, WorkerStatistics
from .worker.logging import LogRegistry
from .worker.loop import run

__all__ = ["Worker", "execute", "execute_async", "execute_from_args", "parse_args"]

R = TypeVar("R")


class Worker:
    """One timely worker on an asyncio event loop.

    Use ``async with aiotimely.Worker() as worker:`` inside an application (one
    worker, the running loop), or let :func:`aiotimely.execute` create several.
    """

    def __init__(self, index: int = 0, peers: int = 1, *, computation: Computation | None = None,
                 recovery: StateStore | None = None) -> None:
        self._scheduler = Scheduler(index, peers, computation or Computation(peers))
        self._recovery = recovery

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
                 timestamp: Any = int) -> R: ...

    @overload
    def dataflow(self, fn: None = None, *, name: str | None = None,
                 timestamp: Any = int) -> BuildContext[Stream]: ...

    def dataflow(self, fn: Callable[[Scope[Stream]], R] | None = None, *, name: str | None = None,
                 timestamp: Any = int) -> Any:
        """Build a dataflow: ``worker.dataflow(fn)`` calls ``fn(scope)`` and returns its result, or
        ``async with worker.dataflow() as scope:`` builds it when the block ends.

        ``name`` is what errors and logs call it; by default, the name of ``fn`` (if it has one), else
        ``dataflow-N``. ``timestamp`` is the dataflow's timestamp type (``int`` by default).
        """
        scheduler = self._scheduler
        index = scheduler.new_dataflow_index()
        if name is None:
            named = getattr(fn, "__name__", "<lambda>")
            name = named if named.isidentifier() else f"dataflow-{index}"
        dataflow = Dataflow(scheduler, index, name, timestamp, Stream, self._recovery)
        if fn is None:
            return BuildContext(dataflow.root, lambda: self._install(dataflow))
        result = fn(dataflow.root)
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

    def log_register(self) -> LogRegistry:
        """The worker's logs (timely's ``log_register``): ``insert("timely", callback)`` gets batches of
        ``(elapsed, worker, event)``, events being :data:`aiotimely.TimelyEvent` s; ``remove(name)`` stops one.
        Insert before building the dataflows to see them built (their ``OperatesEvent`` s and ``ChannelsEvent`` s)."""
        return self._scheduler.log_registry

    # -- async with ----------------------------------------------------------------------

    async def __aenter__(self) -> Worker:
        self._scheduler.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            if exc_type is None:
                self._scheduler.end_build()
                await self._scheduler.step_until_done()
        finally:
            await self._scheduler.stop()

    def __repr__(self) -> str:
        return f"Worker(index={self.index}, peers={self.peers})"


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
    """
    result: list[Any] = run(execute_async(build, workers=workers, processes=processes, process=process,
                                          addresses=addresses, secret=secret, pickle=pickle,
                                          connect_timeout=connect_timeout, peer_timeout=peer_timeout,
                                          recovery=recovery, tls=tls), loop)
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
) -> list[Any]:
    """:func:`execute` on the running event loop."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if processes < 1 or not 0 <= process < processes:
        raise ValueError(f"process {process} of {processes} processes does not exist")
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
            await cluster.start()
        except BaseException:
            await cluster.close()
            raise
        computation = Computation(processes * workers, fabric=cluster.fabric, distributed=True)
        cluster.on_failure = computation.fail
    else:
        computation = Computation(workers)
    first = process * workers
    members = [Worker(first + i, processes * workers, computation=computation, recovery=recovery)
               for i in range(workers)]
    for worker in members:
        worker._scheduler.start()

    async def run_worker(worker: Worker) -> Any:
        try:
            result = build(worker)
            if inspect.isawaitable(result):
                result = await result
            worker._scheduler.end_build()
            await worker.step_until_done()
            return result
        except BaseException as exc:
            computation.fail(exc)
            raise

    try:
        outcomes = await asyncio.gather(*(run_worker(w) for w in members), return_exceptions=True)
        if computation.error is not None:
            raise computation.error
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if cluster is not None:
            await cluster.finish()
        return list(outcomes)
    except BaseException as error:
        if cluster is not None:
            await _tell_peers(cluster, error)
        raise
    finally:
        for worker in members:
            await worker._scheduler.stop()
        if cluster is not None:
            await cluster.close()


async def _tell_peers(cluster: Cluster, error: BaseException) -> None:
    """Tell the peers still connected why this process stops (the first real error, not a reset link)."""
    try:
        await cluster.abort(error)
    except (asyncio.CancelledError, Exception):  # we are failing already: the original error is what counts
        pass


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The book's command line: ``-w`` workers, ``-n`` processes, ``-p`` this process, ``-h`` hostfile.

    Returns the parsed options and the arguments left for the program itself.
    """
    parser = argparse.ArgumentParser(add_help=False, description="aiotimely computation")
    parser.add_argument("-w", "--workers", type=int, default=1, help="workers per process")
    parser.add_argument("-n", "--processes", type=int, default=1, help="number of processes")
    parser.add_argument("-p", "--process", type=int, default=0, help="index of this process")
    parser.add_argument("-h", "--hostfile", default=None, help="file of host:port lines, one per process")
    parser.add_argument("--help", action="help", help="show this help and exit")
    return parser.parse_known_args(argv)


def execute_from_args(build: Callable[[Worker], Any], argv: Sequence[str] | None = None,
                      **options: Any) -> list[Any]:
    """:func:`execute` configured from a command line (``sys.argv[1:]`` by default): ``-w -n -p -h``."""
    args, _ = parse_args(argv)
    addresses = None
    if args.hostfile:
        with open(args.hostfile) as f:
            addresses = [line.strip() for line in f if line.strip()]
    return execute(build, workers=args.workers, processes=args.processes, process=args.process,
                   addresses=addresses, **options)
