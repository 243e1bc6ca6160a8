"""Subgraphs: a nested scope's progress tracking, presented to its parent as one operator.

A :class:`Subgraph` owns its scope's :class:`~aiotimely.progress.reachability.Tracker`
and its children's :class:`~aiotimely.progress.operate.SharedProgress`. Towards its
parent it is an operator like any other (:class:`~aiotimely.progress.operate.Operate`):
its connectivity is its inner input-to-output summaries seen from outside, its
"capabilities" are the frontier of inner capabilities that could reach each
output, in outer times.

It is sans-IO: the worker runtime runs children and moves batches between
workers; the subgraph only turns reports into batches and batches into frontiers.
One round, driven by the runtime, is::

    active = sub.propagate()        # frontier changes -> children; returns children to run
    for child in active (ascending, plus what extract returns):
        run child; active += sub.extract(child)
    batch = sub.send()              # this worker's changes, to every worker (itself too)
    ...                             # later, on every worker: sub.receive(batch)

With one worker there is nobody to send to: ``sub.collect(child, direct=True)`` puts a
child's reports straight into the tracker, and ``sub.loop_back()`` stands for the batch.

Entering a scope (``Refinement.to_inner``) adds an inner coordinate for an
iterative scope and changes nothing for a region; leaving (``to_outer``) removes
it. A parent's frontier changes reach the subgraph's inner tracker only when the
subgraph itself is run, which the parent does only if the subgraph's frontier
interest asks for it, so a dormant region's children are never visited.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import GraphError, ProgressError
from .batch import Progcaster, ProgressBatch
from .frontier import Antichain, ChangeBatch, MutableAntichain
from .location import Source, Target
from .operate import FrontierInterest, Operate, SharedProgress
from .reachability import Connectivity, Graph, GraphBuilder, Tracker
from .timestamp import Refinement

__all__ = ["SubgraphBuilder", "Subgraph"]

_Reporter = tuple[ChangeBatch[Any], int, list[int], list[int]]
_ALWAYS = FrontierInterest.ALWAYS
_IF_CAPABILITY = FrontierInterest.IF_CAPABILITY


class SubgraphBuilder:
    """Collects a scope's children and edges; :meth:`build` creates the :class:`Subgraph`.

    ``peers`` is the number of workers: every ordinary child starts with that many
    capabilities at the minimum time on each output, one per worker's instance of
    it, so that no worker can see the time released before every worker has
    released it.
    """

    def __init__(
        self,
        refinement: Refinement,
        *,
        inputs: int = 0,
        outputs: int = 0,
        name: str = "scope",
        path: tuple[int, ...] = (0,),
        worker: int = 0,
        peers: int = 1,
    ) -> None:
        if not 0 <= worker < peers:
            raise ValueError(f"worker index {worker} is not in 0..{peers - 1}")
        self.refinement = refinement
        self.name = name
        self.path = path
        self.worker = worker
        self.peers = peers
        self.inputs = inputs
        self.outputs = outputs
        self._children: dict[int, Operate] = {}
        self._edges: list[tuple[Source, Target]] = []
        self._next_index = 1

    def allocate_index(self) -> int:
        """Reserve the next child index, for a child added later (a nested scope still being built)."""
        index = self._next_index
        self._next_index += 1
        return index

    def add_child(self, child: Operate, index: int | None = None) -> int:
        """Add a child (an operator's progress, or a built nested :class:`Subgraph`); returns its index."""
        if index is None:
            index = self.allocate_index()
        elif not 0 < index < self._next_index or index in self._children:
            raise GraphError(f"scope {self.name!r}: child index {index} was not reserved or is taken")
        self._children[index] = child
        return index

    def add_input(self) -> int:
        """Add a scope input; returns its port (``Source(0, port)`` inside)."""
        self.inputs += 1
        return self.inputs - 1

    def add_output(self) -> int:
        """Add a scope output; returns its port (``Target(0, port)`` inside)."""
        self.outputs += 1
        return self.outputs - 1

    def add_edge(self, source: Source, target: Target) -> None:
        self._edges.append((source, target))

    def build(self) -> Subgraph:
        graph = GraphBuilder(self.refinement.inner, inputs=self.inputs, outputs=self.outputs, name=self.name)
        missing = [i for i in range(1, self._next_index) if i not in self._children]
        if missing:
            raise GraphError(f"scope {self.name!r}: children {missing} were reserved but never added")
        children = [self._children[i] for i in range(1, self._next_index)]
        for index, child in enumerate(children, 1):
            graph.add_node(index, child.inputs, child.outputs, child.connectivity, name=child.name,
                           transparent=child.transparent)
        for source, target in self._edges:
            graph.add_edge(source, target)
        return Subgraph(graph.build(), children, self.refinement,
                        path=self.path, worker=self.worker, peers=self.peers)


class Subgraph:
    """One worker's progress state for one scope; an :class:`Operate` for its parent scope."""

    local = False
    transparent = False

    def __init__(
        self,
        graph: Graph,
        children: Sequence[Operate],
        refinement: Refinement,
        *,
        path: tuple[int, ...] = (0,),
        worker: int = 0,
        peers: int = 1,
    ) -> None:
        if len(children) + 1 != len(graph.shape):
            raise GraphError(f"scope {graph.name!r}: {len(children)} children for {len(graph.shape) - 1} nodes")
        self.name = graph.name
        self.graph = graph
        self.tracker = Tracker(graph)
        self.refinement = refinement
        self.path = path
        self.peers = peers
        self.children: list[Operate | None] = [None, *children]
        self.inputs = graph.scope_inputs
        self.outputs = graph.scope_outputs

        outer = refinement.outer
        summarize = refinement.summarize
        self.connectivity: Connectivity = [
            {o: Antichain([summarize(s) for s in chain], less_equal=outer.summary_less_equal)
             for o, chain in per_output.items()}
            for per_output in graph.scope_summary
        ]
        interest = max((i for child in children for i in child.interest), default=FrontierInterest.NEVER)
        if self.outputs:
            interest = max(interest, _IF_CAPABILITY)
        self.interest = [interest] * self.inputs
        self.shared = SharedProgress(self.inputs, self.outputs)

        self._progcaster = Progcaster(path, worker, peers)
        self._local: ChangeBatch[tuple[int, Any]] = ChangeBatch()
        self._final: ChangeBatch[tuple[int, Any]] = ChangeBatch()
        self._entered: list[ChangeBatch[Any]] = [ChangeBatch() for _ in range(self.inputs)]
        self._output_capabilities = [
            MutableAntichain(less_equal=outer.less_equal, totally_ordered=outer.totally_ordered)
            for _ in range(self.outputs)
        ]
        self._activate: set[int] = set()
        self._watched = self._watched_locations(graph, children)
        self.on_pointstamps: Callable[[], None] | None = None
        """Called after pointstamps changed (a capability or a record in flight, anywhere in the scope)."""
        loc_id = graph.loc_id
        self._port_of = [loc.port for loc in graph.locations]
        self._edge_ids = [
            [[loc_id[t] for t in graph.edges.get(Source(c, o), ())] for o in range(shape[1])]
            for c, shape in enumerate(graph.shape)
        ]
        # Per child, where each of its reports counts, for direct collection: a change batch, the sign its
        # counts take, the locations they count at, and the scope outputs (ports) that records leave by.
        self._reporters: list[list[_Reporter]] = [[]]
        for c, child in enumerate(children, 1):
            shared = child.shared
            reporters: list[_Reporter] = []
            for tid, batch in zip(graph.target_ids[c], shared.consumeds, strict=True):
                reporters.append((batch, -1, [tid], []))
            for sid, batch in zip(graph.source_ids[c], shared.internals, strict=True):
                reporters.append((batch, 1, [sid], []))
            for targets, batch in zip(self._edge_ids[c], shared.produceds, strict=True):
                reporters.append((batch, 1, [tid for tid in targets if graph.node_of[tid]],
                                  [self._port_of[tid] for tid in targets if not graph.node_of[tid]]))
            self._reporters.append(reporters)

        # Initial capabilities: `peers` per output of each ordinary child, common
        # knowledge, so applied here rather than exchanged.
        minimum = refinement.inner.minimum
        for c, child in enumerate(children, 1):
            if child.local:
                for sid in graph.source_ids[c]:
                    self._final.update((sid, minimum), peers)
            self._activate.update(self._extract_into(c, self._local if child.local else self._final))
        self._propagate_pointstamps()

    # -- inputs from the runtime ------------------------------------------------

    def entered(self, input: int, time: Any, count: int) -> None:
        """Count ``count`` records that entered through scope input ``input`` at inner ``time``."""
        self._entered[input].update(time, count)

    def receive(self, batch: ProgressBatch) -> None:
        """Accept a progress batch of this scope from any worker, this one included, in per-sender order."""
        if batch.path != self.path:
            raise ProgressError(f"progress batch for scope {batch.path} delivered to scope {self.path}")
        loc_id = self.graph.loc_id
        final = self._final
        for loc, time, diff in self._progcaster.receive(batch):
            try:
                final.update((loc_id[loc], time), diff)
            except KeyError:
                raise ProgressError(
                    f"progress batch #{batch.seq} from worker {batch.sender} names {loc!r}, "
                    f"which scope {self.name!r} does not have"
                ) from None

    # -- one round --------------------------------------------------------------

    def propagate(self) -> list[int]:
        """Apply everything received and reported; return the children to run, ascending.

        Children are returned when data arrived for them, or when an input frontier
        changed and their frontier interest asks to be woken, or when they have
        nothing left (no capabilities, empty input frontiers) and may shut down.
        """
        if self.inputs:
            self._accept_frontier()
            self._harvest_inputs()
        if self._final.diffs or self.tracker._pending:  # (otherwise nothing can move; has_pending, inline)
            self._propagate_pointstamps()
        return self.take_activations()

    def extract(self, child: int) -> list[int]:
        """Collect what ``child`` reported while it ran; return the children its output reached."""
        return self._extract_into(child, self._local if self.children[child].local else self._final)  # type: ignore[union-attr]  # children[0] is None; child >= 1

    def collect(self, child: int, *, direct: bool = False) -> None:
        """:meth:`extract`, without finding the consumers (a runtime whose pushes wake them does not need them).

        ``direct=True``, with one worker, when nobody reads this worker's progress batches: the reports go
        straight into the tracker's pending counts, where :meth:`loop_back` would have put them, without the
        batch.
        """
        if not direct:
            self.extract(child)
            return
        if self.peers != 1:
            raise ProgressError(f"scope {self.name!r}: direct reports are for one worker, there are {self.peers}")
        pending = self.tracker._pending
        for batch, sign, locations, leaving in self._reporters[child]:
            if batch.diffs:
                diffs = batch.take()
                for t, n in diffs.items():
                    n *= sign
                    for loc in locations:  # (Tracker.update_at, inline: once per count and location)
                        at = pending.get(loc)
                        if at is None:
                            pending[loc] = {t: n}
                            continue
                        total = at.get(t, 0) + n
                        if total:
                            at[t] = total
                        else:
                            del at[t]
                            if not at:
                                del pending[loc]
                if leaving:
                    to_outer = self.refinement.to_outer
                    for port in leaving:  # records that left the scope: produced, as far as the parent knows
                        self.shared.produceds[port].extend((to_outer(t), n) for t, n in diffs.items())

    def send(self) -> ProgressBatch | None:
        """This worker's changes since the last batch, as one batch for every worker; ``None`` if none."""
        if not self._local:
            return None
        locations = self.graph.locations
        changes = [(locations[loc], t, d) for (loc, t), d in self._local.drain()]
        return self._progcaster.send(changes)

    def loop_back(self) -> bool:
        """With one worker (``peers == 1``): what ``receive(send())`` does, without making the batch: this
        worker's changes since the last batch are applied as received. ``False`` if there were none."""
        local = self._local
        if not local:
            return False
        if self.peers != 1:
            raise ProgressError(f"scope {self.name!r}: loop_back() is for one worker, there are {self.peers}")
        local.drain_into(self._final)
        self._progcaster.loop_back()
        return True

    def take_activations(self) -> list[int]:
        """The children that progress asked to run since the last call, ascending."""
        if not self._activate:
            return []
        active = sorted(self._activate)
        self._activate.clear()
        return active

    # -- state --------------------------------------------------------------------

    def frontier(self, target: Target) -> Antichain[Any]:
        """The current frontier at ``target`` (an input of a child, or ``Target(0, o)`` for output ``o``)."""
        return self.tracker.frontier(target)

    def has_pending(self) -> bool:
        """True if received, harvested or directly collected information waits for :meth:`propagate`."""
        return (bool(self._final.diffs) or self.tracker.has_pending() or any(self._entered)
                or any(self.shared.frontiers))

    def must_propagate(self) -> bool:
        """True if what waits for :meth:`propagate` could move a frontier that a child sees or the parent sees;
        False if it can only move frontiers of transparent children (fused into their producers, which never
        look at them), which may wait for a later propagation: frontiers that lag are never wrong, only late.
        """
        if self._final.diffs or any(self._entered) or any(self.shared.frontiers):  # (as has_pending, inline)
            return True
        tracker = self.tracker
        if not tracker.has_pending():
            return False
        if self.on_pointstamps is not None:
            return True
        watched = self._watched
        for loc in tracker.pending_locations():
            if watched[loc]:
                return True
        return False

    def has_unsent(self) -> bool:
        """True if this worker has changes that :meth:`send` has not yet batched."""
        return bool(self._local)

    def tracking_anything(self) -> bool:
        """True while anything inside is held or in flight (the scope is not complete)."""
        return self.tracker.tracking_anything() or bool(self._final.diffs) or bool(self._local.diffs)

    # -- internals --------------------------------------------------------------------

    @staticmethod
    def _watched_locations(graph: Graph, children: Sequence[Operate]) -> list[bool]:
        """Per location id: whether a change there can reach an input of a child that is not transparent (it
        may look at its frontiers whenever it runs) or a scope output (the parent's)."""
        watched = [False] * len(graph.locations)
        for c, child in enumerate(children, 1):
            if not child.transparent:
                for tid in graph.target_ids[c]:
                    watched[tid] = True
        for tid in graph.target_ids[0]:
            watched[tid] = True
        upstream: list[list[int]] = [[] for _ in graph.locations]
        for loc, hops in enumerate(graph.hops):
            for hop in hops:
                upstream[hop[0] if graph.is_target[loc] else hop].append(loc)
        stack = [loc for loc, w in enumerate(watched) if w]
        while stack:
            for loc in upstream[stack.pop()]:
                if not watched[loc]:
                    watched[loc] = True
                    stack.append(loc)
        return watched

    def _accept_frontier(self) -> None:
        to_inner = self.refinement.to_inner
        tracker = self.tracker
        for i, changes in enumerate(self.shared.frontiers):
            if changes.diffs:
                sid = self.graph.source_ids[0][i]
                for t, d in changes.drain():
                    tracker.update_at(sid, to_inner(t), d)

    def _harvest_inputs(self) -> None:
        local = self._local
        for i, entered in enumerate(self._entered):
            if entered.diffs:
                sid = self.graph.source_ids[0][i]
                targets = self._edge_ids[0][i]
                for t, n in entered.drain():
                    for tid in targets:
                        local.update((tid, t), n)
                    local.update((sid, t), -n)

    def _extract_into(self, c: int, dest: ChangeBatch[tuple[int, Any]]) -> list[int]:
        shared = self.children[c].shared  # type: ignore[union-attr]  # children[0] is None; c >= 1
        graph = self.graph
        update = dest.update
        for i, consumed in enumerate(shared.consumeds):
            if consumed.diffs:
                tid = graph.target_ids[c][i]
                for t, n in consumed.drain():
                    update((tid, t), -n)
        for o, internal in enumerate(shared.internals):
            if internal.diffs:
                sid = graph.source_ids[c][o]
                for t, d in internal.drain():
                    update((sid, t), d)
        consumers: list[int] = []
        for o, produced in enumerate(shared.produceds):
            if produced.diffs:
                targets = self._edge_ids[c][o]
                for t, n in produced.drain():
                    for tid in targets:
                        update((tid, t), n)
                for tid in targets:
                    node = graph.node_of[tid]
                    if node and node not in consumers:
                        consumers.append(node)
        return consumers

    def _propagate_pointstamps(self) -> None:
        graph = self.graph
        tracker = self.tracker
        if self._final.diffs:
            node_of, is_target = graph.node_of, graph.is_target
            to_outer = self.refinement.to_outer
            for (lid, t), d in self._final.drain():
                if node_of[lid] == 0:
                    port = graph.locations[lid].port
                    if is_target[lid]:
                        # Records that left the scope: produced, as far as the parent knows.
                        self.shared.produceds[port].update(to_outer(t), d)
                    else:
                        # The harvest's -n at an input, back as "the scope consumed n".
                        self.shared.consumeds[port].update(to_outer(t), -d)
                else:
                    tracker.update_at(lid, t, d)
        if self.on_pointstamps is not None and tracker.has_pending():
            tracker.propagate_all()
            self.on_pointstamps()
        else:
            tracker.propagate_all()

        pushed = tracker.take_pushed()
        if pushed:
            children = self.children
            activate = self._activate
            node_of, is_target, port_of = graph.node_of, graph.is_target, self._port_of
            cap_counts = tracker.cap_counts
            touched: set[int] = set()   # children that may have nothing left (no capability) and be done
            for (lid, t), d in pushed.items():
                node = node_of[lid]
                if node == 0:
                    continue
                if is_target[lid]:
                    child: Operate = children[node]  # type: ignore[assignment]  # children[0] is None; node >= 1
                    port = port_of[lid]
                    child.shared.frontiers[port].update(t, d)
                    interest = child.interest[port]
                    if interest is _ALWAYS or (interest is _IF_CAPABILITY and cap_counts[node] > 0):
                        activate.add(node)
                        continue
                if not cap_counts[node]:
                    touched.add(node)
            for node in touched:
                if node not in activate and tracker.node_idle(node):
                    activate.add(node)

        to_outer = self.refinement.to_outer
        for o in range(self.outputs):
            projected = tracker.pushed_output(o)
            if projected:
                changes = self._output_capabilities[o].update_iter((to_outer(t), d) for t, d in projected)
                if changes:
                    self.shared.internals[o].extend(changes)

    def __repr__(self) -> str:
        return f"Subgraph({self.name!r}, path={self.path}, children={len(self.children) - 1})"
