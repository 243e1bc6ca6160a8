"""Nested scopes: subgraphs against the brute-force reference, entering and leaving, dormancy."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiotimely.errors import ProgressError
from aiotimely.progress import (
    INT,
    Antichain,
    FrontierInterest,
    OperatorProgress,
    Product,
    Refinement,
    Source,
    Subgraph,
    SubgraphBuilder,
    Target,
)

from .driver import Cluster, build_tree, run_round, scopes, settle_alone
from .graphs import random_scope, random_time
from .reference import FlatGraph

NEVER, IF_CAPABILITY, ALWAYS = FrontierInterest.NEVER, FrontierInterest.IF_CAPABILITY, FrontierInterest.ALWAYS


def assert_matches_reference(spec, root: Subgraph, counts: Counter) -> None:
    positive = [((path, loc), t) for (path, loc, t), c in counts.items() if c > 0]
    expected = FlatGraph(spec).frontiers(positive)
    for scope in scopes(root):
        for loc in scope.graph.locations:
            want = expected.get((scope.path, loc), Antichain())
            got = scope.frontier(loc)
            assert got == want, f"scope {scope.path} {loc!r}: {got} != {want}"


@settings(max_examples=120, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 6), st.booleans())
def test_nested_scopes_match_brute_force(rng, batches, direct):
    """Also with reports collected straight into the trackers (one worker, no batches), as the runtime does."""
    spec = random_scope(rng, depth=2, max_children=5)
    root, ops = build_tree(spec)
    specs = dict(spec.walk())
    ttypes = {path: scope.ttype for path, scope in specs.items()}
    counts: Counter = Counter()
    for (path, c), op in ops.items():  # every operator starts with a capability per output
        for o in range(op.outputs):
            counts[(path, Source(c, o), ttypes[path].minimum)] += 1
    settle_alone(root, direct=direct)
    assert_matches_reference(spec, root, counts)
    if not ops:
        return
    keys = sorted(ops, key=repr)
    for _ in range(batches):
        for _ in range(rng.randint(1, 6)):
            path, c = rng.choice(keys)
            op = ops[(path, c)]
            t = random_time(rng, ttypes[path])
            d = rng.choice((1, 1, -1))
            if op.outputs and (not op.inputs or rng.random() < 0.5):
                o = rng.randrange(op.outputs)
                targets = [target for source, target in specs[path].edges if source == Source(c, o)]
                if targets and all(target.node for target in targets) and rng.random() < 0.3:
                    op.shared.produceds[o].update(t, d)          # records sent, in flight at every target
                    for target in targets:
                        counts[(path, target, t)] += d
                else:
                    op.shared.internals[o].update(t, d)
                    counts[(path, Source(c, o), t)] += d
            elif op.inputs:
                i = rng.randrange(op.inputs)
                op.shared.consumeds[i].update(t, -d)     # consuming n records is -n in flight
                counts[(path, Target(c, i), t)] += d
        settle_alone(root, direct=direct)
        assert_matches_reference(spec, root, counts)


def iterate_graph(peers: int = 1, worker: int = 0):
    """input -> iterate{ body <-> feedback(+(0, 1)), body -> out } -> sink, built by hand."""
    root = SubgraphBuilder(Refinement.region(INT), name="dataflow", peers=peers, worker=worker)
    inp = OperatorProgress("input", 0, 1)
    loop = SubgraphBuilder(Refinement.iterative(INT), inputs=1, outputs=1, name="iterate", path=(0, 2),
                           peers=peers, worker=worker)
    body = OperatorProgress("body", 2, 1, interest=NEVER)
    feedback = OperatorProgress("feedback", 1, 1, connectivity=[{0: Product(0, 1)}], interest=NEVER)
    loop.add_child(body)
    loop.add_child(feedback)
    loop.add_edge(Source(0, 0), Target(1, 0))
    loop.add_edge(Source(1, 0), Target(2, 0))
    loop.add_edge(Source(2, 0), Target(1, 1))
    loop.add_edge(Source(1, 0), Target(0, 0))
    iterate = loop.build()
    sink = OperatorProgress("sink", 1, 0)
    assert root.add_child(inp) == 1
    assert root.add_child(iterate) == 2
    assert root.add_child(sink) == 3
    root.add_edge(Source(1, 0), Target(2, 0))
    root.add_edge(Source(2, 0), Target(3, 0))
    return root.build(), inp, iterate, body, feedback


def test_a_loop_summarises_to_its_outer_effect():
    top, inp, iterate, body, feedback = iterate_graph()
    assert iterate.connectivity == [{0: Antichain([0])}]   # the loop's +(0, 1) vanishes outside
    assert iterate.interest == [IF_CAPABILITY]


@pytest.mark.parametrize("direct", [False, True], ids=["batches", "direct"])
def test_records_enter_circulate_and_leave_an_iterative_scope(direct):
    top, inp, iterate, body, feedback = iterate_graph()
    # body and feedback give up their initial capabilities, as map-like operators do
    body.shared.internals[0].update(Product(0, 0), -1)
    feedback.shared.internals[0].update(Product(0, 0), -1)
    settle_alone(top, direct=direct)
    assert top.frontier(Target(3, 0)) == Antichain([0])          # the input still holds 0
    assert iterate.frontier(Target(1, 0)) == Antichain([Product(0, 0)])

    # The input sends one record at 5 into the loop, and moves its capability to 6.
    inp.shared.produceds[0].update(5, 1)
    inp.shared.internals[0].extend([(6, 1), (0, -1)])
    iterate.entered(0, Product(5, 0), 1)             # the Enter side, on arrival
    settle_alone(top, direct=direct)
    assert iterate.frontier(Target(1, 0)) == Antichain([Product(5, 0)])
    assert iterate.frontier(Target(1, 1)) == Antichain([Product(5, 1)])
    assert top.frontier(Target(3, 0)) == Antichain([5])          # the record could leave at 5
    assert top.frontier(Target(2, 0)) == Antichain([6])          # harvested: the loop consumed it

    # The body consumes it at (5, 0) and sends it round: one record at (5, 0) to feedback.
    body.shared.consumeds[0].update(Product(5, 0), 1)
    body.shared.produceds[0].update(Product(5, 0), 1)
    settle_alone(top, direct=direct)
    assert iterate.frontier(Target(1, 1)) == Antichain([Product(5, 1)])
    # feedback turns it into (5, 1) at the body's second input
    feedback.shared.consumeds[0].update(Product(5, 0), 1)
    feedback.shared.produceds[0].update(Product(5, 1), 1)
    settle_alone(top, direct=direct)
    # the body may send (5, 1) on to the feedback; a new input record could bring (6, 0)
    assert iterate.frontier(Target(2, 0)) == Antichain([Product(5, 1), Product(6, 0)])
    assert top.frontier(Target(3, 0)) == Antichain([5])          # (5, 0) also left the loop
    # the body consumes it and sends it on again: it leaves too, and goes round once more
    body.shared.consumeds[1].update(Product(5, 1), 1)
    body.shared.produceds[0].update(Product(5, 1), 1)
    settle_alone(top, direct=direct)
    assert top.frontier(Target(3, 0)) == Antichain([5])
    # the feedback drops what it got (as a bounded loop would); the sink consumes both outputs
    feedback.shared.consumeds[0].update(Product(5, 1), 1)
    top.children[3].shared.consumeds[0].update(5, 2)
    settle_alone(top, direct=direct)
    assert top.frontier(Target(3, 0)) == Antichain([6])
    assert iterate.tracking_anything()                          # the input may still send at 6
    # the input closes: everything completes
    inp.shared.internals[0].update(6, -1)
    settle_alone(top, direct=direct)
    assert not top.tracking_anything() and not iterate.tracking_anything()
    assert all(not scope.frontier(loc) for scope in scopes(top) for loc in scope.graph.locations)
    # every count came back to zero (a record that left the loop uncounted would be -1 at the sink)
    assert all(not scope.tracker.pointstamps(loc).updates() for scope in scopes(top) for loc in scope.graph.locations)


def test_initial_capabilities_are_one_per_worker():
    built = [iterate_graph(peers=3, worker=w) for w in range(3)]
    cluster = Cluster([b[0] for b in built])
    cluster.settle()
    for top, *_ in built:
        assert top.tracker.pointstamps(Source(1, 0)).count_for(0) == 3
    for w in range(2):
        built[w][1].shared.internals[0].update(0, -1)      # input on worker w drops its capability
        cluster.settle()
        for top, *_ in built:
            assert top.frontier(Target(2, 0)) == Antichain([0])   # one worker still holds 0
    built[2][1].shared.internals[0].update(0, -1)
    cluster.settle()
    for top, *_ in built:
        assert top.frontier(Target(2, 0)) == Antichain()       # every worker released the input
        assert top.frontier(Target(3, 0)) == Antichain([0])    # the loop's operators still hold 0


@pytest.mark.parametrize("direct", [False, True], ids=["batches", "direct"])
def test_records_sent_to_two_consumers_hold_both(direct):
    builder = SubgraphBuilder(Refinement.region(INT), name="fan-out")
    source = OperatorProgress("source", 0, 1)
    left, right = OperatorProgress("left", 1, 0), OperatorProgress("right", 1, 0)
    for op in (source, left, right):
        builder.add_child(op)
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(1, 0), Target(3, 0))
    top = builder.build()
    source.shared.produceds[0].update(5, 2)                 # two records at 5, to both consumers
    source.shared.internals[0].extend([(0, -1)])            # and the source is done
    settle_alone(top, direct=direct)
    assert top.frontier(Target(2, 0)) == top.frontier(Target(3, 0)) == Antichain([5])
    left.shared.consumeds[0].update(5, 2)
    settle_alone(top, direct=direct)
    assert top.frontier(Target(2, 0)) == Antichain() and top.frontier(Target(3, 0)) == Antichain([5])
    right.shared.consumeds[0].update(5, 2)
    settle_alone(top, direct=direct)
    assert not top.tracking_anything()


def test_direct_reports_are_for_one_worker():
    top = iterate_graph(peers=2)[0]
    with pytest.raises(ProgressError, match="direct reports are for one worker, there are 2"):
        top.collect(1, direct=True)


def region_graph(n_filters: int, inner_interest: FrontierInterest):
    """input -> region{ filter x n } -> probe: the 100x post's shape."""
    root = SubgraphBuilder(Refinement.region(INT), name="dataflow")
    inp = OperatorProgress("input", 0, 1)
    region = SubgraphBuilder(Refinement.region(INT), inputs=1, outputs=1, name="region", path=(0, 2))
    filters = [OperatorProgress(f"filter{i}", 1, 1, interest=inner_interest) for i in range(n_filters)]
    for i, f in enumerate(filters, 1):
        region.add_child(f)
        region.add_edge(Source(i - 1, 0), Target(i, 0))
    region.add_edge(Source(n_filters, 0), Target(0, 0))
    reg = region.build()
    probe = OperatorProgress("probe", 1, 0, interest=ALWAYS)
    root.add_child(inp)
    root.add_child(reg)
    root.add_child(probe)
    root.add_edge(Source(1, 0), Target(2, 0))
    root.add_edge(Source(2, 0), Target(3, 0))
    top = root.build()
    for f in filters:
        f.shared.internals[0].update(0, -1)
    settle_alone(top)
    return top, inp, reg, filters, probe


def drive_activated_only(top):
    """A round as the runtime does it: run only the children progress asked for."""
    visited = []
    by_path = {s.path: s for s in scopes(top)}

    def send(batch):
        by_path[batch.path].receive(batch)

    def round_(sub):
        active = sub.propagate()
        for c in active:
            visited.append((sub.path, c))
            child = sub.children[c]
            if isinstance(child, Subgraph):
                round_(child)
            sub.extract(c)
        batch = sub.send()
        if batch:
            send(batch)

    for _ in range(3):
        round_(top)
    return visited


def test_a_dormant_region_is_not_visited_when_time_advances():
    top, inp, region, filters, probe = region_graph(100, NEVER)
    assert region.interest == [IF_CAPABILITY]
    assert top.tracker.cap_counts[2] == 0            # nothing inside holds a capability
    for t in range(1, 50):
        inp.shared.internals[0].extend([(t, 1), (t - 1, -1)])
        top.extract(1)                              # the input operator ran
        visited = drive_activated_only(top)
        assert (top.path, 2) not in visited         # the region is never run
        assert (top.path, 3) in visited             # the probe (ALWAYS) is
        assert not any(path == region.path for path, _ in visited)
    assert top.frontier(Target(3, 0)) == Antichain([49])
    # the parent's frontier changes wait, consolidated, at the region's door
    assert len(region.shared.frontiers[0]) == 2
    assert region.frontier(Target(50, 0)) == Antichain([0])     # stale inside, by design
    # once the region runs, it catches up at once
    run_round(region, lambda batch: region.receive(batch))
    assert region.frontier(Target(50, 0)) == Antichain([49])


def test_a_region_holding_a_capability_is_woken_by_time():
    top, inp, region, filters, probe = region_graph(10, IF_CAPABILITY)
    filters[4].shared.internals[0].update(0, 1)     # one inner operator holds a capability
    settle_alone(top)
    assert top.tracker.cap_counts[2] > 0
    inp.shared.internals[0].extend([(1, 1), (0, -1)])
    top.extract(1)
    visited = drive_activated_only(top)
    assert (top.path, 2) in visited
    assert (region.path, 5) in visited              # the holder is woken (IF_CAPABILITY)
    assert (region.path, 4) not in visited          # the others hold nothing


def test_data_arrival_activates_the_consumer():
    top, inp, region, filters, probe = region_graph(3, NEVER)
    inp.shared.produceds[0].update(0, 4)
    consumers = top.extract(1)
    assert consumers == [2]
