"""The tracker's least-time path: totally ordered times in a graph without cycles.

There a location's implications are one least time, recomputed once per changed
location in topological order (``Tracker._propagate_least``), instead of the
counting algorithm's change-by-change work list. Both must give the same frontiers,
the same pushed changes, the same projections onto scope outputs and the same
answers to every question asked of the tracker; and the brute-force reference
decides between them.
"""

from __future__ import annotations

import inspect
import textwrap
from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aiotimely.progress import GraphBuilder, Source, Target, Tracker
from aiotimely.progress.timestamp import INT, ProductType
from aiotimely.progress import reachability

from .test_reachability import chain_of
from .test_transparent import build, check, random_changes, random_graph


def counting(graph) -> Tracker:
    """A tracker that always uses the counting algorithm (what the least-time path is checked against)."""
    tracker = Tracker(graph)
    tracker._least = None
    return tracker


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 8))
def test_least_times_match_the_counting_algorithm_and_brute_force(rng, rounds):
    spec, transparent = random_graph(rng)
    graph = build(spec, transparent)
    assume(graph.rank is not None)          # totally ordered (ints) and no feedback edge
    fast, slow = Tracker(graph), counting(graph)
    assert fast._least is not None
    counts: Counter = Counter()
    pushed: dict = {loc: Counter() for loc in graph.locations}
    for round in range(rounds):
        before = Counter(counts)
        random_changes(rng, fast, counts, spec.ttype, first=round == 0)
        for (loc, t), d in (counts - before).items():
            slow.update(loc, t, d)
        for (loc, t), d in (before - counts).items():
            slow.update(loc, t, -d)
        fast.propagate_all()
        slow.propagate_all()
        changes = fast.pushed()
        assert sorted(changes, key=repr) == sorted(slow.pushed(), key=repr)
        for o in range(graph.scope_outputs):
            assert sorted(fast.pushed_output(o)) == sorted(slow.pushed_output(o))
        for loc, t, d in changes:
            pushed[loc][t] += d
        check(spec, fast, counts, pushed)
        assert fast.cap_counts == slow.cap_counts and fast.total_counts == slow.total_counts
        for loc in graph.locations:
            assert fast.frontier(loc) == slow.frontier(loc)
            for t in range(4):
                assert fast.is_global(loc, t) == slow.is_global(loc, t), (loc, t)


def test_a_graph_with_a_cycle_or_partially_ordered_times_counts():
    b = GraphBuilder(int, name="loop")
    b.add_node(1, 1, 1, name="step")
    b.add_node(2, 1, 1, [{0: 1}], name="feedback")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(1, 0))
    assert b.build().rank is None and Tracker(b.build())._least is None
    pairs = GraphBuilder(ProductType(INT, INT), name="pairs")
    pairs.add_node(1, 0, 1, name="source")
    assert Tracker(pairs.build())._least is None


def test_a_chain_moves_in_one_step_per_location(monkeypatch):
    """Each location whose least time may change is looked at once, in topological order."""
    n = 50
    tracker = Tracker(chain_of(n))
    tracker.update(Source(1, 0), 0, 1)
    tracker.update(Source(n // 2, 0), 0, 1)
    tracker.propagate_all()
    popped: list[int] = []
    real = reachability.heappop
    monkeypatch.setattr(reachability, "heappop", lambda heap: (popped.append(heap[0]), real(heap))[1])
    tracker.update(Source(1, 0), 0, -1)
    tracker.update(Source(1, 0), 7, 1)
    tracker.update(Source(n // 2, 0), 0, -1)
    tracker.update(Source(n // 2, 0), 3, 1)
    tracker.propagate_all()
    assert tracker.frontier(Target(n // 2, 0)) == tracker.frontier(Target(2, 0))
    assert list(tracker.frontier(Target(n, 0))) == [3] and list(tracker.frontier(Target(2, 0))) == [7]
    looked_at = [r for i, r in enumerate(popped) if i == 0 or popped[i - 1] != r]   # (a repeat is skipped)
    assert looked_at == sorted(set(popped)) and len(looked_at) == 2 * n - 1   # every location once, in order


PLANTED = {
    "summaries ignored": ("if s is not None:", "if False:"),
    "own pointstamps ignored": ("best = own._frontier[0] if own is not None and own._frontier else None",
                                "best = None"),
    "first successor only": ("for r in after[loc]:", "for r in after[loc][:1]:"),
    "emptying not pushed": ("if old is not None:", "if old is not None and best is not None:"),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_in_the_least_time_path_are_caught(monkeypatch, bug):
    """The property test above must fail on each of these, planted in ``Tracker._propagate_least``'s source."""
    old, new = PLANTED[bug]
    source = textwrap.dedent(inspect.getsource(Tracker._propagate_least))
    assert source.count(old) == 1, f"the planted bug no longer applies: {old!r}"
    namespace: dict = {}
    exec(compile(source.replace(old, new), reachability.__file__, "exec"), vars(reachability), namespace)
    monkeypatch.setattr(Tracker, "_propagate_least", namespace["_propagate_least"])
    with pytest.raises(AssertionError):
        test_least_times_match_the_counting_algorithm_and_brute_force()
