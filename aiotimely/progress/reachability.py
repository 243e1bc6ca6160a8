"""Reachability: a scope's graph, its path summaries, and the incremental progress tracker.

:class:`GraphBuilder` collects a scope's operators (their ports and internal path
summaries) and edges, checks them, and freezes them into a :class:`Graph`. The
graph keeps, per location, the hops to the next locations and the antichain of
summaries to each scope output (not an all-pairs closure, which would cost
O(locations²) per scope).

:class:`Tracker` holds, per location, the counts of pointstamps reported there
and the *implications*: the frontier of times that positive pointstamps anywhere
could still result in at that location. For an operator input (a ``Target``) the
implications are its input frontier. Count changes go in with :meth:`Tracker.update`;
:meth:`Tracker.propagate_all` moves only frontier changes, hop by hop, smallest
time first, so its work is proportional to the frontier changes an update
causes, not to the size of the graph. With totally ordered times and no cycle, a
location's implications are one least time, and :meth:`Tracker.propagate_all`
recomputes each location that may have moved once, in topological order.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from typing import Any, Iterable, Mapping, Sequence

from ..errors import GraphError
from .frontier import Antichain, ChangeBatch, MutableAntichain
from .location import Location, Source, Target
from .timestamp import TimestampType, timestamp_type

__all__ = ["GraphBuilder", "Graph", "Tracker", "Connectivity"]

Connectivity = list[dict[int, Antichain[Any]]]
"""Per input port: output port -> antichain of path summaries (a missing output = no path)."""


class GraphBuilder:
    """Collects a scope's nodes and edges; :meth:`build` checks them and returns a :class:`Graph`.

    Node 0 is the scope's boundary and is created here: it has one input per scope
    output and one output per scope input (see :mod:`aiotimely.progress.location`).
    Children are added with :meth:`add_node` as nodes ``1, 2, ...``.
    """

    def __init__(
        self,
        timestamp: Any = int,
        *,
        inputs: int = 0,
        outputs: int = 0,
        name: str = "scope",
    ) -> None:
        self.ttype: TimestampType[Any, Any] = timestamp_type(timestamp)
        self.name = name
        self._shape: dict[int, tuple[int, int]] = {0: (outputs, inputs)}
        self._connectivity: dict[int, Connectivity] = {0: [{} for _ in range(outputs)]}
        self._names: dict[int, str] = {0: name}
        self._edges: list[tuple[Source, Target]] = []
        self._transparent: set[int] = set()

    def add_node(
        self,
        index: int,
        inputs: int,
        outputs: int,
        connectivity: Sequence[Mapping[int, Any]] | None = None,
        *,
        name: str | None = None,
        transparent: bool = False,
    ) -> None:
        """Add operator ``index`` with its port counts and internal path summaries.

        ``connectivity[i]`` maps output ports to the summaries of input ``i`` to that
        output: one summary, a list of them, or an :class:`Antichain`. A missing
        output means no path. ``None`` connects every input to every output with
        the identity summary, as most operators do.

        ``transparent=True`` says the operator has one input, passes it to one output
        unchanged, and does not watch its input frontier: the tracker lets frontier
        changes hop over it (see :class:`Tracker`).
        """
        where = self._where(index, name)
        if type(index) is not int or index < 1:
            raise GraphError(f"{where}: operator indices start at 1 (0 is the scope itself)")
        if index in self._shape:
            raise GraphError(f"{where}: index {index} is already used by {self._describe(index)}")
        if inputs < 0 or outputs < 0:
            raise GraphError(f"{where}: port counts must be non-negative, got {inputs} inputs, {outputs} outputs")
        ttype = self.ttype
        if connectivity is None:
            conn = [
                {o: Antichain([ttype.identity], less_equal=ttype.summary_less_equal) for o in range(outputs)}
                for _ in range(inputs)
            ]
        else:
            if len(connectivity) != inputs:
                raise GraphError(
                    f"{where}: the summary describes {len(connectivity)} inputs, the operator has {inputs}"
                )
            conn = []
            for i, per_output in enumerate(connectivity):
                row: dict[int, Antichain[Any]] = {}
                for o, summaries in per_output.items():
                    if type(o) is not int or not 0 <= o < outputs:
                        raise GraphError(
                            f"{where}: the summary of input {i} names output {o!r}; "
                            f"the operator has outputs 0..{outputs - 1}"
                        )
                    if isinstance(summaries, Antichain):
                        summaries = list(summaries)
                    elif not isinstance(summaries, (list, set, frozenset)):
                        summaries = [summaries]
                    chain = Antichain(less_equal=ttype.summary_less_equal)
                    for s in summaries:
                        try:
                            ttype.check_summary(s)
                        except (TypeError, ValueError) as e:
                            raise GraphError(f"{where}, input {i} -> output {o}: {e}") from None
                        chain.insert(s)
                    if chain:
                        row[o] = chain
                conn.append(row)
        if transparent:
            identity = [ttype.identity]
            if (inputs, outputs) != (1, 1) or set(conn[0]) != {0} or list(conn[0][0]) != identity:
                raise GraphError(
                    f"{where}: only an operator with one input passed unchanged to one output can be transparent"
                )
            self._transparent.add(index)
        self._shape[index] = (inputs, outputs)
        self._connectivity[index] = conn
        self._names[index] = name or f"operator {index}"

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect an output to an input: records produced at ``source`` arrive at ``target``."""
        if type(source) is not Source or type(target) is not Target:
            raise GraphError(
                f"scope {self.name!r}: an edge goes from a Source to a Target, got {source!r} -> {target!r}"
            )
        self._edges.append((source, target))

    def build(self) -> Graph:
        """Check the graph and freeze it. Raises :class:`GraphError` naming what is wrong."""
        shape = self._shape
        indices = sorted(shape)
        if indices != list(range(len(indices))):
            missing = sorted(set(range(indices[-1] + 1)) - set(indices))
            raise GraphError(f"scope {self.name!r}: operator indices must be 1..n without gaps; missing {missing}")
        fed_by: dict[Target, Source] = {}
        for source, target in self._edges:
            for loc, ports in ((source, 1), (target, 0)):
                if loc.node not in shape:
                    raise GraphError(
                        f"scope {self.name!r}: edge {source!r} -> {target!r}: there is no node {loc.node} "
                        f"(nodes are 0..{len(shape) - 1})"
                    )
                n = shape[loc.node][ports]
                if not 0 <= loc.port < n:
                    kind = "outputs" if ports else "inputs"
                    raise GraphError(
                        f"scope {self.name!r}: edge {source!r} -> {target!r}: {self._describe(loc.node)} "
                        f"has {n} {kind}, no port {loc.port}"
                    )
            if target in fed_by:
                raise GraphError(
                    f"scope {self.name!r}: {target!r} ({self._describe(target.node)}) is fed by both "
                    f"{fed_by[target]!r} and {source!r}; an input has exactly one source (use concat)"
                )
            fed_by[target] = source
        graph = Graph(self.ttype, self.name, [shape[i] for i in indices], [self._connectivity[i] for i in indices],
                      [self._names[i] for i in indices], self._edges, frozenset(self._transparent))
        cycle = graph._non_advancing_cycle()
        if cycle:
            path = " -> ".join(f"{loc!r} ({self._describe(loc.node)})" for loc in cycle)
            raise GraphError(
                f"scope {self.name!r} has a cycle that does not advance timestamps: {path}. "
                "Every cycle must pass a path summary that strictly advances time, "
                "such as a feedback(1) edge in an iterative scope."
            )
        return graph

    def _describe(self, node: int) -> str:
        return f"{self._names.get(node, 'operator ' + str(node))!r}"

    def _where(self, index: Any, name: str | None) -> str:
        return f"scope {self.name!r}, operator {index} ({name or 'unnamed'})"


class Graph:
    """A checked, frozen scope graph: shapes, internal summaries, edges, and summaries to scope outputs.

    Locations have dense integer ids (``loc_id[Source(n, p)]``); per id the graph
    keeps the next hops and the summaries to each scope output. Many trackers (one
    per worker) can share one graph.
    """

    def __init__(
        self,
        ttype: TimestampType[Any, Any],
        name: str,
        shape: list[tuple[int, int]],
        connectivity: list[Connectivity],
        names: list[str],
        edges: Iterable[tuple[Source, Target]],
        transparent: frozenset[int] = frozenset(),
    ) -> None:
        self.ttype = ttype
        self.name = name
        self.shape = shape
        self.connectivity = connectivity
        self.names = names
        self.edges: dict[Source, list[Target]] = {}
        for source, target in edges:
            self.edges.setdefault(source, []).append(target)

        locations: list[Location] = []
        target_ids: list[list[int]] = []
        source_ids: list[list[int]] = []
        for node, (inputs, outputs) in enumerate(shape):
            target_ids.append(list(range(len(locations), len(locations) + inputs)))
            locations.extend(Target(node, p) for p in range(inputs))
            source_ids.append(list(range(len(locations), len(locations) + outputs)))
            locations.extend(Source(node, p) for p in range(outputs))
        self.locations = locations
        self.loc_id = {loc: i for i, loc in enumerate(locations)}
        self.target_ids = target_ids
        self.source_ids = source_ids
        self.is_target = [type(loc) is Target for loc in locations]
        self.node_of = [loc.node for loc in locations]

        # Next hops: across an operator (target -> its sources, with summaries) or along edges.
        hops: list[tuple[Any, ...]] = []
        for loc in locations:
            if type(loc) is Target:
                hops.append(tuple(
                    (source_ids[loc.node][o], s)
                    for o, chain in connectivity[loc.node][loc.port].items()
                    for s in chain
                ))
            else:
                hops.append(tuple(self.loc_id[t] for t in self.edges.get(loc, ())))
        self.hops = hops

        self._output_summaries = self._summarize_outputs()
        self.to_outputs: list[tuple[tuple[int, Any], ...]] = [
            # The scope's own boundary is not an inner capability: its paths to the
            # outputs are the scope's summary, applied by the parent.
            () if loc.node == 0 else tuple((o, s) for o, chain in self._output_summaries[i].items() for s in chain)
            for i, loc in enumerate(locations)
        ]
        self.scope_summary: Connectivity = [self._output_summaries[i] for i in source_ids[0]]
        """Per scope input: scope output -> antichain of inner summaries (the scope's own connectivity)."""
        self._collapse(transparent)
        self.rank: list[int] | None = None
        """Per location id: its place in a topological order of ``steps``; ``None`` unless the times are
        totally ordered and ``steps`` has no cycle (then the tracker keeps one least time per location)."""
        self.by_rank: list[int] = []
        self.step_preds: list[tuple[tuple[int, Any], ...]] = []
        """Per location id: the locations whose steps lead to it, with the summary (``None``: the identity)."""
        self.step_ranks: list[tuple[int, ...]] = []
        """Per location id: the ranks of the locations its steps lead to."""
        if ttype.totally_ordered:
            self._order_steps()

    def _order_steps(self) -> None:
        """Topologically order the locations along ``steps``, if no cycle prevents it."""
        n = len(self.locations)
        identity = self.ttype.identity
        preds: list[list[tuple[int, Any]]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        for loc, steps in enumerate(self.steps):
            for step in steps:
                if self.is_target[loc]:
                    to, s = step
                    preds[to].append((loc, None if s == identity else s))
                else:
                    to = step
                    preds[to].append((loc, None))
                succs[loc].append(to)
        order = _topological_order(succs)
        if len(order) < n:
            return
        self.by_rank = order
        rank = [0] * n
        for r, loc in enumerate(order):
            rank[loc] = r
        self.rank = rank
        self.step_preds = [tuple(p) for p in preds]
        self.step_ranks = [tuple(sorted({rank[to] for to in succ})) for succ in succs]

    def _collapse(self, transparent: frozenset[int]) -> None:
        """Let frontier changes hop over transparent operators: ``steps`` are the hops the tracker takes.

        The locations of a transparent operator get ``root``: the nearest ordinary output upstream
        (``-2`` if none feeds them; ``-1`` marks an ordinary location). An ordinary output's steps go
        straight to the first ordinary inputs downstream; a transparent location keeps its own hops,
        carrying only what is counted at transparent locations (its *partial* implications). A
        transparent location's frontier is then its root's implications together with its partial ones.
        """
        self.transparent = transparent
        n = len(self.locations)
        self.root = [-1] * n
        self.steps: list[tuple[Any, ...]] = list(self.hops)
        if not transparent:
            return
        feeder = {self.loc_id[t]: self.loc_id[s] for s, targets in self.edges.items() for t in targets}
        node_of, is_target = self.node_of, self.is_target
        for loc in range(n):
            if node_of[loc] not in transparent or self.root[loc] != -1:
                continue
            path, at = [], loc
            while True:
                if node_of[at] not in transparent:
                    root = at
                    break
                if self.root[at] != -1:
                    root = self.root[at]
                    break
                if at in path:  # a cycle of transparent operators only: GraphBuilder.build rejects it
                    root = -2
                    break
                path.append(at)
                if is_target[at]:
                    if at not in feeder:
                        root = -2
                        break
                    at = feeder[at]
                else:
                    at = self.target_ids[node_of[at]][0]
            for p in path:
                self.root[p] = root
        for loc in range(n):
            if not is_target[loc] and node_of[loc] not in transparent:
                self.steps[loc] = tuple(self._exits(loc))

    def _exits(self, source: int) -> list[int]:
        """The first inputs of ordinary operators downstream of ``source``, over transparent ones."""
        exits: list[int] = []
        seen: set[int] = set()
        stack = list(reversed(self.hops[source]))
        while stack:
            target = stack.pop()
            node = self.node_of[target]
            if node not in self.transparent:
                exits.append(target)
            elif target not in seen:
                seen.add(target)
                stack.extend(reversed(self.hops[self.source_ids[node][0]]))
        return exits

    def transparent_below(self, loc: int) -> list[int]:
        """The transparent operators whose input frontier can depend on what is at ``loc``, over transparent
        operators only (``loc``'s own operator too, if ``loc`` is a transparent input)."""
        nodes: list[int] = []
        stack = [loc]
        seen: set[int] = set()
        while stack:
            at = stack.pop()
            node = self.node_of[at]
            if self.is_target[at]:
                if node in self.transparent and node not in seen:
                    seen.add(node)
                    nodes.append(node)
                    stack.append(self.source_ids[node][0])
            else:
                stack.extend(self.hops[at])
        return nodes

    @property
    def scope_inputs(self) -> int:
        return self.shape[0][1]

    @property
    def scope_outputs(self) -> int:
        return self.shape[0][0]

    def summaries_to_outputs(self, location: Location) -> dict[int, Antichain[Any]]:
        """The antichain of path summaries from ``location`` to each scope output it reaches."""
        return self._output_summaries[self.loc_id[location]]

    def _summarize_outputs(self) -> list[dict[int, Antichain[Any]]]:
        # A backwards label-correcting search from each scope output; an antichain
        # insert that fails ends the search along that path, which is what makes
        # strictly advancing cycles terminate.
        ttype = self.ttype
        followed_by = ttype.followed_by
        sle = ttype.summary_less_equal
        results: list[dict[int, Antichain[Any]]] = [{} for _ in self.locations]
        reverse_edge: dict[int, int] = {}
        for source, targets in self.edges.items():
            for t in targets:
                reverse_edge[self.loc_id[t]] = self.loc_id[source]
        reverse_internal: dict[int, list[tuple[int, Any]]] = {}
        for tid, hops in enumerate(self.hops):
            if self.is_target[tid]:
                for sid, s in hops:
                    reverse_internal.setdefault(sid, []).append((tid, s))
        work = deque((tid, port, ttype.identity) for port, tid in enumerate(self.target_ids[0]))
        while work:
            loc, out, summary = work.popleft()
            if self.is_target[loc]:
                preds = [(reverse_edge[loc], summary)] if loc in reverse_edge else []
            else:
                preds = []
                for tid, op_summary in reverse_internal.get(loc, ()):
                    combined = followed_by(op_summary, summary)
                    if combined is not None:
                        preds.append((tid, combined))
            for pred, s in preds:
                chain = results[pred].get(out)
                if chain is None:
                    chain = results[pred][out] = Antichain(less_equal=sle)
                if chain.insert(s):
                    work.append((pred, out, s))
        return results

    def _non_advancing_cycle(self) -> list[Location] | None:
        # Kahn's algorithm over edges and the internal hops whose summary does not
        # advance time; whatever keeps a predecessor lies on or behind such a cycle.
        arcs: list[list[int]] = [[] for _ in self.locations]
        for loc, hops in enumerate(self.hops):
            if self.is_target[loc]:
                arcs[loc] = sorted({sid for sid, s in hops if not self.ttype.advances(s)})
            else:
                arcs[loc] = list(hops)
        order = _topological_order(arcs)
        if len(order) == len(arcs):
            return None
        stuck = set(range(len(arcs))) - set(order)
        # Every stuck location has a stuck predecessor: walk back until one repeats.
        preds: dict[int, int] = {}
        for n in stuck:
            for m in arcs[n]:
                if m in stuck:
                    preds.setdefault(m, n)
        walk = [min(stuck)]
        seen = {walk[0]: 0}
        while True:
            p = preds[walk[-1]]
            if p in seen:
                cycle = walk[seen[p]:]
                cycle.reverse()
                cycle.append(cycle[0])
                return [self.locations[n] for n in cycle]
            seen[p] = len(walk)
            walk.append(p)


def _topological_order(arcs: list[list[int]]) -> list[int]:
    """Kahn's algorithm: the nodes ``0..len(arcs)-1`` in an order where every arc ``n -> arcs[n][i]`` goes
    forward; nodes on a cycle, or reached only through one, are left out."""
    indegree = [0] * len(arcs)
    for succ in arcs:
        for m in succ:
            indegree[m] += 1
    ready = [n for n, d in enumerate(indegree) if d == 0]
    order: list[int] = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in arcs[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    return order


def _net_into(pushed: dict[tuple[int, Any], int], loc: int, changes: Iterable[tuple[Any, int]]) -> None:
    """Add frontier changes at ``loc`` to the net changes not yet drained by :meth:`Tracker.pushed`."""
    for t, d in changes:
        key = (loc, t)
        net = pushed.get(key, 0) + d
        if net:
            pushed[key] = net
        else:
            del pushed[key]


class Tracker:
    """Pointstamp counts and their implications for one scope, on one worker.

    ``update(location, time, diff)`` records a change of the count of capabilities
    (at a ``Source``) or records in flight (at a ``Target``); nothing moves until
    :meth:`propagate_all`. Then :meth:`pushed` returns the changes of every
    location's implications (for targets: operator input frontiers), and
    :meth:`pushed_output` the changes of inner capabilities projected onto each
    scope output.

    Frontier changes hop over transparent operators (a chain of 256 fused maps costs
    what one costs). Their input frontiers are exact when asked (:meth:`frontier`),
    but :meth:`pushed` reports them lazily: only when one becomes empty or stops
    being empty, and then it reports the whole change since its last report. What
    was reported is always an earlier frontier, so never ahead of the true one.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        n = len(graph.locations)
        self._le = graph.ttype.less_equal
        self._total = graph.ttype.totally_ordered
        self._pointstamps: list[MutableAntichain[Any] | None] = [None] * n
        self._implications: list[MutableAntichain[Any] | None] = [None] * n
        self._pending: dict[int, dict[Any, int]] = {}
        self._work: list[tuple[Any, int, int]] = []
        self._pushed: dict[tuple[int, Any], int] = {}
        self._output_changes: list[ChangeBatch[Any]] = [ChangeBatch() for _ in range(graph.scope_outputs)]
        self._lazy_roots = {r for r in graph.root if r >= 0}
        self._root_empty: dict[int, bool] = {}   # per root: whether its implications were empty when last looked at
        self._reported: dict[int, Antichain[Any]] = {}   # per transparent input: the frontier pushed() last reported
        self.cap_counts = [0] * len(graph.shape)
        """Per node: the number of frontier elements of its capabilities (positive iff it holds any)."""
        self.total_counts = 0
        """The number of pointstamp frontier elements anywhere: zero iff nothing is tracked."""
        self._least: list[Any] | None = [None] * n if graph.rank is not None else None
        """With totally ordered times and no cycle: per location, the one element of its implications (``None``
        if they are empty), instead of ``_implications``."""

    # -- counts in ----------------------------------------------------------------

    def update(self, location: Location, time: Any, diff: int) -> None:
        """Record ``diff`` more capabilities (``Source``) or records (``Target``) at ``time``."""
        try:
            loc = self.graph.loc_id[location]
        except KeyError:
            raise GraphError(f"scope {self.graph.name!r} has no location {location!r}") from None
        self.update_at(loc, time, diff)

    update_source = update
    update_target = update

    def update_at(self, loc: int, time: Any, diff: int) -> None:
        """:meth:`update` by location id."""
        pending = self._pending.get(loc)
        if pending is None:
            if diff:
                self._pending[loc] = {time: diff}
            return
        total = pending.get(time, 0) + diff
        if total:
            pending[time] = total
        else:
            pending.pop(time, None)
            if not pending:
                del self._pending[loc]

    # -- propagation ----------------------------------------------------------------

    def propagate_all(self) -> None:
        """Turn the recorded count changes into implication changes, smallest time first."""
        if not self._pending:
            return
        if self._least is not None:
            pending, self._pending = self._pending, {}
            self._propagate_least(pending)
            return
        graph = self.graph
        is_target = graph.is_target
        node_of = graph.node_of
        to_outputs = graph.to_outputs
        hops = graph.steps
        root = graph.root
        lazy_roots = self._lazy_roots
        root_empty = self._root_empty
        touched: list[int] = []
        results_in = graph.ttype.results_in
        identity = graph.ttype.identity
        output_changes = self._output_changes
        pointstamps = self._pointstamps
        implications = self._implications
        cap_counts = self.cap_counts
        pushed = self._pushed
        work = self._work
        le, total = self._le, self._total

        pending, self._pending = self._pending, {}
        for loc, loc_changes in pending.items():
            counts = pointstamps[loc]
            if counts is None:
                counts = pointstamps[loc] = MutableAntichain(less_equal=le, totally_ordered=total)
            for t, d in counts.update_iter(loc_changes.items()):
                self.total_counts += d
                if not is_target[loc]:
                    cap_counts[node_of[loc]] += d
                for out, s in to_outputs[loc]:
                    t2 = results_in(s, t)
                    if t2 is not None:
                        output_changes[out].update(t2, d)
                heappush(work, (t, loc, d))

        while work:
            t, loc, d = heappop(work)
            while work and work[0][1] == loc and work[0][0] == t:
                d += heappop(work)[2]
            if not d:
                continue
            implied = implications[loc]
            if implied is None:
                implied = implications[loc] = MutableAntichain(less_equal=le, totally_ordered=total)
            changes = implied.update(t, d)
            if not changes:
                continue
            if root[loc] == -1:
                _net_into(pushed, loc, changes)
                # (a root's transparent operators are reported when its emptiness changes from what they saw)
                if loc in lazy_roots and root_empty.get(loc, True) != (not implied._frontier):
                    touched.append(loc)
            else:
                touched.append(loc)
            if is_target[loc]:
                for t1, d1 in changes:
                    for source, s in hops[loc]:
                        t2 = t1 if s == identity else results_in(s, t1)
                        if t2 is not None:
                            heappush(work, (t2, source, d1))
            else:
                for t1, d1 in changes:
                    for target in hops[loc]:
                        heappush(work, (t1, target, d1))
        if touched:
            self._report_transparent(touched)

    def _propagate_least(self, pending: dict[int, dict[Any, int]]) -> None:
        """:meth:`propagate_all` for totally ordered times and a graph without cycles: implications are one least
        time per location, the least of its own pointstamps' and of what its predecessors imply, recomputed
        once per changed location in topological order. Exactly the frontiers the counting algorithm finds,
        with no counts and no work list of single changes."""
        graph = self.graph
        is_target, node_of, to_outputs = graph.is_target, graph.node_of, graph.to_outputs
        rank, by_rank, preds, after, root = graph.rank, graph.by_rank, graph.step_preds, graph.step_ranks, graph.root
        assert rank is not None
        results_in = graph.ttype.results_in
        pointstamps = self._pointstamps
        least = self._least
        assert least is not None
        pushed = self._pushed
        lazy_roots, root_empty = self._lazy_roots, self._root_empty
        heap: list[int] = []
        touched: list[int] = []
        total_counts = self.total_counts
        for loc, loc_changes in pending.items():
            own = pointstamps[loc]
            if own is None:
                own = pointstamps[loc] = MutableAntichain(less_equal=self._le, totally_ordered=True)
            frontier = own._frontier
            old = frontier[0] if frontier else None
            if not own.update_total(loc_changes.items()):
                continue
            frontier = own._frontier
            new = frontier[0] if frontier else None
            if new == old:
                continue
            if old is None or new is None:  # (otherwise as many frontier elements as before)
                d = -1 if new is None else 1
                total_counts += d
                if not is_target[loc]:
                    self.cap_counts[node_of[loc]] += d
            outputs = to_outputs[loc]
            if outputs:
                changes = [(t, d) for t, d in ((old, -1), (new, 1)) if t is not None]
                for t, d in changes:
                    for out, s in outputs:
                        t2 = results_in(s, t)
                        if t2 is not None:
                            self._output_changes[out].update(t2, d)
            heappush(heap, rank[loc])
        self.total_counts = total_counts
        last = -1
        while heap:
            r = heappop(heap)
            if r == last:  # (pushed by several predecessors: ranks come out in order, so repeats are adjacent)
                continue
            last = r
            loc = by_rank[r]
            own = pointstamps[loc]
            best = own._frontier[0] if own is not None and own._frontier else None
            for p, s in preds[loc]:
                t = least[p]
                if t is not None:
                    if s is not None:
                        t = results_in(s, t)
                        if t is None:
                            continue
                    if best is None or t < best:
                        best = t
            old = least[loc]
            if old == best:
                continue
            least[loc] = best
            if root[loc] == -1:
                # (_net_into, inline: the frontier lost ``old`` and gained ``best``)
                if old is not None:
                    key = (loc, old)
                    net = pushed.get(key, 0) - 1
                    if net:
                        pushed[key] = net
                    else:
                        del pushed[key]
                if best is not None:
                    key = (loc, best)
                    net = pushed.get(key, 0) + 1
                    if net:
                        pushed[key] = net
                    else:
                        del pushed[key]
                # (a root's transparent operators are reported when its emptiness changes from what they saw)
                if loc in lazy_roots and root_empty.get(loc, True) != (best is None):
                    touched.append(loc)
            else:
                touched.append(loc)
            for r in after[loc]:  # (every step leads to a later rank: it comes out of the heap after this one)
                heappush(heap, r)
        if touched:
            self._report_transparent(touched)

    def _implied(self, loc: int) -> list[Any]:
        """The frontier elements of the implications at ``loc`` (for a transparent location: its partial ones)."""
        if self._least is not None:
            t = self._least[loc]
            return [] if t is None else [t]
        implied = self._implications[loc]
        return implied._frontier if implied is not None else []

    def _report_transparent(self, touched: list[int]) -> None:
        """Report the input frontiers of transparent operators whose emptiness may have changed."""
        graph = self.graph
        root_empty = self._root_empty
        nodes: dict[int, None] = {}
        for loc in dict.fromkeys(touched):
            r = graph.root[loc]
            if r == -1:  # a root: its emptiness decides for everything transparent below it
                empty = not self._implied(loc)
                if root_empty.get(loc, True) != empty:
                    root_empty[loc] = empty
                    nodes.update(dict.fromkeys(graph.transparent_below(loc)))
            elif r == -2 or root_empty.get(r, True):  # nothing comes from the root: what is here decides
                nodes.update(dict.fromkeys(graph.transparent_below(loc)))
        pushed = self._pushed
        for node in nodes:
            tid = graph.target_ids[node][0]
            new = self._frontier_at(tid)
            old = self._reported.get(tid)
            if old is not None and old == new:
                continue
            _net_into(pushed, tid, [*((t, -1) for t in (old or ())), *((t, 1) for t in new)])
            self._reported[tid] = new

    def _frontier_at(self, loc: int) -> Antichain[Any]:
        r = self.graph.root[loc]
        if r == -1:
            return Antichain._from_minimal(self._implied(loc), self._le)
        frontier = Antichain(less_equal=self._le)
        for part in (self._implied(r) if r >= 0 else (), self._implied(loc)):
            for t in part:
                frontier.insert(t)
        return frontier

    # -- results out ----------------------------------------------------------------

    def pushed(self) -> list[tuple[Location, Any, int]]:
        """Drain the net changes of implications since the last call, as ``(location, time, ±1)``."""
        if not self._pushed:
            return []
        pushed, self._pushed = self._pushed, {}
        locations = self.graph.locations
        return [(locations[loc], t, d) for (loc, t), d in pushed.items()]

    def take_pushed(self) -> dict[tuple[int, Any], int]:
        """:meth:`pushed` by location id, as ``{(location id, time): ±1}`` (read it, do not change it)."""
        pushed = self._pushed
        if pushed:
            self._pushed = {}
        return pushed

    def pushed_output(self, output: int) -> list[tuple[Any, int]]:
        """Drain the changes of inner pointstamps projected onto scope output ``output``."""
        return self._output_changes[output].drain()

    def frontier(self, location: Location) -> Antichain[Any]:
        """The implications at ``location``: for a ``Target``, the operator's input frontier."""
        return self._frontier_at(self.graph.loc_id[location])

    def implications_at(self, loc: int) -> MutableAntichain[Any] | None:
        """The implications at location id ``loc``, with their counts: one per frontier element of the
        location's own pointstamps and of each predecessor's implications (``None`` if nothing was ever
        implied there)."""
        least = self._least
        if least is None:
            return self._implications[loc]
        graph = self.graph
        implied = MutableAntichain(less_equal=self._le, totally_ordered=True)
        own = self._pointstamps[loc]
        if own is not None and own._frontier:
            implied.update(own._frontier[0], 1)
        for p, s in graph.step_preds[loc]:
            t = least[p]
            if t is not None and s is not None:
                t = graph.ttype.results_in(s, t)
            if t is not None:
                implied.update(t, 1)
        return implied if implied._counts or least[loc] is not None else None

    def pointstamps(self, location: Location) -> MutableAntichain[Any]:
        """The counts reported at exactly ``location``."""
        counts = self._pointstamps[self.graph.loc_id[location]]
        return counts if counts is not None else MutableAntichain(less_equal=self._le)

    def least_pointstamp(self, skip_nodes: frozenset[int] = frozenset()) -> Any:
        """The least time of any capability or record in flight, at any location but those of ``skip_nodes``
        (totally ordered times); ``None`` if there is none."""
        node_of = self.graph.node_of
        least = None
        for loc, counts in enumerate(self._pointstamps):
            if counts is None or node_of[loc] in skip_nodes:
                continue
            for t in counts.frontier.elements:
                if least is None or t < least:
                    least = t
        return least

    def has_pending(self) -> bool:
        """True if count changes wait for :meth:`propagate_all`."""
        return bool(self._pending)

    def pending_locations(self) -> Iterable[int]:
        """The ids of the locations whose count changes wait for :meth:`propagate_all`."""
        return self._pending.keys()

    def tracking_anything(self) -> bool:
        """True while any pointstamp is positive or any change waits for propagation."""
        return bool(self._pending) or self.total_counts > 0

    def node_idle(self, node: int) -> bool:
        """True if ``node`` holds no capability and no input frontier: it can shut down."""
        if self.cap_counts[node] > 0:
            return False
        root = self.graph.root
        for loc in self.graph.target_ids[node]:
            if root[loc] != -1:
                if self._frontier_at(loc):
                    return False
            elif self._implied(loc):
                return False
        return True

    def is_global(self, location: Location, time: Any) -> bool:
        """True if retracting ``time`` at ``location`` might move a frontier.

        That is, no implication there is strictly earlier, and no more than one
        implication is at ``time`` itself.
        """
        loc = self.graph.loc_id[location]
        r = self.graph.root[loc]
        parts = [self.implications_at(loc)]
        if r >= 0:
            parts.append(self.implications_at(r))
        count = 0
        for implied in parts:
            if implied is not None:
                if implied.less_than(time):
                    return False
                count += implied.count_for(time)
        return count <= 1
