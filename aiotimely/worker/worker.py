"""The worker: one scheduler task on an event loop, running the dataflows it built.

Each round the worker runs every dataflow that something activated (data
arrived, a frontier moved, a progress batch came in, an activator fired, a future
an operator awaited completed); each dataflow runs only the operators that need
it. With nothing to do, the scheduler sleeps on a future that any activation
resolves: an idle worker costs nothing.

The workers of one process share a :class:`Computation`: their mailboxes and the
first failure, which stops them all.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, NamedTuple

from ..comm.local import LocalFabric
from ..dataflow.scope import BuildContext, Scope
from ..errors import DataflowError
from ..progress import Refinement, timestamp_type

__all__ = ["Worker", "Computation", "Dataflow", "WorkerStatistics"]


class WorkerStatistics(NamedTuple):
    """A snapshot of what a worker has done."""

    index: int
    peers: int
    rounds: int
    dataflows: int
    operators_run: int


class Computation:
    """The workers of one process: their mailboxes, and the first failure among them."""

    def __init__(self, peers: int, *, fabric: Any = None, distributed: bool = False) -> None:
        self.peers = peers
        self.fabric = fabric if fabric is not None else LocalFabric(peers)
        self.distributed = distributed
        self.workers: list[Worker] = []
        self.error: BaseException | None = None
        self.backlog: set = set()
        """Operators awaiting I/O with long input queues: reading from other processes pauses for them."""

    def flow_control(self) -> None:
        """After a round: read from the network again unless some operator is too far behind."""
        if self.backlog:
            self.backlog = {op for op in self.backlog if op.backlogged()}
        if self.backlog:
            self.fabric.pause_reading()
        else:
            self.fabric.resume_reading()

    def fail(self, error: BaseException) -> None:
        """Record the first failure and wake every worker so that all of them stop."""
        if self.error is None:
            self.error = error
        for worker in self.workers:
            worker._wake_up()

    def check_stuck(self) -> None:
        """If every worker waits for completion and none can move, fail with what blocks them."""
        workers = self.workers
        if self.distributed or not workers or any(not w._idle_for_good() for w in workers):
            return  # (other processes could still wake these workers)
        blocked = [line for w in workers for line in w._blockers()]
        if not blocked:
            return  # every worker is complete
        self.fail(DataflowError(
            "the computation cannot complete: nothing can run, but "
            + "; ".join(blocked)
            + ". Drop capabilities (or let the operator's logic return) once their times are done."
        ))


class Dataflow:
    """One dataflow built by one worker: its root scope and its channel numbering."""

    def __init__(self, worker: Worker, index: int, name: str, timestamp: Any) -> None:
        self.worker = worker
        self.index = index
        self.name = name
        self._next_channel = 0
        self.root = Scope(worker, self, Refinement.region(timestamp_type(timestamp)), name=name)

    def allocate_channel(self) -> tuple[int, int]:
        """The next data channel id; every worker allocates the same ids in the same order."""
        channel = (self.index, self._next_channel)
        self._next_channel += 1
        return channel

    def __repr__(self) -> str:
        return f"Dataflow({self.name!r}, index={self.index})"


class Worker:
    """One timely worker on an asyncio event loop.

    Use ``async with aiotimely.Worker() as worker:`` inside an application (one
    worker, the running loop), or let :func:`aiotimely.execute` create several.
    """

    def __init__(self, index: int = 0, peers: int = 1, *, computation: Computation | None = None) -> None:
        if not 0 <= index < peers:
            raise ValueError(f"worker index {index} is not in 0..{peers - 1}")
        self.index = index
        self.peers = peers
        self.computation = computation or Computation(peers)
        self.computation.workers.append(self)
        self.fabric = self.computation.fabric
        self._dataflows: dict[int, Dataflow] = {}
        self._next_dataflow = 0
        self._active: set[int] = set()
        self._wake: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._thread_id = threading.get_ident()
        self._step_waiters: list[asyncio.Future] = []
        self._done_waiters: list[asyncio.Future] = []
        self._inputs: list = []
        self._probes: list = []
        self._built = False
        self._rounds = 0
        self._operators_run = 0

    # -- building ----------------------------------------------------------------------

    def dataflow(self, fn: Callable[[Scope], Any] | None = None, *, name: str | None = None,
                 timestamp: Any = int) -> Any:
        """Build a dataflow: ``worker.dataflow(fn)`` calls ``fn(scope)`` and returns its result, or
        ``async with worker.dataflow() as scope:`` builds it when the block ends.

        ``timestamp`` is the dataflow's timestamp type (``int`` by default).
        """
        index = self._next_dataflow
        self._next_dataflow += 1
        dataflow = Dataflow(self, index, name or f"dataflow-{index}", timestamp)
        if fn is None:
            return BuildContext(dataflow.root, lambda: self._install(dataflow))
        result = fn(dataflow.root)
        if asyncio.iscoroutine(result):
            result.close()
            raise TypeError("worker.dataflow(fn) needs a plain function; build asynchronously with "
                            "'async with worker.dataflow() as scope:'")
        self._install(dataflow)
        return result

    def _install(self, dataflow: Dataflow) -> None:
        dataflow.root._finish()
        self._dataflows[dataflow.index] = dataflow
        dataflow.root._start()

    # -- activation ----------------------------------------------------------------------

    def activate(self, path: tuple[int, ...]) -> None:
        """Schedule the operator or scope at ``path`` (and the scopes around it) for the next round."""
        dataflow = self._dataflows.get(path[0])
        if dataflow is None:
            return
        scope = dataflow.root
        for index in path[1:]:
            scope.pending.add(index)
            child = scope.children.get(index)
            if type(child) is not Scope:
                break
            scope = child
        self._active.add(path[0])
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _wake_up(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _call_soon_threadsafe(self, fn: Callable, *args: Any) -> None:
        loop = self._loop
        if loop is None:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    # -- running ----------------------------------------------------------------------

    def _start_scheduler(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"worker {self.index} is already running")
        self._loop = asyncio.get_running_loop()
        self._thread_id = threading.get_ident()
        self._task = self._loop.create_task(self._run(), name=f"aiotimely-worker-{self.index}")

    async def _run(self) -> None:
        computation = self.computation
        fabric = self.fabric
        loop = self._loop
        try:
            while computation.error is None:
                if not self._active:
                    computation.flow_control()
                    self._release(self._step_waiters)
                    if not self._dataflows:
                        self._release(self._done_waiters)
                    if self._done_waiters:
                        computation.check_stuck()
                        if computation.error is not None:
                            break
                    self._wake = loop.create_future()
                    try:
                        await self._wake
                    finally:
                        self._wake = None
                    continue
                self._round()
                self._release(self._step_waiters)
                if fabric.congested():  # the network is behind: let it drain before producing more
                    await fabric.wait_writable()
                computation.flow_control()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an operator failed: stop everyone
            computation.fail(exc)
        finally:
            error = computation.error or RuntimeError(f"worker {self.index} stopped")
            for fut in self._step_waiters + self._done_waiters:
                if not fut.done():
                    fut.set_exception(error)
            for probe in self._probes:
                probe._fail(error)
            self._step_waiters.clear()
            self._done_waiters.clear()

    def _round(self) -> None:
        self._rounds += 1
        active = sorted(self._active)
        self._active.clear()
        for index in active:
            dataflow = self._dataflows.get(index)
            if dataflow is not None and not dataflow.root.schedule():
                del self._dataflows[index]

    @staticmethod
    def _release(waiters: list[asyncio.Future]) -> None:
        while waiters:
            fut = waiters.pop()
            if not fut.done():
                fut.set_result(None)

    def _idle_for_good(self) -> bool:
        """True if nothing could ever wake this worker again: it is complete, or it waits for
        completion with no open input, no awaited future and no activator handed out."""
        if self._active:
            return False
        if not self._dataflows:
            return self._built  # a worker still building may yet feed the others
        if not self._done_waiters or any(inp.is_open() for inp in self._inputs):
            return False
        for dataflow in self._dataflows.values():
            for op in dataflow.root.operators():
                if not op.done and (op.is_waiting() or op.externally_driven):
                    return False
        return True

    def _blockers(self) -> list[str]:
        """What keeps this worker's dataflows from completing, in words."""
        lines = []
        for dataflow in self._dataflows.values():
            found = []
            for op in dataflow.root.operators():
                if op.done:
                    continue
                held = sorted({t for _, t in op.held_capabilities()}, key=repr)
                if held:
                    times = ", ".join(repr(t) for t in held)
                    found.append(f"{op.describe()} still holds capabilities at time(s) {times}")
                undrained = [inp.port for inp in op.inputs if inp.pending()]
                if undrained:
                    found.append(f"{op.describe()} never drained its input(s) {undrained}")
            if not found:
                waiting = [op.name for op in dataflow.root.operators() if not op.done]
                found.append(f"dataflow {dataflow.name!r} on worker {self.index} is incomplete "
                             f"(unfinished operators: {waiting})")
            lines.extend(found)
        return lines

    async def step(self) -> None:
        """Let the worker do one round of scheduling."""
        self._check_running()
        fut = self._loop.create_future()
        self._step_waiters.append(fut)
        self._wake_up()
        await fut

    async def step_while(self, predicate: Callable[[], bool]) -> None:
        """Step while ``predicate()`` is true (e.g. ``lambda: probe.less_than(inp.time)``)."""
        while predicate():
            await self.step()

    async def step_until_done(self) -> None:
        """Run until every dataflow of this worker is complete."""
        self._check_running()
        if self.computation.error is not None:
            raise self.computation.error
        if not self._dataflows and not self._active:
            return
        fut = self._loop.create_future()
        self._done_waiters.append(fut)
        self._wake_up()
        await fut

    def _check_running(self) -> None:
        if self.computation.error is not None:
            raise self.computation.error
        if self._task is None or self._task.done():
            raise RuntimeError("the worker is not running: use 'async with aiotimely.Worker() as worker:' "
                               "or aiotimely.execute(...)")

    def _close_inputs(self) -> None:
        """The worker's building is over (its build returned, or its block ended): close what it left open."""
        self._built = True
        for inp in self._inputs:
            if inp.is_open():
                inp.close()

    async def _stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        for dataflow in self._dataflows.values():
            dataflow.root.close()
        self._dataflows.clear()

    # -- async with ----------------------------------------------------------------------

    async def __aenter__(self) -> Worker:
        self._start_scheduler()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._close_inputs()
                await self.step_until_done()
        finally:
            await self._stop()

    def statistics(self) -> WorkerStatistics:
        return WorkerStatistics(self.index, self.peers, self._rounds, len(self._dataflows), self._operators_run)

    def __repr__(self) -> str:
        return f"Worker(index={self.index}, peers={self.peers})"

