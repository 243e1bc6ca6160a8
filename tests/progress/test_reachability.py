"""The graph builder and the tracker, checked against the brute-force reference."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiotimely.errors import GraphError
from aiotimely.progress import INT, Antichain, GraphBuilder, Product, ProductType, Source, Target, Tracker
from aiotimely.progress import reachability

from .graphs import OpSpec, ScopeSpec, loop_graph, random_scope, random_time
from .reference import FlatGraph

PP = ProductType(INT, INT)


def graph_of(spec: ScopeSpec):
    builder = GraphBuilder(spec.ttype, inputs=spec.inputs, outputs=spec.outputs, name=spec.name)
    for c, child in enumerate(spec.children, 1):
        assert isinstance(child, OpSpec)
        builder.add_node(c, child.inputs, child.outputs, child.connectivity, name=child.name)
    for source, target in spec.edges:
        builder.add_edge(source, target)
    return builder.build()


def every_location(graph):
    return list(graph.locations)


# -- building -----------------------------------------------------------------


def test_builder_rejects_a_cycle_of_identity_summaries_and_names_it():
    b = GraphBuilder(int, name="wordcount")
    b.add_node(1, 1, 1, name="map")
    b.add_node(2, 1, 1, name="filter")
    b.add_node(3, 1, 1, [{0: 0}], name="stuck-feedback")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(3, 0))
    b.add_edge(Source(3, 0), Target(1, 0))
    with pytest.raises(GraphError) as info:
        b.build()
    message = str(info.value)
    assert "wordcount" in message and "does not advance" in message
    for name in ("'map'", "'filter'", "'stuck-feedback'"):
        assert name in message
    assert "Target(1, 0)" in message and "Source(3, 0)" in message


def test_builder_accepts_a_cycle_through_an_advancing_summary():
    graph = graph_of(loop_graph())
    assert len(graph.locations) == 7


def test_a_cycle_through_a_product_summary_must_advance_some_coordinate():
    for summary, ok in ((Product(0, 0), False), (Product(0, 1), True), (Product(1, 0), True)):
        b = GraphBuilder(PP, name="loop")
        b.add_node(1, 1, 1, name="body")
        b.add_node(2, 1, 1, [{0: summary}], name="feedback")
        b.add_edge(Source(1, 0), Target(2, 0))
        b.add_edge(Source(2, 0), Target(1, 0))
        if ok:
            b.build()
        else:
            with pytest.raises(GraphError, match="does not advance"):
                b.build()


def test_builder_errors_name_the_place():
    b = GraphBuilder(int, name="df")
    b.add_node(1, 1, 1, name="a")
    with pytest.raises(GraphError, match="already used by 'a'"):
        b.add_node(1, 1, 1, name="b")
    with pytest.raises(GraphError, match="start at 1"):
        b.add_node(0, 1, 1)
    with pytest.raises(GraphError, match="names output 3"):
        b.add_node(2, 1, 1, [{3: 0}], name="c")
    with pytest.raises(GraphError, match="describes 2 inputs"):
        b.add_node(2, 1, 1, [{0: 0}, {0: 0}], name="c")
    with pytest.raises(GraphError, match="-1"):
        b.add_node(2, 1, 1, [{0: -1}], name="c")
    with pytest.raises(GraphError, match="from a Source to a Target"):
        b.add_edge(Target(1, 0), Source(1, 0))

    b.add_edge(Source(1, 0), Target(5, 0))
    with pytest.raises(GraphError, match="no node 5"):
        b.build()

    b = GraphBuilder(int, name="df")
    b.add_node(1, 1, 1, name="a")
    b.add_edge(Source(1, 2), Target(1, 0))
    with pytest.raises(GraphError, match="'a' has 1 outputs, no port 2"):
        b.build()

    b = GraphBuilder(int, name="df")
    b.add_node(1, 0, 2, name="two-outputs")
    b.add_node(2, 1, 0, name="sink")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(1, 1), Target(2, 0))
    with pytest.raises(GraphError, match="fed by both"):
        b.build()

    b = GraphBuilder(int, name="df")
    b.add_node(2, 0, 1)
    with pytest.raises(GraphError, match=r"missing \[1\]"):
        b.build()


def test_summaries_to_scope_outputs_and_scope_summary():
    # scope input 0 -> a -> feedback(+1) -> a, a -> scope output 0, b (no path to the output)
    b = GraphBuilder(int, inputs=1, outputs=1, name="s")
    b.add_node(1, 2, 1, name="a")
    b.add_node(2, 1, 1, [{0: 1}], name="feedback")
    b.add_node(3, 1, 1, [{}], name="b")
    b.add_edge(Source(0, 0), Target(1, 0))
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(1, 1))
    b.add_edge(Source(1, 0), Target(0, 0))
    b.add_edge(Source(1, 0), Target(3, 0))
    g = b.build()
    assert list(g.summaries_to_outputs(Source(2, 0))[0]) == [0]
    assert list(g.summaries_to_outputs(Target(2, 0))[0]) == [1]
    assert g.summaries_to_outputs(Target(3, 0)) == {}
    assert list(g.scope_summary[0][0]) == [0]


def test_summaries_keep_incomparable_alternatives():
    # Two paths to the output: +(1, 0) and +(0, 2): neither dominates.
    b = GraphBuilder(PP, inputs=1, outputs=1, name="s")
    b.add_node(1, 1, 1, [{0: [Product(1, 0), Product(0, 2)]}], name="either")
    b.add_edge(Source(0, 0), Target(1, 0))
    b.add_edge(Source(1, 0), Target(0, 0))
    g = b.build()
    assert g.scope_summary[0][0] == Antichain([Product(1, 0), Product(0, 2)])


# -- tracking -----------------------------------------------------------------


def check_against_reference(spec, tracker, counts):
    flat = FlatGraph(spec)
    positive = [(((0,), loc), t) for (loc, t), c in counts.items() if c > 0]
    expected = flat.frontiers(positive)
    for loc in every_location(tracker.graph):
        want = expected.get(((0,), loc), Antichain())
        assert tracker.frontier(loc) == want, f"frontier at {loc!r}: {tracker.frontier(loc)} != {want}"
    pointstamp_frontiers = sum(len(tracker.pointstamps(loc).frontier) for loc in tracker.graph.locations)
    assert tracker.total_counts == pointstamp_frontiers
    assert tracker.tracking_anything() == (pointstamp_frontiers > 0)


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 8))
def test_tracker_matches_brute_force_on_random_graphs(rng, batches):
    spec = random_scope(rng, depth=0, max_children=8)
    tracker = Tracker(graph_of(spec))
    locations = every_location(tracker.graph)
    counts: Counter = Counter()
    for _ in range(batches):
        for _ in range(rng.randint(1, 6)):
            loc = rng.choice(locations)
            t = random_time(rng, spec.ttype)
            d = rng.choice((1, 1, 2, -1))
            if rng.random() < 0.5 and counts:  # retract something that is there
                (loc, t), _ = rng.choice(sorted(counts.items(), key=repr))
                d = -1
            tracker.update(loc, t, d)
            counts[(loc, t)] += d
        tracker.propagate_all()
        check_against_reference(spec, tracker, counts)


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False))
def test_pushed_changes_sum_to_the_frontiers(rng):
    spec = random_scope(rng, depth=0, max_children=6)
    tracker = Tracker(graph_of(spec))
    locations = every_location(tracker.graph)
    frontiers: dict = {loc: Counter() for loc in locations}
    for _ in range(5):
        for _ in range(rng.randint(1, 5)):
            tracker.update(rng.choice(locations), random_time(rng, spec.ttype), rng.choice((1, -1)))
        tracker.propagate_all()
        for loc, t, d in tracker.pushed():
            frontiers[loc][t] += d
        for loc in locations:
            assert {t for t, c in frontiers[loc].items() if c} == set(tracker.frontier(loc))
            assert all(c in (0, 1) for c in frontiers[loc].values())
    assert tracker.pushed() == []


def test_loop_frontiers_step_by_step():
    spec = loop_graph()
    tracker = Tracker(graph_of(spec))
    tracker.update(Source(1, 0), 0, 1)
    tracker.propagate_all()
    assert tracker.frontier(Target(2, 1)) == Antichain([1])   # the loop's back edge: +1
    assert tracker.frontier(Target(4, 0)) == Antichain([0])
    tracker.update(Source(1, 0), 0, -1)
    tracker.update(Target(3, 0), 4, 1)                        # a record in the loop at 4
    tracker.propagate_all()
    assert tracker.frontier(Target(4, 0)) == Antichain([5])
    assert tracker.frontier(Target(3, 0)) == Antichain([4])   # the record itself
    assert tracker.frontier(Target(2, 1)) == Antichain([5])
    assert tracker.frontier(Target(2, 0)) == Antichain()      # nothing can come from the input
    assert tracker.cap_counts[1] == 0
    tracker.update(Target(3, 0), 4, -1)
    tracker.propagate_all()
    assert not tracker.tracking_anything()
    assert all(not tracker.frontier(loc) for loc in tracker.graph.locations)


def test_loop_retraction_terminates_and_empties_the_loop():
    spec = loop_graph()
    tracker = Tracker(graph_of(spec))
    tracker.update(Source(1, 0), 0, 1)
    tracker.propagate_all()
    tracker.update(Source(1, 0), 0, -1)
    tracker.propagate_all()
    assert all(not tracker.frontier(loc) for loc in tracker.graph.locations)


class WorkBudget(Exception):
    pass


def fifo_worklist(monkeypatch, budget=10_000):
    """Plant a bug: process the worklist first-in-first-out instead of smallest time first."""
    popped = [0]

    def push(work, item):
        work.append(item)

    def pop(work):
        popped[0] += 1
        if popped[0] > budget:
            raise WorkBudget(f"propagation did more than {budget} steps")
        return work.pop(0)

    monkeypatch.setattr(reachability, "heappush", push)
    monkeypatch.setattr(reachability, "heappop", pop)


def count_heap_pops(monkeypatch) -> list[int]:
    """Count the tracker's worklist steps from now on: ``popped[0]``."""
    popped = [0]
    real_pop = reachability.heappop

    def counting_pop(work):
        popped[0] += 1
        return real_pop(work)

    monkeypatch.setattr(reachability, "heappop", counting_pop)
    return popped


def test_planted_fifo_worklist_chases_a_retraction_round_the_loop(monkeypatch):
    """The loop-retraction test above must fail if the worklist is FIFO (a retraction chasing itself)."""
    fifo_worklist(monkeypatch)
    spec = loop_graph()
    tracker = Tracker(graph_of(spec))
    tracker.update(Source(1, 0), 0, 1)
    tracker.propagate_all()
    tracker.update(Source(1, 0), 0, -1)
    with pytest.raises(WorkBudget):
        tracker.propagate_all()


def chain_of(n: int):
    """Operators 1..n in a line, each feeding the next (operator 1 has no input)."""
    b = GraphBuilder(int, name="chain")
    for i in range(1, n + 1):
        b.add_node(i, 0 if i == 1 else 1, 1, name=f"op{i}")
        if i > 1:
            b.add_edge(Source(i - 1, 0), Target(i, 0))
    return b.build()


def test_propagation_work_is_proportional_to_the_change_not_the_graph(monkeypatch):
    """A count change above the frontier at the head of a 2,000-operator chain does no propagation."""
    n = 2000
    tracker = Tracker(chain_of(n))
    tracker.update(Source(1, 0), 0, 1)
    tracker.propagate_all()
    assert tracker.frontier(Target(n, 0)) == Antichain([0])

    popped = count_heap_pops(monkeypatch)
    tracker.update(Source(1, 0), 5, 1)      # dominated by 0: no frontier moves
    tracker.propagate_all()
    assert popped[0] == 0
    tracker.propagate_all()                 # nothing pending: nothing done
    assert popped[0] == 0
    tracker.update(Target(n // 2, 0), 3, 1)  # dominated where it lands: one step
    tracker.propagate_all()
    assert popped[0] == 1
    tracker.update(Source(1, 0), 0, -1)     # the frontier moves 0 -> 3 -> 5 down the chain
    tracker.propagate_all()
    assert tracker.frontier(Target(n, 0)) == Antichain([3])
    assert tracker.frontier(Target(2, 0)) == Antichain([5])


def test_is_global_says_whether_a_retraction_could_matter():
    tracker = Tracker(graph_of(loop_graph()))
    tracker.update(Source(1, 0), 0, 1)
    tracker.update(Source(1, 0), 3, 1)
    tracker.propagate_all()
    assert tracker.is_global(Source(1, 0), 0)
    assert not tracker.is_global(Source(1, 0), 3)     # shadowed by 0
    tracker.update(Source(1, 0), 0, 1)
    tracker.propagate_all()
    assert tracker.is_global(Target(4, 0), 0)         # one implication (a frontier element) at 0


def test_tracker_names_an_unknown_location():
    tracker = Tracker(graph_of(loop_graph()))
    with pytest.raises(GraphError, match="no location Target.9, 0."):
        tracker.update(Target(9, 0), 0, 1)


def test_the_least_pointstamp_counts_capabilities_and_records_in_flight_but_skipped_nodes():
    b = GraphBuilder(int, name="df")
    b.add_node(1, 0, 1, name="source")
    b.add_node(2, 1, 0, name="sink")
    b.add_node(3, 0, 1, name="snapshots")
    b.add_edge(Source(1, 0), Target(2, 0))
    tracker = Tracker(b.build())
    assert tracker.least_pointstamp() is None
    tracker.update(Source(3, 0), 1, 1)          # skipped: the snapshots' own capability
    tracker.update(Source(1, 0), 7, 1)
    tracker.update(Target(2, 0), 4, 2)          # records in flight to the sink
    tracker.propagate_all()
    assert tracker.least_pointstamp(frozenset({3})) == 4
    assert tracker.least_pointstamp() == 1
    tracker.update(Target(2, 0), 4, -2)
    tracker.propagate_all()
    assert tracker.least_pointstamp(frozenset({3})) == 7
    tracker.update(Source(1, 0), 7, -1)
    tracker.propagate_all()
    assert tracker.least_pointstamp(frozenset({3})) is None
