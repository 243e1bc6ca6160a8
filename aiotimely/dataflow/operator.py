"""The runtime of one operator on one worker: its ports, the capabilities it holds, and how its logic runs.

An operator's logic is either a coroutine (the user's ``async def``), resumed by
the worker with ``send(None)`` each time the operator is activated, or a plain
function over batches (the built-in operators), called instead. A coroutine waits
for its next activation by yielding a sentinel; if it awaits a real asyncio future
instead, the operator is parked until the future is done, while the worker goes
on running everything else.

Everything an activation does to progress (records consumed and produced,
capabilities taken or dropped) lands in the operator's :class:`SharedProgress`,
which the scope collects right after the operator yields: one atomic batch.
Operators are made by :class:`~aiotimely.dataflow.builder.OperatorBuilder`.
"""

from __future__ import annotations

import asyncio
import logging
import time as _time
from _thread import get_ident as _get_ident
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

from ..errors import AiotimelyError, CapabilityError, DataflowError, RecoveryError
from ..progress import Antichain, FrontierInterest, OperatorProgress, Target
from ..worker.logging import Logger, MessagesEvent, OperatesEvent, PushProgressEvent, TimelyEvent
from ..worker.statistics import InputStatistics, OperatorStatistics
from .bookkeeping import ProgressBooks
from .channels import endpoints
from .recovering import OperatorRecovery
from .roles import SnapshotterRole
from .ports import ACTIVATION, Activator, InputPort, OutputPort

if TYPE_CHECKING:
    from ..comm.fabric import Endpoint
    from ..progress import Operate, Subgraph, SubgraphBuilder, TimestampType
    from .fusion import FusedChain
    from ..worker import WorkerHandle

__all__ = ["OperatorRuntime", "Logic"]

T = TypeVar("T")

log = logging.getLogger("aiotimely")

_clock = _time.perf_counter

Logic = Callable[[], None] | Coroutine[Any, Any, None]
"""What runs at each activation: a function (called) or a coroutine (resumed)."""


def _nothing() -> None:
    pass


class _Dataflow(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def snapshotter(self) -> SnapshotterRole | None: ...


class OperatorScope(Protocol):
    """What an operator uses of its scope (:class:`~aiotimely.dataflow.scope.ScopeCore`)."""

    @property
    def worker(self) -> WorkerHandle: ...

    @property
    def dataflow(self) -> _Dataflow: ...

    @property
    def parent(self) -> object | None: ...

    @property
    def path(self) -> tuple[int, ...]: ...

    @property
    def ttype(self) -> TimestampType[Any, Any]: ...

    @property
    def progress(self) -> Subgraph | None: ...

    def describe(self) -> str: ...

    def reserve_child(self, child: OperatorRuntime) -> int: ...

    def add_progress(self, index: int, progress: Operate) -> None: ...

    def check_building(self) -> SubgraphBuilder: ...

    def connectivity(self, child: int, input: int) -> dict[int, Antichain[Any]]: ...

    def refresh(self, child: int) -> bool: ...


class OperatorRuntime:
    """One operator on one worker."""

    __slots__ = (
        "scope", "worker", "name", "ttype", "progress", "index", "path", "outputs", "inputs", "epoch",
        "current_time", "done", "externally_driven", "poked", "running", "bounded", "recovery", "books", "_coro",
        "_function", "_waiting", "_dirty_ports", "_outlets", "_activate", "channels", "pacts", "routed",
        "keeps_routing", "chain", "activations", "busy", "seen_in_refresh", "__weakref__",
    )

    def __init__(self, scope: OperatorScope, name: str) -> None:
        self.scope = scope
        self.worker: WorkerHandle = scope.worker
        self.name = name
        self.ttype = scope.ttype
        self.index = scope.reserve_child(self)
        self.path = scope.path + (self.index,)
        self.progress: OperatorProgress | None = None
        self.inputs: list[InputPort] = []
        self.outputs: list[OutputPort] = []
        self.epoch = 0
        self.current_time: Any = None
        self.done = False
        self.externally_driven = False
        self.poked = False
        """An activator was called and the logic has not yet come back to wait for an activation."""
        self.running = 0
        """The thread running the logic right now (0: it is not running): an activator it calls itself asks for
        the next round (see :meth:`Activator.activate`)."""
        self.seen_in_refresh = 0
        """Frontier changes taken by :meth:`refresh_frontiers`: the logic that asked saw them (not news)."""
        self.bounded = True
        """Whether the operator waits while a mailbox it feeds is full (a feedback loop's does not: a cycle of
        full mailboxes would wait forever)."""
        self.recovery = OperatorRecovery(self)
        """The operator's share in its dataflow's snapshots: every snapshot hook."""
        self._outlets: list[Endpoint] = []
        self._activate: Callable[[], None] = _nothing
        self.books = ProgressBooks(self.worker, self.path)
        """The operator's progress bookkeeping: the capabilities it holds, what its activations did."""
        self._coro: Coroutine[Any, Any, None] | None = None
        self._function: Callable[[], None] | None = None
        self._waiting: asyncio.Future[Any] | None = None
        self._dirty_ports: list[OutputPort] = []
        self.channels: list[tuple[int, int]] = []
        """The channel feeding each input (for the log's received messages)."""
        self.pacts: list[str] = []
        """How each input is fed: ``"pipeline"`` (this worker's records), ``"exchange"`` or ``"broadcast"``."""
        self.routed: list[bool] = []
        """Whether each input's records are on the worker their key routes to: exchanged, or fed on the worker by a
        stream that was (:func:`~aiotimely.dataflow.builder.routed_by_key`). Keyed state needs it on many workers."""
        self.keeps_routing = False
        """The operator sends its input records on, on their worker (a concatenation, a branch): what comes out is
        routed by key where what came in was."""
        self.chain: FusedChain | None = None
        """The stages this operator runs, if it is a chain of stateless operators (:mod:`.fusion`)."""
        self.activations = 0
        """How many times the logic ran (a statistic, as :attr:`busy` is: see :meth:`statistics`)."""
        self.busy = 0.0
        """Seconds the logic ran, over every activation."""
        log = self.worker.logging
        if log is not None:
            log.log(OperatesEvent(self.path, name))

    def install(self, connectivity: Sequence[dict[int, Any]] | None,
                interest: Sequence[FrontierInterest]) -> None:
        """The shape is complete: join the scope's progress tracking, holding this worker's share of the
        initial capabilities (one per output, at the minimum time)."""
        progress = OperatorProgress(self.name, len(self.inputs), len(self.outputs), connectivity=connectivity,
                                    interest=interest)
        self.progress = progress
        books = self.books
        books.open(progress.shared, len(self.outputs), self.ttype.minimum)
        for port in self.inputs:
            port.bind(books.consumed(port.port))
        for out in self.outputs:
            out.produced = books.produced(out.index)
        self.scope.add_progress(self.index, progress)

    def add_output(self) -> OutputPort:
        """One more output, reached unchanged from every input, once the operator is built but before its scope
        is (a stream taken from the middle of a fused chain). Like every output of a function operator, it
        holds no capability."""
        self.scope.check_building()
        assert self.progress is not None
        out = OutputPort(self, len(self.outputs))
        self.outputs.append(out)
        out.produced = self.books.add_output(self.progress, out.index, self.ttype.minimum)
        return out

    def set_logic(self, logic: Logic) -> None:
        """Run ``logic`` at each activation: call it (a function) or resume it (a coroutine)."""
        if callable(logic):
            self._function = logic
        elif isinstance(logic, Coroutine):
            self._coro = logic
        else:
            raise TypeError(f"{self.describe()}: the logic must be a function or a coroutine, not {logic!r}")

    def activator(self) -> Activator:
        """An activator for this operator; the worker then never takes it for stuck while it waits."""
        self.externally_driven = True
        return Activator(self)

    def start_soon(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a helper task of this operator, owned by the worker: cancelled and awaited when the
        worker stops; if it fails, the computation fails with its error, naming this operator."""
        what = f"{name} of {self.describe()}" if name else f"a helper task of {self.describe()}"

        def error(exc: Exception) -> BaseException:
            return self.located(f"{what} failed: {type(exc).__name__}: {exc}")

        return self.worker.start_soon(coro, name=what, error=error)

    def start(self) -> None:
        """The dataflow is built: listen to the input mailboxes, and run once."""
        activate = self._activate = self.worker.activator(self.path)
        for port in self.inputs:
            port.listen(activate)
        if self.bounded and not (self.progress is not None and self.progress.transparent):
            # (a fused operator never pushes on its own: its producer looks through it, once per chain)
            self._outlets = [e for out in self.outputs for e in endpoints(out.pushers)]
        activate()

    @property
    def snapshotter(self) -> SnapshotterRole | None:
        """The snapshots of the operator's dataflow on this worker, when it is recoverable."""
        return self.scope.dataflow.snapshotter

    @property
    def awaiting(self) -> bool:
        """Whether the logic awaits something outside the dataflow now (a connection, a timer, a task)."""
        return self._waiting is not None

    def wait_for_room(self) -> bool:
        """If a mailbox this operator feeds is full, arrange to be activated once it has room, and return True:
        the operator should stop sending for now (its producers' back-pressure; see
        :mod:`aiotimely.comm.backpressure`)."""
        for outlet in self._outlets:
            if outlet.full():
                outlet.wait(self._activate)
                return True
        return False

    def buffered(self, port: OutputPort) -> None:
        """A session buffered records on ``port``: they are sent when the logic next yields, or returns."""
        self._dirty_ports.append(port)

    # -- capabilities -------------------------------------------------------------------

    def adjust_held(self, output: int, time: Any, diff: int) -> None:
        """For raw operators (``build_raw``), which hold counts instead of capability objects: hold ``diff``
        more (or fewer) capabilities at ``time`` on ``output``."""
        self.books.hold(output, time, diff)

    def collected(self, output: int, time: Any) -> None:
        """A capability at ``time`` on ``output`` was garbage-collected while held: it is dropped (timely's
        drop on ``Drop``), and the operator runs, to see what that lets go."""
        if not self.done:
            self.books.hold(output, time, -1)
            self.worker.activate(self.path)

    def reaches(self, input: int, output: int, from_time: Any, to_time: Any) -> bool:
        """True if some path from ``input`` to ``output`` takes ``from_time`` to ``to_time`` or earlier."""
        connectivity = self.scope.connectivity(self.index, input)
        ttype = self.ttype
        for summary in connectivity.get(output, ()):
            t = ttype.results_in(summary, from_time)
            if t is not None and ttype.less_equal(t, to_time):
                return True
        return False

    def passes_unchanged(self, input: int, output: int) -> bool:
        """True if ``input`` reaches ``output`` with exactly the identity summary."""
        chain = self.scope.connectivity(self.index, input).get(output)
        return chain is not None and list(chain) == [self.ttype.identity]

    # -- running ----------------------------------------------------------------------

    def inputs_complete(self) -> bool:
        """True when every input's frontier is empty and nothing waits to be drained."""
        for port in self.inputs:
            if not port.is_complete():
                return False
        return True

    def news(self) -> int:
        """A count that grows whenever a batch arrives or an input frontier changes: if it differs from the
        count at the logic's last look, something arrived that the logic has not seen."""
        count = -self.seen_in_refresh
        for port in self.inputs:
            count += port.taken + port.pending() + port.changes
        return count

    def _accept_frontiers(self) -> int:
        """Take the input frontier changes progress tracking pushed; return how many inputs' frontiers changed."""
        pushed = 0
        inputs = self.inputs
        for port, diffs in self.books.frontier_changes():
            inputs[port].frontier_changed(diffs)
            pushed += 1
        if pushed:
            log = self.worker.logging
            if log is not None:
                log.log(PushProgressEvent(self.path))
        return pushed

    def refresh_frontiers(self) -> bool:
        """From inside an activation: report what the activation did so far, as if the operator yielded here,
        and take the input frontiers that results in (with its scope's latest progress), without waiting for
        the next activation. The caller makes sure the operator holds a capability for everything it took
        and has not sent (a frontier may pass anything else). Received times (``CapabilityRef``) handed out
        before are no longer valid. False if the frontiers cannot have moved."""
        if self._dirty_ports:  # what sessions buffered is sent first, as at a yield
            ports, self._dirty_ports = self._dirty_ports, []
            for port in ports:
                port.release()
        if not self.scope.refresh(self.index):
            return False
        self.epoch += 1
        # (each input whose frontier changed counts one in news(): the caller looks at them now, so they are
        # no news for the logic)
        self.seen_in_refresh += self._accept_frontiers()
        return True

    def schedule(self) -> bool:
        """Run one activation; return whether the operator is still incomplete."""
        if self.done:
            self._discard_input()
            self._make_room()
            return False
        if self._waiting is not None or (self._outlets and self.activations and self.wait_for_room()):
            return True  # (never the first activation: the logic declares its kept state there, before any await)
        start = _clock()
        self.activations += 1
        self._accept_frontiers()
        self.epoch += 1
        self.running = _get_ident()
        try:
            if self._coro is not None:
                self._resume(self._coro)
            elif self._function is not None:
                self._function()
                if not self.books.holds_any() and self.inputs_complete():
                    self.done = True
                    self.recovery.finish()
            if self._dirty_ports:  # send what sessions buffered: encoding and routing errors are ours too
                ports, self._dirty_ports = self._dirty_ports, []
                for port in ports:
                    port.release()
            if not self.inputs and not self.books.holds_any():
                self.recovery.finish()  # a source that holds nothing more: its position is final
        except AiotimelyError as exc:
            if isinstance(exc, (DataflowError, CapabilityError)) and exc.operator is not None:
                raise  # already located (by the operator that raised it)
            if isinstance(exc, RecoveryError):
                raise  # what is stored cannot be resumed from: said as it is, naming the operator
            raise self.failure(exc) from exc
        except Exception as exc:
            raise self.failure(exc) from exc
        finally:
            self.running = 0
            self.busy += _clock() - start
        log = self.worker.logging
        if log is not None and self.inputs:
            self._log_received(log)
        self._make_room()
        return not self.done

    def _log_received(self, log: Logger[TimelyEvent]) -> None:
        """Log what this activation took from the inputs: the counts its scope collects right after it."""
        worker = self.worker.index
        for channel, consumed in zip(self.channels, self.books.consumed_by_input(), strict=True):
            for time, count in consumed:
                log.log(MessagesEvent(False, channel, None, worker, time, count))

    def _make_room(self) -> None:
        """The operator took from its inputs: wake the producers that wait for room there."""
        for port in self.inputs:
            port.make_room()

    def _resume(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            signal = coro.send(None)
        except StopIteration:
            self._finish()
            return
        except BaseException:
            self._coro = None  # it raised: it is over (there is no cleanup left to run when stopping)
            raise
        if signal is ACTIVATION:
            return
        if signal is None:  # a bare yield, as asyncio.sleep(0) does: run again next round
            self.worker.activate_later(self.path)
            return
        if getattr(signal, "_asyncio_future_blocking", None) is not None:
            signal._asyncio_future_blocking = False
            self._waiting = signal
            signal.add_done_callback(self._future_done)
            return
        raise RuntimeError(f"operator logic awaited {signal!r}, which is not an asyncio awaitable")

    def _future_done(self, future: asyncio.Future[Any]) -> None:
        if self._waiting is future:
            self._waiting = None
            self.worker.activate(self.path)

    def _finish(self) -> None:
        """The logic returned: give up whatever it still holds, and discard later input."""
        self.recovery.finish()
        self.books.release_all()
        self.done = True
        self._coro = None
        self._discard_input()

    def _discard_input(self) -> None:
        for port in self.inputs:
            port.discard()

    def may_be_woken(self) -> bool:
        """True while something outside the dataflow may still wake it: an awaited future or an activator."""
        return not self.done and (self._waiting is not None or self.externally_driven)

    def statistics(self) -> OperatorStatistics:
        """What this operator has done so far (records taken and sent, activations, busy time), what waits at its
        inputs, and their frontiers as the scope's tracker has them now (an input port's own frontier is as of
        the operator's last activation)."""
        inputs = []
        for port in self.inputs:
            channel = self.channels[port.port] if port.port < len(self.channels) else None
            batches, records, nbytes = port.queued()
            inputs.append(InputStatistics(port.port, channel, port.records, port.taken, batches, records,
                                          tuple(self.current_frontier(port.port).elements), nbytes))
        stages = self.chain.stages if self.chain is not None else []
        failures = [stage.failures for stage in stages if stage.failures is not None]
        return OperatorStatistics(self.scope.dataflow.name, ".".join(map(str, self.path)), self.path, self.name,
                                  self.activations, self.busy, tuple(inputs),
                                  tuple(out.records for out in self.outputs), self.done,
                                  tuple(stage.name for stage in stages),
                                  sum(f.skipped for f in failures), sum(f.dead_letters for f in failures))

    def current_frontier(self, port: int) -> Antichain[Any]:
        """Input ``port``'s frontier as the scope's tracker has it now (for a look from outside the operator:
        the port's own frontier is as of the operator's last activation)."""
        progress = self.scope.progress
        if progress is None:
            return self.inputs[port].frontier
        return progress.frontier(Target(self.index, port))

    def blockers(self) -> list[str]:
        """What this operator holds back, in words: capabilities held, input never drained."""
        if self.done:
            return []
        found = []
        held = sorted({t for _, t in self.books.held()}, key=repr)
        if held:
            found.append(f"{self.describe()} still holds capabilities at time(s) {', '.join(map(repr, held))}")
        undrained = [port.port for port in self.inputs if port.pending()]
        if undrained:
            found.append(f"{self.describe()} never drained its input(s) {undrained}")
        return found

    def abandon(self) -> None:
        """The operator will never run (its dataflow's build failed)."""
        coro, self._coro = self._coro, None
        if coro is not None:
            coro.close()
        self.done = True

    async def close(self) -> None:
        """Stop the logic: the computation is shutting down. A coroutine gets ``CancelledError`` where it
        waits, and its cleanup (``finally`` blocks, ``async with`` exits) runs to its end, awaiting what it
        awaits; an error in the cleanup is logged, never raised over the error that stopped the computation."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.remove_done_callback(self._future_done)
            if not waiting.done():
                waiting.cancel()
        coro, self._coro = self._coro, None
        self.done = True
        if coro is None:
            return
        try:
            await _Unwind(coro)
        except asyncio.CancelledError:
            log.warning("%s did not finish its cleanup in time", self.describe())
        except Exception as exc:
            log.warning("%s failed while stopping: %s: %s", self.describe(), type(exc).__name__, exc)

    def blame(self, exc: Exception, what: str, time: Any) -> DataflowError | CapabilityError:
        """An error of this operator's, for ``what`` failing with ``exc`` at ``time`` (even while another
        operator's activation runs it, as an exchange key does)."""
        at = f" at time {time!r}" if time is not None else ""
        error = self.located(f"{self.describe()} failed{at}: {what} raised {type(exc).__name__}: {exc}",
                             time=time)
        error.__cause__ = exc
        return error

    # -- errors ------------------------------------------------------------------------

    def describe(self, stage: str | None = None, label: str | None = None) -> str:
        """Where this operator is, in words: its name and index, its scopes and dataflow by name, its worker
        (or where a ``stage`` of it is, under ``label``: one operator of a fused chain)."""
        return (f"operator {stage or self.name!r} ({label or '#' + str(self.index)}) in {self.scope.describe()} "
                f"on worker {self.worker.index}")

    def located(self, message: str, kind: type[DataflowError] | type[CapabilityError] = DataflowError,
                time: Any = None, stage: str | None = None) -> DataflowError | CapabilityError:
        """An error about this operator (or its ``stage``): ``message``, with where it happened as attributes."""
        return kind(message, dataflow=self.scope.dataflow.name, operator=stage or self.name, path=self.path,
                    worker=self.worker.index, time=time)

    def failure(self, exc: BaseException, stage: str | None = None,
                label: str | None = None) -> DataflowError | CapabilityError:
        """``exc``, raised by the logic (or by a ``stage`` of a fused chain, under ``label``), as the error that
        fails the computation: located at this operator and the time it was at."""
        where = self.describe(stage, label)
        time = self.current_time
        at = f" at time {time!r}" if time is not None else ""
        message = str(exc)
        if isinstance(exc, AiotimelyError) and message.startswith(where):
            message = message[len(where):].lstrip(": ")
        kind = CapabilityError if isinstance(exc, CapabilityError) else DataflowError
        return self.located(f"{where} failed{at}: {type(exc).__name__}: {message}", kind, time, stage)

    def __repr__(self) -> str:
        return f"OperatorRuntime({self.name!r}, path={self.path})"


class _Unwind:
    """Awaiting it cancels a suspended operator coroutine and runs its cleanup to the end: the futures the
    cleanup awaits are awaited by whoever awaits this; cancelling that cancels the cleanup too."""

    def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
        self._coro = coro

    def __await__(self) -> Generator[Any, Any, None]:
        coro = self._coro
        refused = 0
        try:
            signal = coro.throw(asyncio.CancelledError())
            while True:
                if signal is ACTIVATION:  # the logic caught the cancellation and waits for more: none will come
                    refused += 1
                    if refused > 2:
                        coro.close()
                        return
                    signal = coro.throw(asyncio.CancelledError())
                    continue
                try:
                    sent = yield signal
                except BaseException as exc:  # noqa: BLE001 - the closing task's own cancellation, passed on
                    signal = coro.throw(exc)
                else:
                    signal = coro.send(sent)
        except (StopIteration, asyncio.CancelledError):
            return
