"""Scopes: where operators are built, and how a built scope runs its children each round.

A :class:`Scope` is first a builder (``region``, ``iterative``, ``feedback``, and
the operators that streams create in it), then, once built, the runtime of one
scope on one worker: each round it applies the progress batches that arrived,
propagates frontiers, runs the children that need it in index order (a nested
scope runs its own children), and broadcasts what its operators did as one batch.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..errors import GraphError
from ..progress import Product, ProductType, Refinement, SubgraphBuilder
from ..progress.subgraph import Subgraph

if TYPE_CHECKING:
    from ..worker.worker import Dataflow, Worker
    from .operator import OperatorRuntime
    from .stream import Stream

__all__ = ["Scope", "LoopHandle"]

R = TypeVar("R")


class Scope:
    """A scope of a dataflow on one worker: the root of a dataflow, a region, or an iterative scope."""

    def __init__(
        self,
        worker: Worker,
        dataflow: Dataflow,
        refinement: Refinement,
        *,
        name: str,
        parent: Scope | None = None,
    ) -> None:
        self.worker = worker
        self.dataflow = dataflow
        self.parent = parent
        self.name = name
        self.refinement = refinement
        self.ttype = refinement.inner
        if parent is None:
            self.index = 0
            self.path: tuple[int, ...] = (dataflow.index,)
        else:
            self.index = parent._builder.allocate_index()
            self.path = parent.path + (self.index,)
            parent.children[self.index] = self
        self._builder = SubgraphBuilder(refinement, name=name, path=self.path, worker=worker.index,
                                        peers=worker.peers)
        self.progress_channel = dataflow.allocate_channel()
        self.children: dict[int, Any] = {}
        self.progress: Subgraph | None = None
        self.pending: set[int] = set()
        self._incomplete: set[int] = set()
        self._enters: list = []
        self._loops: list[LoopHandle] = []
        self._inbox = None

    # -- facts ------------------------------------------------------------------------

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        return self.worker.peers

    def _check_building(self) -> None:
        if self._builder is None:
            raise GraphError(f"scope {self.name!r} is already built: operators cannot be added to it any more")

    # -- nested scopes -------------------------------------------------------------------

    def region(self, fn: Callable[[Scope], R] | None = None, *, name: str | None = None) -> Any:
        """A nested scope with the same timestamps: ``scope.region(fn)`` or ``with scope.region() as inner:``."""
        return self._nested(Refinement.region(self.ttype), fn, name or "region")

    def iterative(self, fn: Callable[[Scope], R] | None = None, *, name: str | None = None) -> Any:
        """A nested scope whose times are ``Product(outer, round)``; loops in it count rounds."""
        return self._nested(Refinement.iterative(self.ttype), fn, name or "iterative")

    def _nested(self, refinement: Refinement, fn: Callable[[Scope], R] | None, name: str) -> Any:
        self._check_building()
        child = Scope(self.worker, self.dataflow, refinement, name=name, parent=self)
        if fn is None:
            return BuildContext(child, child._finish)
        result = fn(child)
        child._finish()
        return result

    # -- loops ------------------------------------------------------------------------

    def feedback(self, summary: Any = 1) -> tuple[LoopHandle, Stream]:
        """A loop variable: records given to ``handle`` come back on ``stream``, advanced by ``summary``.

        In an iterative scope an ``int`` summary counts rounds: ``feedback(1)`` means
        "the next round". Connect the loop's end with ``stream.connect_loop(handle)``.
        """
        from .operators.loops import feedback

        if isinstance(self.ttype, ProductType) and type(summary) is int:
            summary = Product(self.ttype.outer.identity, summary)
        return feedback(self, summary)

    # -- finishing --------------------------------------------------------------------

    def _finish(self) -> Subgraph:
        """Freeze the scope: build its progress tracking and hand it to the parent."""
        self._check_building()
        for loop in self._loops:
            if not loop.connected:
                raise GraphError(
                    f"scope {self.name!r}: a feedback loop was created but never closed with connect_loop()"
                )
        self.progress = self._builder.build()
        self._builder = None  # type: ignore[assignment]  # built: operators cannot be added any more
        self._incomplete = set(self.children)
        if self.parent is not None:
            self.parent._builder.add_child(self.progress, self.index)
        fabric = self.worker.fabric
        fabric.register(self.progress_channel, self.ttype)
        self._inbox = fabric.mailbox(self.progress_channel, self.worker.index)
        return self.progress

    def _start(self) -> None:
        """The dataflow is built: listen for progress, and run every operator once."""
        self._inbox.listen(self._on_progress)
        for child in self.children.values():
            child._start()

    def _on_progress(self) -> None:
        self.worker.activate(self.path)

    def progress_connectivity(self, op: OperatorRuntime, input: int) -> dict:
        return self.progress.graph.connectivity[op.index][input]

    # -- running --------------------------------------------------------------------

    def schedule(self) -> bool:
        """Run one round of this scope; return whether it is still incomplete.

        A round is at most two passes: the second applies this worker's own progress
        batch at once (every other worker gets it through its mailbox) and runs what
        that woke, such as a probe, instead of waiting for another round.
        """
        sub = self.progress
        inbox = self._inbox.queue
        while inbox:
            sub.receive(inbox.popleft())
        pending = self.pending
        for _ in range(2):
            self._run_pass(sub, pending)
            batch = sub.send()
            if batch is None:
                break
            self.worker.fabric.broadcast(self.progress_channel, batch, skip=self.worker.index)
            sub.receive(batch)
        if pending or sub.has_pending():
            self.worker.activate(self.path)
        return bool(self._incomplete) or sub.tracking_anything()

    def _run_pass(self, sub: Subgraph, pending: set[int]) -> None:
        """Propagate, then run the children that need it in ascending order (and those they feed)."""
        active = sub.propagate()
        if pending:
            pending.update(active)
            heap = sorted(pending)
            pending.clear()
        else:
            heap = active
        children = self.children
        incomplete = self._incomplete
        later: set[int] = set()
        last = 0
        while heap:
            c = heapq.heappop(heap)
            if c <= last:
                continue
            last = c
            self.worker._operators_run += 1
            if children[c].schedule():
                incomplete.add(c)
            else:
                incomplete.discard(c)
            sub.extract(c)
            if pending:
                for other in pending:
                    if other > c:
                        heapq.heappush(heap, other)
                    else:
                        later.add(other)
                pending.clear()
        if later:
            pending.update(later)

    def operators(self):
        """Every operator in this scope and the scopes nested in it."""
        for child in self.children.values():
            if isinstance(child, Scope):
                yield from child.operators()
            else:
                yield child

    def close(self) -> None:
        for op in self.operators():
            op.close()

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, path={self.path})"


class LoopHandle:
    """The far end of a feedback loop, to be closed with ``stream.connect_loop(handle)``."""

    def __init__(self, op: OperatorRuntime) -> None:
        self.op = op
        self.connected = False
        op.scope._loops.append(self)


class BuildContext:
    """The ``with``/``async with`` form of building a scope: the block fills it, ``build()`` runs on exit."""

    def __init__(self, scope: Scope, build: Callable[[], Any]) -> None:
        self.scope = scope
        self._build = build

    def __enter__(self) -> Scope:
        return self.scope

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._build()

    async def __aenter__(self) -> Scope:
        return self.scope

    async def __aexit__(self, exc_type, exc, tb) -> None:
        self.__exit__(exc_type, exc, tb)
