"""The book's safety property, on simulated workers exchanging real progress batches.

See :mod:`.simulation`. The second half plants known bugs and checks that these
tests catch each of them: a property test that cannot fail would prove nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiotimely.progress import reachability

from .graphs import random_scope
from .simulation import MUTANTS, Simulation, find_violation


def nested_graph(rng):
    return random_scope(rng, depth=2, max_children=5)


@settings(max_examples=250, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(2, 4))
def test_no_record_arrives_where_a_frontier_has_passed(rng, peers):
    sim = Simulation(nested_graph(rng), peers, rng)
    sim.run(steps=200)


# -- planted bugs ----------------------------------------------------------------
# Seeds are fixed, so these are deterministic; the bounds leave several times the
# margin measured when they were written (the first catching seed is in comments).


@pytest.mark.parametrize(
    "mutant, seeds",
    [
        ("split_batch", 100),        # caught at seed 2
        ("reorder_batches", 100),    # seed 0
        ("apply_twice", 100),        # seed 0
        ("initial_count_one", 100),  # seed 0
        ("skip_feedback", 200),      # seed 9
    ],
)
def test_planted_bug_is_caught(mutant, seeds):
    assert mutant in MUTANTS
    found = find_violation(nested_graph, 3, range(seeds), 150, mutant)
    assert found is not None, f"planted bug {mutant!r} went unnoticed in {seeds} simulations"


@pytest.mark.parametrize(
    "mutant, seeds",
    [
        ("split_batch", 300),        # caught at seed 33
        ("reorder_batches", 300),    # seed 46
        ("apply_twice", 100),        # seed 0 (by the liveness check)
        ("initial_count_one", 100),  # seed 2
        ("skip_feedback", 1500),     # seed 313
    ],
)
def test_planted_bug_is_caught_by_the_safety_check_alone(mutant, seeds):
    """Without the monotonicity check: a record really arrives where a frontier had passed."""
    found = find_violation(nested_graph, 3, range(seeds), 150, mutant, check_monotone=False)
    assert found is not None, f"planted bug {mutant!r} went unnoticed in {seeds} simulations"


class WorkBudget(Exception):
    pass


def test_planted_fifo_worklist_is_caught(monkeypatch):
    """Processing the tracker's worklist first-in-first-out lets a retraction chase itself round a loop.

    With the heap, a whole simulation of these graphs takes under 1,000 steps of
    propagation (measured); the FIFO worklist blows through 20,000.
    """
    steps = [0]

    def push(work, item):
        work.append(item)

    def pop(work):
        steps[0] += 1
        if steps[0] > 20_000:
            raise WorkBudget
        return work.pop(0)

    monkeypatch.setattr(reachability, "heappush", push)
    monkeypatch.setattr(reachability, "heappop", pop)
    import random

    for seed in range(50):  # caught at seed 4
        steps[0] = 0
        rng = random.Random(seed)
        try:
            Simulation(nested_graph(rng), 3, rng).run(150)
        except WorkBudget:
            return
    pytest.fail("a FIFO worklist went unnoticed")
