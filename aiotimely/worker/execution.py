"""Running a computation: ``execute(build, workers=W)`` and ``execute_from_args``.

All the workers of one process share one event loop. Python runs one thread of
bytecode at a time, so threads would add locking and hand-off costs without adding
parallelism; on one loop, records pass between workers by reference, without
locks or copies, and the workers take turns round by round. Parallelism comes from
processes (``processes=N``).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
from typing import Any, Callable, Sequence

from ..errors import ClusterError
from .loop import run
from .worker import Computation, Worker

__all__ = ["execute", "execute_async", "execute_from_args"]


def execute(
    build: Callable[[Worker], Any],
    workers: int = 1,
    processes: int = 1,
    process: int = 0,
    addresses: Sequence[str] | None = None,
    *,
    loop: str = "auto",
) -> list[Any]:
    """Run ``build(worker)`` on each of ``workers`` workers, then run every dataflow to completion.

    ``build`` may be a plain or an ``async`` function. Returns the list of its
    results, in worker order. An exception in any operator stops every worker and is
    raised here, naming the dataflow, the operator, the worker and the time.
    ``loop`` picks the event loop: ``"auto"`` (uvloop if installed), ``"uvloop"`` or
    ``"asyncio"``.
    """
    if processes != 1 or process != 0 or addresses:
        raise ClusterError(
            "running over several processes (processes=, process=, addresses=) is not available in this "
            "version: run with processes=1"
        )
    return run(execute_async(build, workers=workers), loop)


async def execute_async(build: Callable[[Worker], Any], workers: int = 1) -> list[Any]:
    """:func:`execute` on the running event loop."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    computation = Computation(workers)
    members = [Worker(i, workers, computation=computation) for i in range(workers)]
    for worker in members:
        worker._start_scheduler()

    async def run_worker(worker: Worker) -> Any:
        try:
            result = build(worker)
            if inspect.isawaitable(result):
                result = await result
            worker._close_inputs()
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
        return list(outcomes)
    finally:
        for worker in members:
            await worker._stop()


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


def execute_from_args(build: Callable[[Worker], Any], argv: Sequence[str] | None = None, **options: Any) -> list:
    """:func:`execute` configured from a command line (``sys.argv[1:]`` by default): ``-w -n -p -h``."""
    args, _ = parse_args(argv)
    addresses = None
    if args.hostfile:
        with open(args.hostfile) as f:
            addresses = [line.strip() for line in f if line.strip()]
    return execute(build, workers=args.workers, processes=args.processes, process=args.process,
                   addresses=addresses, **options)
