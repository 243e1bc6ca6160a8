"""Dataflows under test, at the top level of a module so that the processes of ``run_processes`` import them."""

from __future__ import annotations

import asyncio

import aiotimely as at
from aiotimely.testing import schedule, script_source

TEXT = ["a b", "b c", "c c a", "d"]
EVENTS = schedule([(t % 7, f"w{t % 3}") for t in range(30)], shuffle=11)
"""Words at times 0..6, in a shuffled order, the frontier moving as soon as it can."""


def word_counts(scope: at.Scope) -> at.Stream:
    """Per time, each word and how often it came: the words start on every worker and meet by key."""
    return script_source(scope, EVENTS).map(lambda w: (w, 1)).reduce(lambda a, b: a + b)


def text_and_counts(scope: at.Scope) -> dict[str, at.Stream]:
    """Two named outputs: the words of ``TEXT`` (split over the workers) and their counts."""
    lines = at.to_stream(TEXT[scope.worker.index::scope.worker.peers], scope)
    words = lines.flat_map(str.split)
    return {"words": words, "counts": words.map(lambda w: (w, 1)).reduce(lambda a, b: a + b)}


def lists_stay_lists(scope: at.Scope) -> at.Stream:
    """Records that are lists, exchanged between workers."""
    return at.to_stream([[scope.worker.index, i] for i in range(3)], scope).exchange(lambda r: r[1])


def fails(scope: at.Scope) -> at.Stream:
    """A dataflow whose operator fails on worker 1 (of any process) only."""
    return at.to_stream([scope.worker.index], scope).map(lambda i: 1 // (1 - i))



def never_ends(scope: at.Scope) -> at.Stream:
    """A source that holds its capability and never sends again."""

    async def stuck(output, cap):
        output.session(cap).give("started")
        await asyncio.Event().wait()

    return at.source(scope, "Stuck", stuck)
