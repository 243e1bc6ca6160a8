"""Scopes: where operators are built, and how a built scope runs its children each round.

A :class:`ScopeCore` is first a builder (``region``, ``iterative``, and the
operators that streams create in it), then, once built, the runtime of one
scope on one worker: each round it applies the progress batches that arrived,
propagates frontiers, runs the children that asked to run in index order (a
nested scope runs its own children), and broadcasts what its operators did as one
batch. To the worker, a dataflow is its root scope, seen through the ``Schedule``
protocol (:mod:`aiotimely.worker.schedule`).

It is all the dataflow layer knows of a scope, as :class:`~.stream.StreamCore` is of a stream: the scope users
build in, :class:`aiotimely.Scope` (in the front module ``aiotimely/scope.py``), adds what is made of operators
(``feedback``, ``dead_letters``, ``new_unordered_input``), as timely's operator traits extend its scopes.
"""

from __future__ import annotations

import asyncio
import heapq
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, TypeVar, Union

from typing_extensions import Self

from ..errors import GraphError
from ..worker.logging import OperatesEvent, ScheduleEvent, ShutdownEvent, StartStop, progress_event
from ..worker.schedule import Hold
from ..progress import (
    Antichain,
    Refinement,
    Source,
    Subgraph,
    SubgraphBuilder,
    Target,
    TimestampType,
    timestamp_type,
)
from .channels import ProgressCodec, Tee
from .operator import OperatorRuntime
from .progress_path import Broadcast, ProgressPath, path_of
from .failures import DeadLetterStreams, ErrorPolicy, check_policy
from .roles import SnapshotterRole

if TYPE_CHECKING:
    from ..progress import Operate
    from ..worker import WorkerHandle

__all__ = ["Dataflow", "ScopeCore", "BuildContext"]

R = TypeVar("R")
S = TypeVar("S")
"""The class of a dataflow's streams (a :class:`~aiotimely.dataflow.stream.StreamCore`'s, made by its
``stream_type``: :class:`aiotimely.Stream` when built through a worker)."""
Sc = TypeVar("Sc", bound="ScopeCore[Any]")

Child = Union[OperatorRuntime, "ScopeCore[Any]"]


class Dataflow(Generic[S]):
    """One dataflow built by one worker: its name, its root scope and its channel numbering.

    ``stream_type`` and ``scope_type`` are the classes of its streams and scopes (the front's
    :class:`aiotimely.Stream` and :class:`aiotimely.Scope`, when built through a worker)."""

    def __init__(self, worker: WorkerHandle, index: int, name: str, timestamp: Any,
                 stream_type: Callable[[ScopeCore[S], Source | Callable[[], Source], Tee], S],
                 snapshots: Callable[[ScopeCore[S]], SnapshotterRole] | None = None,
                 errors: ErrorPolicy = "raise", *,
                 scope_type: type[ScopeCore[Any]] | None = None) -> None:
        self.worker = worker
        self.index = index
        self.name = name
        self.errors: ErrorPolicy = check_policy(errors, f"dataflow {name!r}", default=False)  # type: ignore[assignment]
        """The error policy of the operators that take one and are not given one (see :mod:`.failures`)."""
        self.stream_type = stream_type
        self._next_channel = 0
        self.root: ScopeCore[S] = (scope_type or ScopeCore)(worker, self, Refinement.region(timestamp_type(timestamp)),
                                                            name=name)
        self.snapshotter: SnapshotterRole | None = snapshots(self.root) if snapshots is not None else None
        """The dataflow's snapshots on this worker, when it is recoverable (``snapshots`` makes them for the root
        scope, given a state store: a :class:`~aiotimely.dataflow.state.Snapshotter`)."""
        self.remedies: dict[tuple[int, ...], str] = {}
        """What a user does to release the times an operator holds, by the operator's path, where only the user
        can (an :class:`~aiotimely.InputHandle`'s: advance it or close it): said when a wait stalls on it."""

    def allocate_channel(self) -> tuple[int, int]:
        """The next channel id; every worker allocates the same ids in the same order."""
        channel = (self.index, self._next_channel)
        self._next_channel += 1
        return channel

    def __repr__(self) -> str:
        return f"Dataflow({self.name!r}, index={self.index})"


class ScopeCore(Generic[S]):
    """A scope of a dataflow on one worker: the root of a dataflow, a region, or an iterative scope."""

    def __init__(
        self,
        worker: WorkerHandle,
        dataflow: Dataflow[S],
        refinement: Refinement,
        *,
        name: str,
        parent: ScopeCore[S] | None = None,
    ) -> None:
        self.worker = worker
        self.dataflow = dataflow
        self.parent = parent
        self.name = name
        self.refinement = refinement
        self.ttype: TimestampType[Any, Any] = refinement.inner
        self.path: tuple[int, ...]
        if parent is None:
            self.index = 0
            self.path = (dataflow.index,)
        else:
            self.index = parent.reserve_child(self)
            self.path = parent.path + (self.index,)
        log = worker.logging
        if log is not None:
            log.log(OperatesEvent(self.path, name))
        self._builder: SubgraphBuilder | None = SubgraphBuilder(
            refinement, name=name, path=self.path, worker=worker.index, peers=worker.peers)
        self.progress_channel = dataflow.allocate_channel()
        self._broadcast = Broadcast(worker, self.progress_channel)
        """The road this scope's progress takes with other workers or a reader (see :mod:`.progress_path`)."""
        self.children: dict[int, Child] = {}
        self.progress: Subgraph | None = None
        self.dead_letter_streams: DeadLetterStreams[S] = DeadLetterStreams()
        """The dead-letter streams of the scope's operators (see :meth:`dead_letters`)."""
        self._pending: set[int] = set()
        self._incomplete: set[int] = set()
        self._checks: list[Callable[[], None]] = []
        self._built: list[Callable[[], None]] = []
        self._ran_inside: list[int] = []
        self.ran_inside: Callable[[int], None] = self._ran_inside.append
        """Note that child ``index`` ran inside the child running now (called by it, not scheduled: an operator
        fused into its producer): its progress is collected with the running child's."""
        self._running = 0
        """The index of the child running now (0: none)."""
        self._inbox: Any = None
        self._activate: Callable[[], None] = lambda: None

    # -- facts ------------------------------------------------------------------------

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        return self.worker.peers

    def describe(self) -> str:
        """The scope in words: ``dataflow 'name'``, or ``scope 'inner' in dataflow 'name'``."""
        if self.parent is None:
            return f"dataflow {self.dataflow.name!r}"
        return f"scope {self.name!r} in {self.parent.describe()}"

    def check_building(self) -> SubgraphBuilder:
        """The scope's progress builder, or a :class:`GraphError` if the scope is built already (no operator may
        be added to it any more)."""
        if self._builder is None:
            raise GraphError(f"{self.describe()} is already built: operators cannot be added to it any more")
        return self._builder

    # -- building, for operators and channels --------------------------------------------

    def reserve_child(self, child: Child) -> int:
        """Give ``child`` (an operator or a nested scope being built) its index in this scope."""
        index = self.check_building().allocate_index()
        self.children[index] = child
        return index

    def add_progress(self, index: int, progress: Operate) -> None:
        """The child at ``index`` is built: track its progress (its shape, summaries and counts)."""
        self.check_building().add_child(progress, index)

    def add_edge(self, source: Source, target: Target) -> None:
        self.check_building().add_edge(source, target)

    def add_input(self) -> int:
        """A new input of this scope, for a stream entering it; its port."""
        return self.check_building().add_input()

    def add_output(self) -> int:
        """A new output of this scope, for a stream leaving it; its port."""
        return self.check_building().add_output()

    def new_stream(self, source: Source | Callable[[], Source], tee: Tee) -> S:
        """A stream of this scope from ``source`` (or the output ``source()`` picks when the stream is first
        consumed), of the dataflow's stream class."""
        return self.dataflow.stream_type(self, source, tee)

    def connectivity(self, child: int, input: int) -> dict[int, Antichain[Any]]:
        """Per output of ``child``, the summaries of the paths from its ``input`` (once built)."""
        assert self.progress is not None
        return self.progress.graph.connectivity[child][input]

    def count_entered(self, input: int, time: Any, count: int) -> None:
        """``count`` records entered this scope through ``input`` at (inner) ``time``: wake the scope."""
        assert self.progress is not None
        self.progress.entered(input, time, count)
        self._activate()

    # -- nested scopes -------------------------------------------------------------------

    def region(self, fn: Callable[[Self], R] | None = None, *, name: str | None = None) -> Any:
        """A nested scope with the same timestamps: ``scope.region(fn)`` or ``with scope.region() as inner:``."""
        return self._nested(Refinement.region(self.ttype), fn, name or "region")

    def iterative(self, fn: Callable[[Self], R] | None = None, *, name: str | None = None) -> Any:
        """A nested scope whose times are ``Product(outer, round)``; loops in it count rounds."""
        return self._nested(Refinement.iterative(self.ttype), fn, name or "iterative")

    def scoped(self, name: str, refinement: Any, fn: Callable[[Self], R] | None = None) -> Any:
        """A nested scope whose times refine this scope's (timely's ``scoped::<T2, _, _>``): with a timestamp
        type for ``refinement`` (``int``, a ``TimestampType``, a :class:`~aiotimely.progress.Timestamp` class),
        its times are ``Product(outer, inner)``, entering at the inner type's minimum (an iterative scope is
        ``scoped(name, int)``); a :class:`~aiotimely.progress.Refinement` of this scope's times is used as it is.
        ``scope.scoped(name, T, fn)`` or ``with scope.scoped(name, T) as inner:``."""
        if isinstance(refinement, Refinement):
            if refinement.outer != self.ttype:
                raise GraphError(f"{self.describe()}: scoped({name!r}, ...) got a refinement of "
                                 f"{refinement.outer!r} times, but the scope's times are {self.ttype!r}")
            return self._nested(refinement, fn, name)
        try:
            inner = timestamp_type(refinement)
        except TypeError as e:
            raise GraphError(f"{self.describe()}: scoped({name!r}, {refinement!r}): {e}") from None
        return self._nested(Refinement.iterative(self.ttype, inner), fn, name)

    def _nested(self, refinement: Refinement, fn: Callable[[Self], R] | None, name: str) -> Any:
        self.check_building()
        child = type(self)(self.worker, self.dataflow, refinement, name=name, parent=self)
        if fn is None:
            return BuildContext(child, child._finish)
        result = fn(child)
        child._finish()
        return result

    def on_finish(self, check: Callable[[], None]) -> None:
        """Call ``check()`` as the scope is finished, before its progress tracking is built: it raises if what
        was built is incomplete (a feedback loop never connected)."""
        self._checks.append(check)

    def on_built(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the scope is finished: its progress tracking built and its progress channel
        open (a dataflow's snapshots begin then)."""
        self._built.append(callback)

    # -- finishing --------------------------------------------------------------------

    def _finish(self) -> Subgraph:
        """Freeze the scope: build its progress tracking and hand it to the parent."""
        builder = self.check_building()
        self.dead_letter_streams.check_taken(self)
        for check in self._checks:
            check()
        self.progress = progress = builder.build()
        self._builder = None  # built: operators cannot be added any more
        self._incomplete = set(self.children)
        if self.parent is not None:
            self.parent.add_progress(self.index, progress)
        fabric = self.worker.fabric
        fabric.register(self.progress_channel, ProgressCodec(self.ttype, self.path))
        self._inbox = fabric.mailbox(self.progress_channel, self.worker.index)
        for callback in self._built:
            callback()
        return progress

    def start(self) -> None:
        """The dataflow is built: take activations, listen for progress, and start every child."""
        worker = self.worker
        self._pending = worker.activations.children(self.path)
        self._activate = worker.activator(self.path)
        self._inbox.listen(self._activate)
        for child in self.children.values():
            child.start()

    # -- running (the Schedule protocol) -------------------------------------------------

    def schedule(self) -> bool:
        """Run one round of this scope; return whether it is still incomplete.

        A round is at most two passes: the second applies this worker's own progress
        batch at once (every other worker gets it through its mailbox) and runs what
        that woke, such as a probe, instead of waiting for another round.
        """
        sub = self.progress
        assert sub is not None
        self._receive(sub)
        pending = self._pending
        path = path_of(self.worker, self._broadcast)
        for _ in range(2):
            self._run_pass(sub, pending, path)
            # (what only moves fused operators' frontiers may wait for the next propagation: see _run_pass)
            if not path.publish(sub) or path.may_wait(sub):
                break
        if pending or sub.has_pending():
            self._activate()
        return bool(self._incomplete) or sub.tracking_anything()

    def _receive(self, sub: Subgraph) -> None:
        """Apply the progress batches the other workers sent."""
        inbox = self._inbox
        if not inbox.queue:
            return
        log = self.worker.logging
        for batch in inbox.drain():
            if log is not None:
                log.log(progress_event(batch, False, self.progress_channel))
            sub.receive(batch)

    def refresh(self, child: int) -> bool:
        """Bring the input frontiers of ``child``, which is running now, up to date in the same activation.

        What the child reported so far (as if it had yielded here: it must hold a capability for whatever it
        took and has not sent) is collected, with what the children before it in this pass reported, as one
        batch, published, and propagated with what the other workers sent. The frontier changes are in the
        child's shared progress for it to take; the other children they wake are run later in this pass (or
        in the next). False if nothing could have moved (nothing was reported, nothing waits): no propagation.
        """
        if self._running != child:
            return False
        sub = self.progress
        assert sub is not None
        path = path_of(self.worker, self._broadcast)
        self._collect(sub, child, path)
        self._receive(sub)
        if not path.publish(sub) and not sub.has_pending():
            return False
        pending = self._pending
        for other in sub.propagate():
            if other != child:  # (the child takes its frontier changes now; it is not run again for them)
                pending.add(other)
        return True

    def _collect(self, sub: Subgraph, child: int, path: ProgressPath) -> None:
        """Take what ``child`` reported (and the children that ran inside it) into this scope's progress."""
        path.collect(sub, child)
        ran = self._ran_inside
        if ran:
            for stage in dict.fromkeys(ran):
                path.collect(sub, stage)
            ran.clear()

    def _run_pass(self, sub: Subgraph, pending: set[int], path: ProgressPath) -> None:
        """Propagate, then run the children that need it in ascending order (and those they feed).

        When children are about to run anyway and what waits may wait (alone, it can only move the frontiers
        of fused operators, which never look at them: :mod:`.progress_path`), the propagation waits for one the
        children ask for (``refresh``) or the next pass: a round of a busy dataflow then propagates once, not
        twice. With nothing else to run it propagates, so nothing waits for long (``schedule`` activates the
        scope again while anything waits).
        """
        worker = self.worker
        if pending and path.may_wait(sub):
            active = sub.take_activations()
        else:
            active = sub.propagate()
        if pending:
            pending.update(active)
            heap = sorted(pending)
            pending.clear()
        else:
            heap = active
        children = self.children
        incomplete = self._incomplete
        log = worker.logging
        later: set[int] = set()
        last = 0
        while heap:
            c = heapq.heappop(heap)
            if c <= last:
                continue
            last = c
            worker.operators_run += 1
            if log is not None:
                log.log(ScheduleEvent(children[c].path, StartStop.START))
            self._running = c
            try:
                still = children[c].schedule()
            finally:
                self._running = 0
            if still:
                incomplete.add(c)
            else:
                if log is not None and c in incomplete:
                    log.log(ShutdownEvent(children[c].path))
                incomplete.discard(c)
            if log is not None:
                log.log(ScheduleEvent(children[c].path, StartStop.STOP))
            self._collect(sub, c, path)
            if pending:
                for other in pending:
                    if other > c:
                        heapq.heappush(heap, other)
                    else:
                        later.add(other)
                pending.clear()
        if later:
            pending.update(later)

    def operators(self) -> Iterator[OperatorRuntime]:
        """Every operator in this scope and the scopes nested in it."""
        for child in self.children.values():
            if isinstance(child, ScopeCore):
                yield from child.operators()
            else:
                yield child

    def may_be_woken(self) -> bool:
        """True while something outside may still wake an operator: an awaited future, an activator."""
        return any(op.may_be_woken() for op in self.operators())

    def blockers(self) -> list[str]:
        """What keeps this dataflow from completing, in words."""
        found = [line for op in self.operators() for line in op.blockers()]
        if not found:
            waiting = [op.name for op in self.operators() if not op.done]
            found.append(f"dataflow {self.dataflow.name!r} on worker {self.worker.index} is incomplete "
                         f"(unfinished operators: {waiting})")
        return found

    def holds(self) -> list[Hold]:
        """Every time an operator of this scope (nested scopes too) holds back on this worker, with what
        releases it: for a stall report, which runs when a waited-on worker does nothing for a while."""
        remedies = self.dataflow.remedies
        index = self.dataflow.index
        found: list[Hold] = []
        for op in self.operators():
            if op.done:
                continue
            held = {t for _, t in op.books.held()}
            queued = {t for port in op.inputs for t in port.queued_times()} - held
            if not held and not queued:
                continue
            remedy = remedies.get(op.path)
            on_io = remedy is None and (op.awaiting or op.externally_driven)
            if remedy is not None:
                why = remedy
            elif op.awaiting:
                why = ("it holds a capability there while its logic awaits something outside the dataflow (a "
                       "connection, a timer, a task): the time passes once that completes and the logic lets the "
                       "capability go")
            elif op.externally_driven:
                why = ("it holds a capability there and waits to be activated from outside (its Activator): the "
                       "time passes once whatever drives it lets the capability go")
            else:
                why = ("it holds a capability there: its logic must drop or downgrade it once the time is done "
                       "(a capability kept after its time holds every later time back)")
            where = op.describe()
            less_equal = op.ttype.less_equal
            scope = op.scope.path
            found.extend(Hold(index, scope, t, less_equal, where, why, on_io) for t in held)
            found.extend(Hold(index, scope, t, less_equal, where, "records at that time wait at its input, not "
                              "taken yet (its logic is not reading its input: it awaits something else, or waits "
                              "for room downstream)", on_io) for t in queued)
        return found

    def abandon(self) -> None:
        """The dataflow will never run (its build failed): close the logic of every operator unstarted."""
        for op in self.operators():
            op.abandon()

    async def close(self) -> None:
        """Stop every operator's logic (the computation is shutting down), each running its cleanup."""
        await asyncio.gather(*(op.close() for op in self.operators()))

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, path={self.path})"


class BuildContext(Generic[Sc]):
    """The ``with``/``async with`` form of building a scope: the block fills it, ``build()`` runs on exit."""

    def __init__(self, scope: Sc, build: Callable[[], Any]) -> None:
        self.scope = scope
        self._build = build

    def __enter__(self) -> Sc:
        return self.scope

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._build()

    async def __aenter__(self) -> Sc:
        return self.scope

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)
