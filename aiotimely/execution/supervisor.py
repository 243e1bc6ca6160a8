"""The tasks of one process's workers under :func:`~aiotimely.execute`, with one owner: :class:`Supervisor`.

It starts a task per worker (its build function, then its dataflows to completion), and while they run it turns
the cancellations of the task waiting on them into a stop. The first stops the computation gracefully: the
sources end (:meth:`Computation.request_stop`), the builds still running are cancelled, which closes their
inputs, and the dataflows drain what they hold and complete. A recoverable computation is suspended instead:
nothing ends, and the workers stop where they are once every dataflow's final snapshot is complete everywhere.
Another cancellation, or the end of the grace period, stops it hard (:class:`Halted`). When the computation
ends, the supervisor cancels and awaits whatever it started. Before the workers run, :func:`connect` does the
same for the connection to the other processes.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from typing import Any, Awaitable, Callable

from ..comm.cluster import Cluster
from ..worker import Computation
from ..worker.computation import Halted
from .signals import Stop
from .stopping import stop_grace
from .worker import Worker, end_build

__all__ = ["Ended", "Supervisor", "connect"]


class Ended(enum.Enum):
    """How the workers' tasks ended (:meth:`Supervisor.run`)."""

    COMPLETED = "completed"
    """Every task ended, and no stop was asked for."""
    STOPPED = "stopped"
    """Every task ended after a stop was asked for: the dataflows drained, unless the computation's error (a
    failure, or :class:`Halted`) says otherwise."""
    SUSPENDED = "suspended"
    """A recoverable computation asked to stop has its final snapshots, complete everywhere."""


class Supervisor:
    """Owns the tasks of this process's workers, the builds among them that still await, and the wait for a
    recoverable computation's final snapshots (see the module's description)."""

    def __init__(self, computation: Computation, cluster: Cluster | None) -> None:
        self._computation = computation
        self._cluster = cluster
        self._tasks: list[asyncio.Task[Any]] = []
        """The workers' tasks, in worker order, once :meth:`run` started them."""
        self._builds: set[asyncio.Task[Any]] = set()
        """The workers' tasks while they await an ``async`` build function."""
        self._asked = 0
        """How many times a stop was asked for."""
        self._grace = 0.0
        self._deadline: float | None = None
        """When the grace period ends (``None``: no stop asked, or stopped hard already)."""
        self._suspension: asyncio.Task[None] | None = None
        """The wait for the final snapshots, while it is waited for."""
        self._suspensions: list[asyncio.Task[None]] = []
        """Every such wait started (cancelled when :meth:`run` ends)."""

    @property
    def started(self) -> bool:
        """Whether the workers' tasks were started."""
        return bool(self._tasks)

    async def run(self, build: Callable[[Worker], Any], workers: list[Worker], *, early: bool = False) -> Ended:
        """Run ``build(worker)`` and then the worker's dataflows, for each of ``workers`` in a task of its own,
        and wait until every task has ended or a recoverable computation is suspended. A cancellation of the task
        waiting here asks the computation to stop (see the module's description); ``early``: a stop was asked
        for before the workers ran."""
        self._tasks = [asyncio.ensure_future(self._work(build, worker)) for worker in workers]
        self._grace = stop_grace()
        if early:
            self._asked = 1
            self._stop_gracefully()
        try:
            while True:
                try:
                    ended = await self._wait()
                except asyncio.CancelledError:
                    self._asked_again()
                    continue
                if ended is not None:
                    return ended
        finally:
            self._drop_suspensions()

    def results(self) -> list[Any]:
        """What each worker's build returned, in worker order (once every task has ended)."""
        return [task.result() for task in self._tasks]

    def failure(self) -> BaseException | None:
        """The first error a worker's task ended with (a cancelled task's: ``CancelledError``)."""
        for task in self._tasks:
            if task.cancelled():
                return asyncio.CancelledError()
            if task.exception() is not None:
                return task.exception()
        return None

    def cancel_builds(self, error: BaseException | None = None) -> None:
        """Cancel the builds still awaiting (as when the computation failed: they may await what the dataflows
        no longer feed)."""
        for building in list(self._builds):
            building.cancel()

    async def close(self) -> None:
        """Cancel the workers' tasks still running and wait until every one has ended."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    # -- a worker's task ---------------------------------------------------------------------

    async def _work(self, build: Callable[[Worker], Any], worker: Worker) -> Any:
        """Run ``build(worker)``, then the worker until its dataflows complete; what fails here fails the
        computation."""
        try:
            result = build(worker)
            if inspect.isawaitable(result):
                result = await self._await_build(result)
            end_build(worker)
            await worker.step_until_done()
            return result
        except BaseException as exc:
            self._computation.fail(exc)
            raise

    async def _await_build(self, building: Awaitable[Any]) -> Any:
        """Await an ``async`` build. A graceful stop that cancels it ends it as if it returned ``None``: its
        inputs close as any build's do, and the worker drains. Stopped hard, or suspended (an input closed now
        would end open windows), it raises the ``CancelledError``."""
        me = asyncio.current_task()
        assert me is not None
        self._builds.add(me)
        try:
            if self._computation.stopping:
                raise asyncio.CancelledError()
            return await building
        except asyncio.CancelledError:
            if not self._ends_build_gracefully(me):
                raise
            me.uncancel()  # the stop ended the build, not the worker's task
            return None
        finally:
            self._builds.discard(me)

    def _ends_build_gracefully(self, task: asyncio.Task[Any]) -> bool:
        """Whether the cancellation ``task`` (a worker's, in its build) got is a graceful stop's, and one only."""
        computation = self._computation
        return computation.stopping and not computation.suspending and task.cancelling() <= 1

    # -- waiting, and stopping ----------------------------------------------------------------

    async def _wait(self) -> Ended | None:
        """Wait once: until the tasks end, the final snapshots are complete, or the grace period ends. How the
        tasks ended, or ``None`` to wait again."""
        loop = asyncio.get_running_loop()
        timeout = None if self._deadline is None else max(0.0, self._deadline - loop.time())
        if self._suspension is None:
            return await self._wait_tasks(timeout)
        return await self._wait_suspension(self._suspension, timeout)

    async def _wait_tasks(self, timeout: float | None) -> Ended | None:
        _, pending = await asyncio.wait(self._tasks, timeout=timeout)
        if not pending:
            return self._how_ended()
        self._halt(self._grace_ended())
        return None

    async def _wait_suspension(self, suspension: asyncio.Task[None], timeout: float | None) -> Ended | None:
        live = [task for task in self._tasks if not task.done()]
        done, _ = await asyncio.wait([suspension, *live], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if all(task.done() for task in self._tasks):
            return self._how_ended()  # (the dataflows completed meanwhile)
        if suspension.done():
            failed = self._computation.error or suspension.exception()
            if failed is None:
                return Ended.SUSPENDED
            self._computation.fail(failed)  # (a peer failed before it said goodbye): the workers stop on it
            self._suspension = None
        elif not done:
            self._halt(self._grace_ended())
            self._suspension = None
        return None

    def _how_ended(self) -> Ended:
        return Ended.STOPPED if self._asked > 0 else Ended.COMPLETED

    def _grace_ended(self) -> str:
        return f"the grace period ended ({self._grace:g} s, AIOTIMELY_STOP_GRACE)"

    def _asked_again(self) -> None:
        """The task waiting on the workers was cancelled: the first time, stop gracefully; then, stop hard."""
        self._asked += 1
        if self._asked == 1:
            self._stop_gracefully()
        else:
            self._halt("asked to stop a second time")

    def _stop_gracefully(self) -> None:
        """The sources end; a recoverable computation waits for its final snapshots, any other cancels the builds
        still running; the grace period starts."""
        self._computation.request_stop()
        if self._computation.suspending:
            self._suspension = asyncio.ensure_future(self._suspend())
            self._suspensions.append(self._suspension)
        else:
            self.cancel_builds()
        self._deadline = asyncio.get_running_loop().time() + self._grace

    async def _suspend(self) -> None:
        """Wait until every dataflow's final snapshot is complete everywhere, and (over several processes) until
        every other process says it has its own too: the workers go on running meanwhile, as the peers'
        snapshots need them."""
        await self._computation.final_snapshots()
        if self._cluster is not None:
            await self._cluster.say_goodbye()

    def _halt(self, reason: str) -> None:
        """Stop hard: every worker stops where it is, and its task ends; no grace period any more."""
        self._computation.fail(Halted(reason))
        for task in self._tasks:
            task.cancel()
        self._deadline = None

    def _drop_suspensions(self) -> None:
        """Cancel the waits for final snapshots still running (one that failed said so already, as the
        computation's failure)."""
        for task in self._suspensions:
            if task.done():
                if not task.cancelled():
                    task.exception()
            else:
                task.cancel()


async def connect(cluster: Cluster, stop: Stop) -> None:
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
            task.uncancel()  # (the stop is remembered in stop.early, and asked of the workers once they run)
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
