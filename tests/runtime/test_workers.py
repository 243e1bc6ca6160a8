"""Several workers in one process: the results do not depend on how many there are."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import collatz  # noqa: E402
import wordcount  # noqa: E402

words = st.sampled_from(["a", "b", "c", "dd", "eee", "ffff", "g"])
rounds_of_text = st.lists(st.lists(words, max_size=8).map(" ".join), min_size=1, max_size=6)


def final_counts(results) -> dict:
    final: dict = {}
    for worker_results in results:
        for _t, (word, count) in sorted(worker_results):
            final[word] = max(final.get(word, 0), count)
    return final


@settings(max_examples=25, deadline=None)
@given(rounds_of_text, st.integers(1, 4))
def test_wordcount_is_the_same_on_any_number_of_workers(lines, workers):
    text = "\n".join(lines)
    results = at.execute(lambda w: wordcount.build(w, text=text), workers=workers, loop="asyncio")
    expected = Counter(word for line in lines for word in line.split())
    assert final_counts(results) == dict(expected)
    # every update is emitted at the round of its line, in order per word
    for worker_results in results:
        per_word: dict = {}
        for t, (word, count) in worker_results:
            assert count > per_word.get(word, (0, -1))[0] and t >= per_word.get(word, (0, -1))[1]
            per_word[word] = (count, t)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 4))
def test_exchange_and_aggregate_do_not_depend_on_worker_count(values, workers):
    def build(worker):
        inp = at.InputHandle()
        sums = []
        worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda x: x % 7)
                        .accumulate(0, lambda acc, xs: acc + sum(xs)).inspect_time(lambda t, x: sums.append((t, x))))
        for i, v in enumerate(sorted(values)):
            if i % worker.peers == worker.index:
                inp.advance_to(v // 10)
                inp.send(v)
        return sums

    results = at.execute(build, workers=workers, loop="asyncio")
    per_time: Counter = Counter()
    for sums in results:
        for t, x in sums:
            per_time[t] += x
    expected: Counter = Counter()
    for v in values:
        expected[v // 10] += v
    assert +per_time == +expected


def test_nested_iteration_across_workers_matches_one_worker(run):
    one = {n: s for r in run(lambda w: collatz.build(w, limit=40)) for n, s in r["steps"].items()}
    three = {n: s for r in run(lambda w: collatz.build(w, limit=40), workers=3) for n, s in r["steps"].items()}
    assert one == three and len(one) == 40
    assert one[27] == 111 and one[1] == 3


def test_iteration_inside_a_region_inside_an_iterative_scope(run):
    """Two levels of nesting: a region in an iterative scope, records counting down round by round."""

    def build(worker):
        out = []

        def make(scope):
            numbers = at.to_stream([3, 5], scope) if worker.index == 0 else at.to_stream([], scope)
            with scope.iterative(name="outer") as loop:
                handle, again = loop.feedback(1)
                with loop.region(name="inner") as region:
                    stepped = numbers.enter(loop).concat(again).enter(region).map(lambda n: n - 1).leave()
                more, done = stepped.branch(lambda n: n <= 0)
                more.exchange(lambda n: n).connect_loop(handle)
                done.inspect_time(lambda t, n: out.append((t, n))).leave()

        worker.dataflow(make)
        return out

    results = [x for r in run(build, workers=2) for x in r]
    assert sorted(results) == [(at.Product(0, 2), 0), (at.Product(0, 4), 0)]


class Label(str):
    """A subclass of ``str``: equal to the plain string, so it must go where that string goes."""


FEW = st.sampled_from(["", "a", "bc", "word"])   # (so that a Label and the plain string it equals meet)
KEYS = st.one_of(st.text(max_size=4), FEW, FEW.map(Label), st.integers(-5, 2**70), st.booleans(), st.none(),
                 st.floats(allow_nan=False), st.tuples(st.text(max_size=2), st.integers(-3, 3)))


@settings(max_examples=200, deadline=None)
@given(st.lists(KEYS, min_size=32, max_size=100), st.integers(1, 5))
def test_an_exchange_sends_every_record_where_its_key_routes_whatever_the_mix_of_key_types(keys, peers):
    """Every record of a batch goes to the worker ``route`` names for its key (the same in every process), with
    string routes remembered or not, and keys of every type mixed in one batch."""
    from aiotimely.comm.routing import route
    from aiotimely.dataflow.channels import ExchangePusher

    class Box:
        def __init__(self):
            self.got = []

        def push(self, item):
            self.got.append(item)

    class Worker:
        logging = None
        index = 0

    records = list(enumerate(keys))
    boxes = [Box() for _ in range(peers)]
    pusher = ExchangePusher(lambda r: r[1], boxes, Worker(), (0, 0))
    # again and again: string routes remembered, and the pusher guessing each batch's keys from the last one's
    sent = [records, records, records[::-1], [r for r in records if type(r[1]) is int], records]
    for time, batch in enumerate(sent):
        pusher(time, list(batch))
    for time, batch in enumerate(sent):
        for w, box in enumerate(boxes):
            got = [r for t, part in box.got if t == time for r in part]
            assert got == [r for r in batch if route(r[1], peers) == w]


def test_a_failing_key_deep_in_a_batch_is_named_with_its_record(run):
    def build(worker):
        worker.dataflow(lambda s: at.to_stream([list(range(100)) + [[7]]], s).flat_map(lambda xs: xs)
                        .exchange(lambda x: x).probe(), name="keys")     # [7] cannot be hashed

    with pytest.raises(at.DataflowError, match=r"operator 'Exchange'.*the exchange key of record \[7\]"):
        run(build, workers=2)
