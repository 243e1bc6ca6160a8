"""Transparent operators: frontier changes hop over them, and every frontier stays exact.

Random graphs get chains (and small trees) of identity operators spliced into their
edges; those are built as transparent. The tracker must give the brute-force
reference's frontier at every location, transparent ones included, and what it
pushes for a transparent input must be empty exactly when that input's frontier is,
and never ahead of it.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiotimely.errors import GraphError
from aiotimely.progress import (
    Antichain,
    FrontierInterest,
    GraphBuilder,
    Source,
    Target,
    Tracker,
)
from aiotimely.progress import reachability

from .driver import build_tree
from .graphs import OpSpec, ScopeSpec, random_scope, random_time
from .reference import FlatGraph
from .test_reachability import count_heap_pops


def with_transparent_chains(rng: random.Random, spec: ScopeSpec) -> tuple[ScopeSpec, set[int]]:
    """``spec`` with runs of identity operators spliced into some edges (some of them branching)."""
    identity = spec.ttype.identity
    children = list(spec.children)
    transparent: set[int] = set()

    def new_identity() -> int:
        children.append(OpSpec(f"id{len(children) + 1}", 1, 1, [{0: [identity]}]))
        transparent.add(len(children))
        return len(children)

    edges: list[tuple[Source, Target]] = []
    for source, target in spec.edges:
        if rng.random() < 0.6:
            for _ in range(rng.randint(1, 4)):
                node = new_identity()
                edges.append((source, Target(node, 0)))
                source = Source(node, 0)
                if rng.random() < 0.3:  # a branch: a transparent side chain ending in a sink
                    side = new_identity()
                    edges.append((source, Target(side, 0)))
                    children.append(OpSpec(f"sink{len(children) + 1}", 1, 0, [{}]))
                    edges.append((Source(side, 0), Target(len(children), 0)))
        edges.append((source, target))
    if rng.random() < 0.3:  # a transparent chain nothing feeds
        edges.append((Source(new_identity(), 0), Target(new_identity(), 0)))
    return ScopeSpec(spec.name, spec.kind, spec.ttype, spec.inputs, spec.outputs, children, edges), transparent


def build(spec: ScopeSpec, transparent: set[int]):
    builder = GraphBuilder(spec.ttype, inputs=spec.inputs, outputs=spec.outputs, name=spec.name)
    for c, child in enumerate(spec.children, 1):
        assert isinstance(child, OpSpec)
        builder.add_node(c, child.inputs, child.outputs, child.connectivity, name=child.name,
                         transparent=c in transparent)
    for source, target in spec.edges:
        builder.add_edge(source, target)
    return builder.build()


def random_graph(rng: random.Random):
    spec = random_scope(rng, depth=0, max_children=6, inputs=rng.randint(0, 1), outputs=rng.randint(0, 1))
    return with_transparent_chains(rng, spec)


def random_changes(rng, tracker, counts, ttype, first):
    """A few count changes anywhere, transparent locations included, as a real dataflow makes them: counts
    never below zero, and after the first round a new pointstamp only where the frontier already allows
    its time (frontiers never go back)."""
    locations = tracker.graph.locations
    le = ttype.less_equal
    for _ in range(rng.randint(1, 6)):
        positive = sorted((key for key, c in counts.items() if c > 0), key=repr)
        if positive and rng.random() < 0.45:
            (loc, t), d = rng.choice(positive), -1
        else:
            loc, t, d = rng.choice(locations), random_time(rng, ttype), rng.choice((1, 1, 2))
            if not first and not any(le(f, t) for f in tracker.frontier(loc)):
                continue
        tracker.update(loc, t, d)
        counts[(loc, t)] += d


def check(spec, tracker, counts, pushed):
    expected = FlatGraph(spec).frontiers([(((0,), loc), t) for (loc, t), c in counts.items() if c > 0])
    graph = tracker.graph
    for loc in graph.locations:
        want = expected.get(((0,), loc), Antichain())
        assert tracker.frontier(loc) == want, f"frontier at {loc!r}: {tracker.frontier(loc)} != {want}"
        seen = {t for t, c in pushed[loc].items() if c}
        assert all(c in (0, 1) for c in pushed[loc].values()), (loc, pushed[loc])
        if graph.root[graph.loc_id[loc]] == -1:
            assert seen == set(want), f"pushed at {loc!r}: {seen} != {want}"
        elif type(loc) is Target:
            assert bool(seen) == bool(want), f"pushed at transparent {loc!r}: {seen}, frontier {want}"
            le = graph.ttype.less_equal
            assert all(any(le(s, t) for s in seen) for t in want), f"pushed at {loc!r} is ahead: {seen} > {want}"
        else:
            assert not seen, f"a transparent output {loc!r} is never pushed"
    for node in range(1, len(graph.shape)):
        want_idle = tracker.cap_counts[node] == 0 and not any(
            expected.get(((0,), Target(node, p))) for p in range(graph.shape[node][0]))
        assert tracker.node_idle(node) == want_idle, f"node {node} idle: {tracker.node_idle(node)}"


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 8))
def test_frontiers_over_transparent_operators_match_brute_force(rng, rounds):
    spec, transparent = random_graph(rng)
    tracker = Tracker(build(spec, transparent))
    counts: Counter = Counter()
    pushed: dict = {loc: Counter() for loc in tracker.graph.locations}
    for round in range(rounds):
        random_changes(rng, tracker, counts, spec.ttype, first=round == 0)
        tracker.propagate_all()
        for loc, t, d in tracker.pushed():
            pushed[loc][t] += d
        check(spec, tracker, counts, pushed)


def chain(n: int, transparent: bool):
    b = GraphBuilder(int, name="chain")
    b.add_node(1, 0, 1, name="source")
    for i in range(2, n + 2):
        b.add_node(i, 1, 1, name=f"map{i}", transparent=transparent)
        b.add_edge(Source(i - 1, 0), Target(i, 0))
    b.add_node(n + 2, 1, 0, name="sink")
    b.add_edge(Source(n + 1, 0), Target(n + 2, 0))
    return b.build()


def test_a_time_advance_hops_over_a_transparent_chain_in_one_step(monkeypatch):
    tracker = Tracker(chain(1000, transparent=True))
    tracker.update(Source(1, 0), 0, 1)
    tracker.propagate_all()
    tracker.pushed()
    popped = count_heap_pops(monkeypatch)
    tracker.update(Source(1, 0), 1, 1)
    tracker.update(Source(1, 0), 0, -1)
    tracker.propagate_all()
    assert popped[0] <= 4     # the source's implications, then the sink's input: not the 1,000 maps
    assert tracker.frontier(Target(1002, 0)) == Antichain([1])
    assert tracker.frontier(Target(500, 0)) == Antichain([1])     # asked for: exact
    assert [(loc, t, d) for loc, t, d in tracker.pushed() if loc.node == 500] == []   # not pushed until it empties
    tracker.update(Source(1, 0), 1, -1)
    tracker.propagate_all()
    emptied = {loc.node for loc, t, d in tracker.pushed() if type(loc) is Target and d < 0}
    assert emptied == set(range(2, 1003))
    assert all(tracker.node_idle(n) for n in range(2, 1003))


def test_only_one_to_one_identity_operators_can_be_transparent():
    b = GraphBuilder(int, name="df")
    with pytest.raises(GraphError, match=r"\(advance\).*transparent"):
        b.add_node(1, 1, 1, [{0: 1}], name="advance", transparent=True)
    with pytest.raises(GraphError, match=r"\(two\).*transparent"):
        b.add_node(1, 2, 1, name="two", transparent=True)
    b.add_node(1, 1, 1, [{0: 0}], name="fine", transparent=True)


@pytest.mark.parametrize("bug", ["no-root-part", "no-partial-refresh", "first-exit-only"])
def test_planted_bugs_are_caught(monkeypatch, bug):
    """The property test above must fail on each of these."""
    Tracker_ = reachability.Tracker
    if bug == "no-root-part":
        def frontier_at(self, loc):
            return Antichain(self._implied(loc))
        monkeypatch.setattr(Tracker_, "_frontier_at", frontier_at)
    elif bug == "no-partial-refresh":
        real = Tracker_._report_transparent
        monkeypatch.setattr(Tracker_, "_report_transparent",
                            lambda self, touched: real(self, [loc for loc in touched if self.graph.root[loc] == -1]))
    else:
        real_exits = reachability.Graph._exits
        monkeypatch.setattr(reachability.Graph, "_exits", lambda self, source: real_exits(self, source)[:1])
    with pytest.raises(AssertionError):
        test_frontiers_over_transparent_operators_match_brute_force()


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 8))
def test_only_what_moves_transparent_frontiers_may_wait(rng, rounds):
    """``Subgraph.must_propagate()`` is False only if propagating would push no frontier change to a child
    that is not transparent, and none to the parent: what waits moves fused operators' frontiers only (and
    may find a child with nothing left, to shut down, later)."""
    spec, transparent = random_graph(rng)
    sub, by_place = build_tree(spec, interest=FrontierInterest.NEVER, transparent={((0,), c) for c in transparent})
    ops = [by_place[((0,), c)] for c in range(1, len(spec.children) + 1)]
    counts: Counter = Counter({(Source(c, o), spec.ttype.minimum): 1
                               for c, op in enumerate(ops, 1) for o in range(op.outputs)})

    def seen_outside_fused() -> list[str]:
        seen = [f"frontier of {op.name}" for op in ops if not op.transparent and any(op.shared.frontiers)]
        parent = sub.shared
        if any(parent.internals) or any(parent.produceds) or any(parent.consumeds):
            seen.append("the parent's counts")
        for batch in [*parent.internals, *parent.produceds, *parent.consumeds,
                      *(b for op in ops for b in op.shared.frontiers)]:
            batch.drain()
        return seen

    seen_outside_fused()
    for round in range(rounds):
        random_changes(rng, sub.tracker, counts, spec.ttype, first=round == 0)
        must = sub.must_propagate()
        active = sub.propagate()
        seen = seen_outside_fused()
        if not must:
            assert not seen, f"must_propagate() was False, but propagating changed the {seen}"
            assert all(ops[c - 1].transparent or sub.tracker.node_idle(c) for c in active), active
