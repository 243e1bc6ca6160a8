"""Build aiotimely subgraph trees from specs, and drive their progress rounds to a fixed point.

This plays the worker runtime's part without operators: tests write reports into
operators' ``SharedProgress`` and call :func:`settle`.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Collection

from aiotimely.progress import (
    FrontierInterest,
    OperatorProgress,
    ProgressBatch,
    Refinement,
    Subgraph,
    SubgraphBuilder,
)

from .graphs import OpSpec, ScopeSpec


def build_tree(
    spec: ScopeSpec,
    *,
    worker: int = 0,
    peers: int = 1,
    path: tuple[int, ...] = (0,),
    refinement: Refinement | None = None,
    interest: FrontierInterest = FrontierInterest.ALWAYS,
    connectivity_of: Callable[[OpSpec], list] | None = None,
    transparent: Collection[tuple[tuple[int, ...], int]] = (),
) -> tuple[Subgraph, dict[tuple[tuple[int, ...], int], OperatorProgress]]:
    """Build ``spec`` into a :class:`Subgraph` tree; also return its operators by ``(path, index)``. The
    operators named in ``transparent`` (by ``(path, index)``) are built as transparent (fused)."""
    ops: dict[tuple[tuple[int, ...], int], OperatorProgress] = {}
    sub = _build(spec, worker, peers, path, refinement or Refinement.region(spec.ttype), interest,
                 connectivity_of, ops, transparent)
    return sub, ops


def _build(spec, worker, peers, path, refinement, interest, connectivity_of, ops, transparent) -> Subgraph:
    builder = SubgraphBuilder(refinement, inputs=spec.inputs, outputs=spec.outputs, name=spec.name,
                              path=path, worker=worker, peers=peers)
    for c, child in enumerate(spec.children, 1):
        if isinstance(child, ScopeSpec):
            nested = _build(child, worker, peers, path + (c,), child.refinement(spec.ttype), interest,
                            connectivity_of, ops, transparent)
            builder.add_child(nested)
        else:
            connectivity = connectivity_of(child) if connectivity_of else child.connectivity
            op = OperatorProgress(child.name, child.inputs, child.outputs, connectivity=connectivity,
                                  interest=interest)
            op.transparent = (path, c) in transparent
            ops[(path, c)] = op
            builder.add_child(op)
    for source, target in spec.edges:
        builder.add_edge(source, target)
    return builder.build()


def scopes(sub: Subgraph):
    """Yield every subgraph of the tree, outermost first."""
    yield sub
    for child in sub.children[1:]:
        if isinstance(child, Subgraph):
            yield from scopes(child)


def run_round(sub: Subgraph, send: Callable[[ProgressBatch], None], *, everything: bool = True,
              direct: bool = False) -> None:
    """One scheduling round of ``sub``: propagate, run (nested scopes recursively), extract, send.

    With ``everything`` every child is visited; otherwise only those progress asked for. With ``direct``
    (one worker) reports go straight into the trackers (``collect(c, direct=True)``) and nothing is sent:
    what the runtime does when nobody watches progress batches.
    """
    active = sub.propagate()
    visit = range(1, len(sub.children)) if everything else active
    for c in visit:
        child = sub.children[c]
        if isinstance(child, Subgraph):
            run_round(child, send, everything=everything, direct=direct)
        if direct:
            sub.collect(c, direct=True)
        else:
            sub.extract(c)
    if direct:
        sub.loop_back()  # (what direct collection cannot take: records that entered the scope)
        return
    batch = sub.send()
    if batch is not None:
        send(batch)


def quiet(sub: Subgraph) -> bool:
    """True if nothing in the tree waits to be propagated, extracted or sent."""
    for scope in scopes(sub):
        if scope.has_pending() or scope.has_unsent():
            return False
        if any(child.shared.has_reports() for child in scope.children[1:]):
            return False
    return True


def settle(sub: Subgraph, send: Callable[[ProgressBatch], None], *, limit: int = 1000,
           direct: bool = False) -> int:
    """Run rounds until the tree is quiet; return how many it took."""
    for rounds in range(1, limit + 1):
        run_round(sub, send, direct=direct)
        if quiet(sub):
            return rounds
    raise AssertionError(f"progress did not settle within {limit} rounds")


def settle_alone(sub: Subgraph, *, direct: bool = False) -> int:
    """Settle a single worker's tree, delivering its batches to itself (or, ``direct``, making none)."""
    by_path = {scope.path: scope for scope in scopes(sub)}
    return settle(sub, lambda batch: by_path[batch.path].receive(batch), direct=direct)


class Cluster:
    """Several workers' trees for one dataflow, with FIFO progress channels between every pair.

    Nothing moves by itself: :meth:`run` runs one worker's round (its batches are
    queued for every worker, itself included), :meth:`deliver` hands the oldest
    queued batch from one worker to another.
    """

    def __init__(self, roots: list[Subgraph]) -> None:
        self.roots = roots
        self.peers = len(roots)
        self.scopes = [{scope.path: scope for scope in scopes(root)} for root in roots]
        self.queues: dict[tuple[int, int], deque] = {
            (s, r): deque() for s in range(self.peers) for r in range(self.peers)
        }

    def sender(self, w: int) -> Callable[[ProgressBatch], None]:
        def send(batch: ProgressBatch) -> None:
            for r in range(self.peers):
                self.queues[(w, r)].append(batch)
        return send

    def run(self, w: int) -> None:
        settle(self.roots[w], self.sender(w))

    def deliver(self, sender: int, receiver: int) -> ProgressBatch:
        batch = self.queues[(sender, receiver)].popleft()
        self.scopes[receiver][batch.path].receive(batch)
        return batch

    def settle(self, limit: int = 10_000) -> None:
        """Run and deliver until no batch is queued and every worker is quiet."""
        for _ in range(limit):
            for w in range(self.peers):
                self.run(w)
            pending = [key for key, queue in self.queues.items() if queue]
            if not pending:
                return
            for s, r in pending:
                while self.queues[(s, r)]:
                    self.deliver(s, r)
        raise AssertionError("the cluster did not settle")
