"""One worker's scheduling: the task that runs rounds, sleeps when idle, and owns the helper tasks.

Each round the worker runs every dataflow that something activated (data
arrived, a frontier moved, a progress batch came in, an activator fired, a future
an operator awaited completed); each dataflow runs only the operators that asked.
With nothing to do, the scheduler sleeps on a future that any activation
resolves: an idle worker costs nothing. (While someone waits on it for progress, with a
probe's ``wait_beyond`` or ``step_while``, one timer looks now and then: a worker that ran
no round for ``stall_after`` seconds logs what holds time back, :meth:`Scheduler.stall_report`.
Nothing is done for it per round.)
The scheduler task runs inside an
``asyncio.TaskGroup``: helper tasks that operators start (:meth:`Scheduler.start_soon`)
are cancelled and awaited when the worker stops, and one that fails fails the
computation.

The scheduler knows dataflows only through :class:`~.schedule.Schedule`; dataflow code
knows the scheduler only through :class:`~.schedule.WorkerHandle`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time as _time
import weakref
from collections import deque
from typing import Any, Callable, Coroutine

from ..errors import DataflowError
from .activations import Activations
from .computation import Computation
from .logging import LogRegistry, Logger, ParkEvent, ScheduleEvent, ShutdownEvent, StartStop, TimelyEvent
from .schedule import Awaited, Hold, Schedule
from .statistics import WorkerStatistics

__all__ = ["Scheduler", "WorkerStatistics", "CLOSE_TIMEOUT", "KEEP_FINISHED", "STALL_CHECKS", "STALL_HOLDERS",
           "STALL_REPEAT", "wake_all"]

log = logging.getLogger("aiotimely.worker")

KEEP_FINISHED = 16
"""How many complete dataflows a worker keeps for :meth:`Scheduler.statistics` (the latest ones)."""

LOGGED_NAMES = 20
"""How many operator names the log line of a dataflow built shows (then how many more there are)."""

CLOSE_TIMEOUT = 5.0
"""Seconds the operators of a stopping worker get to run their cleanup (``finally``, ``async with``)."""

STALL_REPEAT = 10
"""A stall report is repeated, unchanged, only after this many times ``stall_after`` (a changed one at once)."""

STALL_HOLDERS = 5
"""How many holders a stall report names for one wait (then how many more there are)."""

STALL_CHECKS = 4
"""The stall timer looks every ``stall_after / STALL_CHECKS`` seconds while someone waits for progress: that many
looks in a row with no round run make a stall (said between 1 and 1.25 times ``stall_after`` after the last round)."""


def wake_all(waiters: list[asyncio.Future[None]]) -> None:
    """Resolve every future in ``waiters`` not yet done (producers waiting for room, callers waiting for a
    step) and empty the list."""
    while waiters:
        fut = waiters.pop()
        if not fut.done():
            fut.set_result(None)


class Scheduler:
    """The scheduling side of worker ``index`` of ``peers``, one of ``computation``'s workers."""

    def __init__(self, index: int, peers: int, computation: Computation) -> None:
        if not 0 <= index < peers:
            raise ValueError(f"worker index {index} is not in 0..{peers - 1}")
        self.index = index
        self.peers = peers
        self.computation = computation
        computation.workers.append(self)
        self.fabric = computation.fabric
        self.activations = Activations(self.wake_up)
        self.operators_run = 0
        self.rounds = 0
        self.busy = 0.0
        """Seconds spent running rounds (a statistic: see :meth:`statistics`)."""
        self._dataflows: dict[int, Schedule] = {}
        self._finished: deque[Schedule] = deque(maxlen=KEEP_FINISHED)
        self._next_dataflow = 0
        self._wake: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread_id = threading.get_ident()
        self._step_waiters: list[asyncio.Future[None]] = []
        self._round_waiters: list[asyncio.Future[None]] = []
        self._done_waiters: list[asyncio.Future[None]] = []
        self._stepping = 0
        self._waits = _Waits()
        """The futures of :meth:`waiter`, and the stall timer. (One attribute for all of that: with a 30th
        attribute, every attribute of a scheduler costs more to read, on CPython 3.11, in every activation.)"""
        self._build_end: dict[int, Callable[[], None]] = {}
        """What waits for the end of the build (:meth:`at_build_end`), by a number that keeps the order given."""
        self._build_end_of: dict[int, list[int]] = {}
        """The numbers in ``_build_end`` that belong to each dataflow: dropped when it completes."""
        self._next_build_end = 0
        self._built = False
        self._group: asyncio.TaskGroup | None = None
        self._helpers: set[asyncio.Task[Any]] = set()
        self._named_errors: dict[int, BaseException] = {}
        self.logging: Logger[TimelyEvent] | None = None
        """The ``"timely"`` log while someone listens (see :mod:`.logging`): where the runtime logs events."""
        self.log_registry = LogRegistry(index, computation.fail, self._timely_log)

    def _timely_log(self, logger: Logger[TimelyEvent] | None) -> None:
        self.logging = logger

    # -- dataflows ------------------------------------------------------------------------

    def new_dataflow_index(self) -> int:
        """The index of the next dataflow; every worker numbers its dataflows in the same order."""
        index = self._next_dataflow
        self._next_dataflow += 1
        self.fabric.begin_dataflow(index)
        return index

    def install(self, index: int, dataflow: Schedule) -> None:
        """Run ``dataflow`` from now on, until it is complete."""
        self._dataflows[index] = dataflow
        if log.isEnabledFor(logging.INFO):
            names = [op.statistics().name for op in dataflow.operators()]
            shown = ", ".join(names[:LOGGED_NAMES]) + (f", ... ({len(names) - LOGGED_NAMES} more)"
                                                        if len(names) > LOGGED_NAMES else "")
            log.info("worker %d: dataflow %r (#%d) built with %d operators: %s", self.index, dataflow.name, index,
                     len(names), shown)

    # -- for dataflow code (WorkerHandle) -----------------------------------------------------

    def activate(self, path: tuple[int, ...]) -> None:
        self.activations.activate(path)

    def activate_later(self, path: tuple[int, ...]) -> None:
        self.activations.activate_later(path)

    def activate_threadsafe(self, path: tuple[int, ...]) -> None:
        if threading.get_ident() == self._thread_id:
            self.activations.activate(path)
        else:
            self.call_in_worker_thread(self.activations.activate, path)

    def activator(self, path: tuple[int, ...]) -> Callable[[], None]:
        return self.activations.activator(path)

    def call_in_worker_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is None or threading.get_ident() == self._thread_id:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def at_build_end(self, fn: Callable[[], None], dataflow: int | None = None) -> None:
        if self._built:
            fn()
            return
        key = self._next_build_end
        self._next_build_end += 1
        self._build_end[key] = fn
        if dataflow is not None:
            self._build_end_of.setdefault(dataflow, []).append(key)

    def on_stop(self, fn: Callable[[], None]) -> Callable[[], None]:
        return self.computation.on_stop(fn)

    def on_final_snapshot(self, take: Callable[[], asyncio.Future[None]]) -> Callable[[], None]:
        return self.computation.on_final_snapshot(take)

    def waiter(self) -> asyncio.Future[None]:
        self.check_running()
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        waits = self._waits
        waits.futures.add(fut)
        fut.add_done_callback(waits.futures.discard)
        if waits.timer is None and self.computation.stall_after:  # (asleep, it would not go idle again)
            self._arm_stall()
        return fut

    def describe_waits(self, owner: Any, describe: Callable[[Any], list[Awaited]]) -> None:
        self._waits.described[owner] = describe

    def watch_failure(self, owner: Any, told: Callable[[Any, BaseException], None]) -> None:
        self.computation.watch_failure(owner, told)

    def start_soon(self, coro: Coroutine[Any, Any, Any], *, name: str,
                   error: Callable[[Exception], BaseException] | None = None) -> asyncio.Task[Any]:
        group = self._group
        if group is None:
            coro.close()
            raise RuntimeError(f"worker {self.index} is not running: it cannot start {name!r}")
        task = group.create_task(coro, name=f"aiotimely-worker-{self.index}: {name}")
        self._helpers.add(task)
        task.add_done_callback(functools.partial(self._helper_done, name, error))
        return task

    def _helper_done(self, name: str, error: Callable[[Exception], BaseException] | None,
                     task: asyncio.Task[Any]) -> None:
        self._helpers.discard(task)
        if not task.cancelled():
            exc = task.exception()
            if isinstance(exc, Exception) and not isinstance(exc, DataflowError):
                if error is not None:
                    named = error(exc)
                else:
                    named = DataflowError(f"{name} failed: {type(exc).__name__}: {exc}")
                named.__cause__ = exc
                self._named_errors[id(exc)] = named

    # -- waking ------------------------------------------------------------------------

    def wake_up(self) -> None:
        """Resume the scheduler task if it sleeps."""
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    # -- running ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler task on the running event loop."""
        if self._task is not None:
            raise RuntimeError(f"worker {self.index} is already running")
        self._loop = asyncio.get_running_loop()
        self._thread_id = threading.get_ident()
        self._task = self._loop.create_task(self._main(), name=f"aiotimely-worker-{self.index}")
        log.info("worker %d of %d started", self.index, self.peers)

    async def _main(self) -> None:
        computation = self.computation
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                try:
                    await self._run()
                finally:
                    self._group = None
                    for task in list(self._helpers):
                        task.cancel()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an operator or a helper failed: stop everyone
            first = _first_error(exc)
            computation.fail(self._named_errors.get(id(first), first))
        finally:
            self._disarm_stall()
            error = computation.error or RuntimeError(f"worker {self.index} stopped")
            for fut in self._step_waiters + self._round_waiters + self._done_waiters + list(self._waits.futures):
                if not fut.done():
                    fut.set_exception(error)
            self._step_waiters.clear()
            self._round_waiters.clear()
            self._done_waiters.clear()

    async def _run(self) -> None:
        computation = self.computation
        pressure = self.fabric.pressure
        activations = self.activations
        loop = self._loop
        assert loop is not None
        registry = self.log_registry
        stall_after = computation.stall_after
        waits = self._waits
        while computation.error is None:
            if not activations:
                pressure.after_round()
                wake_all(self._step_waiters)
                if not self._dataflows:
                    wake_all(self._done_waiters)
                if self._waited_on():
                    computation.check_stuck()
                    if computation.error is not None:
                        break
                    if stall_after and waits.timer is None and (waits.futures or self._stepping):
                        self._arm_stall()
                log = self.logging
                if log is not None:
                    log.log(ParkEvent(True))
                if registry:
                    registry.flush()  # (what happened before the worker sleeps is seen before it wakes)
                self._wake = loop.create_future()
                try:
                    await self._wake
                finally:
                    self._wake = None
                log = self.logging
                if log is not None:
                    log.log(ParkEvent(False))
                continue
            self._round()
            if registry:
                registry.flush()
            wake_all(self._step_waiters)
            wake_all(self._round_waiters)
            if pressure.congested():  # the network is behind: let it drain before producing more
                await pressure.wait_writable()
            pressure.after_round()
            await asyncio.sleep(0)

    def _round(self) -> None:
        self.rounds += 1
        start = _time.perf_counter()
        log = self.logging
        try:
            for index in self.activations.take_dataflows():
                dataflow = self._dataflows.get(index)
                if dataflow is None:
                    continue
                if log is not None:
                    log.log(ScheduleEvent(dataflow.path, StartStop.START))
                if not dataflow.schedule():
                    self._complete(index, dataflow)
                    if log is not None:
                        log.log(ShutdownEvent(dataflow.path))
                if log is not None:
                    log.log(ScheduleEvent(dataflow.path, StartStop.STOP))
        finally:
            self.busy += _time.perf_counter() - start

    def _complete(self, index: int, dataflow: Schedule) -> None:
        """``dataflow`` is complete: stop running it, keeping it for :meth:`statistics` a while (the last
        :data:`KEEP_FINISHED`), and let go of everything else it held: what waited for the build's end on its behalf,
        and (once every worker of this process is done with it) its channels' mailboxes in the fabric."""
        del self._dataflows[index]
        self.activations.forget(index)
        for key in self._build_end_of.pop(index, ()):  # (an input of a complete dataflow has nothing to close)
            del self._build_end[key]
        self.fabric.end_dataflow(index)
        self._finished.append(dataflow)
        log.info("worker %d: dataflow %r (#%d) complete", self.index, dataflow.name, index)

    def idle_for_good(self) -> bool:
        """True if nothing could ever wake this worker again: it is complete, or it waits for
        completion with nothing outside (an open input, an awaited future, an activator) able to wake it."""
        if self.activations:
            return False
        if not self._dataflows:
            return self._built  # a worker still building may yet feed the others
        if not self._waited_on():
            return False  # nobody waits for this worker: its user may still act
        return not any(dataflow.may_be_woken() for dataflow in self._dataflows.values())

    def _waited_on(self) -> bool:
        """True while someone waits for this worker to make progress: ``step_until_done``, ``step_while``, or a
        probe's ``wait_beyond`` / ``wait_done``."""
        return bool(self._done_waiters or self._stepping or self._waits.futures)

    def dataflows(self) -> list[Schedule]:
        """The dataflows this worker runs that are not complete yet, in the order they were built."""
        return [self._dataflows[i] for i in sorted(self._dataflows)]

    def blockers(self) -> list[str]:
        """What keeps this worker's dataflows from completing, in words."""
        return [line for dataflow in self._dataflows.values() for line in dataflow.blockers()]

    async def step(self) -> None:
        """Let the worker do one round of scheduling."""
        self.check_running()
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        self._step_waiters.append(fut)
        self.wake_up()
        await fut

    async def step_while(self, predicate: Callable[[], bool]) -> None:
        """Step while ``predicate()`` is true; if the computation can never make it false (nothing can run and
        nothing outside can wake it), fail saying what holds it back, as ``step_until_done`` does."""
        self._stepping += 1
        try:
            while predicate():
                if self.activations:
                    await self.step()
                else:  # nothing to run: wait for something to activate the worker, instead of spinning
                    await self._next_round()
        finally:
            self._stepping -= 1

    # -- stalls: waited on, and doing nothing -------------------------------------------

    def _arm_stall(self) -> None:
        loop = self._loop
        assert loop is not None
        waits = self._waits
        waits.rounds = self.rounds
        waits.quiet = 0
        waits.timer = loop.call_later(self.computation.stall_after / STALL_CHECKS, self._check_stall)

    def _disarm_stall(self) -> None:
        waits = self._waits
        timer, waits.timer = waits.timer, None
        if timer is not None:
            timer.cancel()

    def _check_stall(self) -> None:
        """The stall timer's look, every ``stall_after / STALL_CHECKS`` seconds while someone waits for progress:
        once the worker has been asleep, with no round run, for ``STALL_CHECKS`` looks in a row, say what holds
        time back (once per situation, see :data:`STALL_REPEAT`). With nobody waiting, the timer stops (the next
        wait, or the next idle while waited on, arms it again)."""
        waits = self._waits
        waits.timer = None
        loop = self._loop
        if loop is None or self.computation.error is not None or self._task is None or self._task.done():
            return
        if not (waits.futures or self._stepping):
            return
        stall_after = self.computation.stall_after
        waits.timer = loop.call_later(stall_after / STALL_CHECKS, self._check_stall)
        wake = self._wake
        if self.rounds != waits.rounds or wake is None or wake.done():  # it ran, or is about to
            waits.rounds = self.rounds
            waits.quiet = 0
            return
        waits.quiet += 1
        if waits.quiet < STALL_CHECKS:
            return
        now = loop.time()
        try:
            report = self.stall_report()
        except Exception:  # (a report that cannot be made must not stop the worker; it is said, once)
            if waits.said != "":
                log.exception("worker %d: could not say what holds it back", self.index)
            waits.said = ""
            return
        if report is None:
            return
        text, on_io = report
        if text == waits.said and now - waits.said_at < STALL_REPEAT * stall_after:
            return
        waits.said, waits.said_at = text, now
        log.log(logging.INFO if on_io else logging.WARNING,
                "worker %d idle for %.3g s: %s. (Said after %g s of waiting with nothing running, again when "
                "this changes; stall_after= or AIOTIMELY_STALL_AFTER sets it, 0 turns it off)",
                self.index, waits.quiet * stall_after / STALL_CHECKS, text, stall_after)

    def stall_report(self) -> tuple[str, bool] | None:
        """What waits on this worker and what holds it back, in words, and whether every holder waits on I/O
        (an operator awaiting a connection, a timer: idle may be normal then); ``None`` if nothing waits."""
        waiting: dict[str, Awaited] = {}
        for owner, describe in list(self._waits.described.items()):
            for awaited in describe(owner):
                waiting.setdefault(awaited.what, awaited)
        if self._stepping:
            stepping = "worker.step_while(...) waits (its predicate is still true)"
            waiting.setdefault(stepping, Awaited(stepping, None))
        if not waiting:
            return None
        parts = []
        on_io = True
        for awaited in waiting.values():
            holds = self._holding(awaited)
            if not holds:
                on_io = False
                elsewhere = ("another process holds it (its inputs, sources or operators): look there"
                             if self.computation.distributed else "nothing in this process holds it any more")
                parts.append(f"{awaited.what}; {elsewhere}")
                continue
            on_io = on_io and all(hold.on_io for hold in holds)
            named = _held_by(holds)
            shown = "; and by ".join(named[:STALL_HOLDERS])
            more = f" (and {len(named) - STALL_HOLDERS} more)" if len(named) > STALL_HOLDERS else ""
            parts.append(f"{awaited.what}, held by {shown}{more}")
        return "; while ".join(parts), on_io

    def _holding(self, awaited: Awaited) -> list[Hold]:
        """The holds, on every worker of this process, that keep ``awaited`` waiting: in the scope it waits on,
        those at or before its time; elsewhere (or with no time), the least ones of each scope."""
        indices = [awaited.dataflow] if awaited.dataflow is not None else list(self._dataflows)
        holds = [hold for worker in self.computation.workers for index in indices
                 if (flow := worker._dataflows.get(index)) is not None for hold in flow.holds()]
        by_scope: dict[tuple[int, tuple[int, ...]], list[Hold]] = {}
        for hold in holds:
            by_scope.setdefault((hold.dataflow, hold.scope), []).append(hold)
        found: list[Hold] = []
        for (_, scope), group in by_scope.items():
            if scope == awaited.scope:
                found.extend(h for h in group if h.less_equal(h.time, awaited.time))
            else:
                found.extend(h for h in group
                             if not any(o.time != h.time and o.less_equal(o.time, h.time) for o in group))
        return found

    async def _next_round(self) -> None:
        self.check_running()
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        self._round_waiters.append(fut)
        self.wake_up()  # (the scheduler checks, while idle, whether anything could ever wake it)
        await fut

    async def step_until_done(self) -> None:
        """Run until every dataflow of this worker is complete."""
        self.check_running()
        if not self._dataflows and not self.activations:
            return
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        self._done_waiters.append(fut)
        self.wake_up()
        await fut

    def check_running(self) -> None:
        """Raise the computation's error, or say so if the worker is not running."""
        if self.computation.error is not None:
            raise self.computation.error
        if self._task is None or self._task.done():
            raise RuntimeError("the worker is not running: use 'async with aiotimely.Worker() as worker:' "
                               "or aiotimely.execute(...)")

    def end_build(self) -> None:
        """The worker's build is over: run what waited for that (inputs still open are closed)."""
        self._built = True
        callbacks, self._build_end = self._build_end, {}
        self._build_end_of.clear()
        for fn in callbacks.values():
            fn()

    async def stop(self) -> None:
        """Stop the scheduler task (cancelling and awaiting the helper tasks) and close every dataflow."""
        self._disarm_stall()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        dataflows = list(self._dataflows.values())
        self._dataflows.clear()
        self._finished.extend(dataflows)
        self.log_registry.close()
        if task is not None:
            log.info("worker %d stopped after %d rounds (%d operator runs, %.3f s busy)%s", self.index, self.rounds,
                     self.operators_run, self.busy,
                     f", {len(dataflows)} dataflow(s) incomplete" if dataflows else "")
        if dataflows:
            loop = asyncio.get_running_loop()
            closing = [loop.create_task(dataflow.close()) for dataflow in dataflows]
            _, late = await asyncio.wait(closing, timeout=CLOSE_TIMEOUT)
            for task in late:  # a cleanup that does not end: cancel it (its operator logs that)
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=1.0)

    def statistics(self) -> WorkerStatistics:
        """What this worker has done so far, with the statistics of every operator of the dataflows it runs and
        of the last :data:`KEEP_FINISHED` complete ones (those first)."""
        flows = list(self._finished) + self.dataflows()
        operators = tuple(op.statistics() for flow in flows for op in flow.operators())
        return WorkerStatistics(self.index, self.peers, self.rounds, len(self._dataflows), self.operators_run,
                                self.busy, operators)

    def __repr__(self) -> str:
        return f"Scheduler(index={self.index}, peers={self.peers})"


class _Waits:
    """What waits on a worker (the futures of :meth:`Scheduler.waiter`), and its stall timer's state."""

    __slots__ = ("futures", "described", "timer", "rounds", "quiet", "said", "said_at")

    def __init__(self) -> None:
        self.futures: set[asyncio.Future[None]] = set()
        """The futures of :meth:`Scheduler.waiter`: probes', inputs' waiting for room, snapshots'."""
        self.described: weakref.WeakKeyDictionary[Any, Callable[[Any], list[Awaited]]] = (
            weakref.WeakKeyDictionary())
        """What can say what it waits for (probes), asked only for a stall report."""
        self.timer: asyncio.TimerHandle | None = None
        """Armed while someone waits for progress (see :data:`STALL_CHECKS`): never re-armed per round."""
        self.rounds = 0
        """The worker's ``rounds`` when the timer last looked."""
        self.quiet = 0
        """How many looks in a row saw the worker asleep, with no round run since the look before."""
        self.said: str | None = None
        """The last report said, and when (the loop's clock)."""
        self.said_at = 0.0


def _held_by(holds: list[Hold]) -> list[str]:
    """Each holder in words, its times together: ``operator 'Input' (#1) ... at time 0: call advance_to() ...``."""
    times: dict[tuple[str, str], list[Any]] = {}
    for hold in holds:
        times.setdefault((hold.operator, hold.why), []).append(hold.time)
    said = []
    for (operator, why), held in times.items():
        distinct: list[Any] = []
        for time in held:
            if time not in distinct:  # (times need not be hashable)
                distinct.append(time)
        ordered = sorted(distinct, key=_order)
        at = f"time {ordered[0]!r}" if len(ordered) == 1 else "times " + ", ".join(map(repr, ordered))
        said.append(f"{operator} at {at}: {why}")
    return said


def _order(time: Any) -> Any:
    return (0, time) if isinstance(time, int) else (1, repr(time))


def _first_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or exc.exceptions)[0]
    return exc
