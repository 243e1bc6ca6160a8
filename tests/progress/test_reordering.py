"""Progress stays exact when batches between workers arrive late and out of order.

Real dataflows (exchange, a keyed count by time driven by the frontier, a feedback
loop, probes) run on 2–4 workers over :class:`~aiotimely.testing.ReorderingFabric`:
every data and progress batch between workers is delayed by a seeded random number
of event-loop turns, and lanes are delivered in a random order, keeping only what
timely keeps (progress FIFO per sender, receiver and scope; data FIFO per channel
by default). The outputs must be exactly a plain model's and the ordinary fabric's.

The count operator is the safety check (PROGRESS.md §7): it emits a time once its
frontier passed it and raises if a record ever comes at a time it closed, or if its
frontier goes backwards; a probe must never say a time is complete while records at
it are still on their way to it. The last tests plant a bug in the fabric (progress
batches of one sender overtaking each other) and check that these tests catch it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter, defaultdict
from time import monotonic
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.progress import ProgressBatch
from aiotimely.testing import (DataflowTimeout, ReorderingFabric, Script, execute_reordered, run_dataflow,
                               run_reordered, schedule, script_source)
from aiotimely.testing.fabric import Kind
from aiotimely.testing.strategies import event_streams

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
FEW = settings(max_examples=40, deadline=None)


class ClosedTime(AssertionError):
    """A record reached a frontier-driven operator at a time it had closed, or its frontier went back."""


def count_by_time(stream: at.Stream, *, group: Callable[[Any], Any] = lambda r: r[0],
                  route: Callable[[Any], Any] = lambda r: r[0], name: str = "CountByTime") -> at.Stream:
    """Per time, once the frontier passed it: ``(group, count)`` for every group seen at that time (records
    exchanged by ``route``). Raises :class:`ClosedTime` if its frontier goes backwards or a record comes at a time
    already closed."""

    @stream.unary_frontier(exchange=route, name=name)
    async def count(input, output, cap):
        cap.drop()
        pending: dict[Any, tuple[Any, Counter]] = {}
        closed: set[Any] = set()
        previous = None
        async for _ in input.activations():
            frontier = input.frontier
            if previous is not None and not previous.dominates(frontier):
                raise ClosedTime(f"{name}: the frontier went back from {previous} to {frontier}")
            previous = frontier
            for ref, batch in input.drain():
                time = ref.time
                if time in closed or not frontier.less_equal(time):
                    raise ClosedTime(f"{name}: {len(batch)} records at {time!r} came after the frontier passed it "
                                     f"(frontier {frontier}, closed {sorted(closed)}): {batch[:5]}")
                held = pending.get(time)
                if held is None:
                    held = pending[time] = (ref.retain(), Counter())
                held[1].update(group(r) for r in batch)
            for time in [t for t in pending if not frontier.less_equal(t)]:
                cap_t, counts = pending.pop(time)
                closed.add(time)
                with cap_t:
                    session = output.session(cap_t)
                    for g, n in sorted(counts.items()):
                        session.give((g, n))

    return count


def model_counts(events: list[tuple[Any, Any]], group: Callable[[Any], Any] = lambda r: r[0]) -> dict[Any, list]:
    by_time: dict[Any, Counter] = defaultdict(Counter)
    for time, record in events:
        by_time[time][group(record)] += 1
    return {t: sorted(c.items()) for t, c in by_time.items()}


# -- dataflows ----------------------------------------------------------------------------------------------------


def keyed_counts(script: Script) -> Callable[[at.Scope], at.Stream]:
    """Records ``(key, n)`` from every worker, exchanged by key and counted per key per time."""

    def build(scope):
        return count_by_time(script_source(scope, script))

    return build


def looped(script: Script) -> Callable[[at.Scope], dict[str, at.Stream]]:
    """Records ``(key, n)`` go round a loop ``n`` more times, exchanged by key on every round, counted per key and
    round inside the loop (Product times); what leaves is counted per key per outer time."""

    def build(scope):
        entering = script_source(scope, script).map(lambda r: (r[0], r[1], 0))
        with scope.iterative(name="rounds") as loop:
            handle, again = loop.feedback(1)
            going = entering.enter(loop).concat(again).exchange(lambda r: r[0])
            going.filter(lambda r: r[1] > 0).map(lambda r: (r[0], r[1] - 1, r[2] + 1)).connect_loop(handle)
            rounds = count_by_time(going, group=lambda r: (r[0], r[2]), name="PerRound")
            left = going.leave()
            per_round = rounds.map(lambda gn: (gn[0][0], gn[0][1], gn[1])).leave()
        return {"totals": count_by_time(left, name="Totals"), "rounds": per_round}

    return build


def looped_model(script: Script) -> dict[str, dict[Any, list]]:
    totals: list[tuple[Any, Any]] = []
    rounds: dict[Any, Counter] = defaultdict(Counter)
    for time, (key, n) in script.events():
        for r in range(n + 1):
            totals.append((time, (key,)))
            rounds[time][(key, r)] += 1
    return {"totals": model_counts(totals),
            "rounds": {t: sorted((k, r, n) for (k, r), n in c.items()) for t, c in rounds.items()}}


def scripts(max_n: int = 0) -> st.SearchStrategy[Script]:
    return event_streams(st.tuples(KEYS, st.integers(0, max_n)), max_time=5, min_size=1, max_size=30)


# -- exact under reordering -----------------------------------------------------------------------------------------


@FEW
@given(scripts(), st.integers(2, 4), st.integers(0, 2**32 - 1), st.integers(1, 12), st.booleans())
def test_keyed_counts_by_time_are_exact_when_batches_are_delayed_and_reordered(script, workers, seed, max_delay,
                                                                                data_fifo):
    build = keyed_counts(script)
    fabric = ReorderingFabric(workers, seed=seed, max_delay=max_delay, data_fifo=data_fifo)
    out = run_reordered(build, workers, fabric=fabric)
    assert out == model_counts(script.events())
    assert out == run_dataflow(build, workers=workers)
    assert out.complete() and fabric.in_flight() == 0 and fabric.statistics().longest_wait <= max_delay


@FEW
@given(scripts(max_n=3), st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_a_loop_exchanging_every_round_is_exact_when_batches_are_delayed_and_reordered(script, workers, seed):
    build = looped(script)
    out = run_reordered(build, workers, seed=seed)
    expected = looped_model(script)
    assert out["totals"] == expected["totals"] and out["rounds"] == expected["rounds"]
    plain = run_dataflow(build, workers=workers)
    assert out["totals"] == plain["totals"] and out["rounds"] == plain["rounds"]


def probed(epochs: list[list[tuple[str, int]]], seen: dict[int, list], checks: list[int]) -> Callable[[at.Worker], Any]:
    """Each worker feeds its share of each epoch, advances, and waits on a probe after the keyed count: once the
    probe says an epoch is complete, every count at it (counted on any worker) must be there already, and final."""
    expected = {e: sorted(Counter(k for k, _ in events).items()) for e, events in enumerate(epochs) if events}

    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: count_by_time(inp.to_stream(s))
                                .inspect_time(lambda t, r: seen[t].append(r)).probe())
        me, peers = worker.index, worker.peers
        for epoch, events in enumerate(epochs):
            inp.send_batch(events[me::peers])
            inp.advance_to(epoch + 1)
            await probe.wait_beyond(epoch)
            assert not probe.less_equal(epoch)
            for done in range(epoch + 1):   # complete means complete: nothing more, nothing missing
                assert sorted(seen.get(done, [])) == expected.get(done, []), (
                    f"worker {me}: the probe passed {epoch}, but time {done} has {sorted(seen.get(done, []))}")
            checks.append(epoch)
        inp.close()

    return build


@FEW
@given(st.lists(st.lists(st.tuples(KEYS, st.integers(0, 9)), max_size=8), min_size=1, max_size=5),
       st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_a_probe_never_reports_a_time_complete_while_records_at_it_are_in_flight(epochs, workers, seed):
    seen: dict[int, list] = defaultdict(list)
    checks: list[int] = []
    execute_reordered(probed(epochs, seen, checks), workers, seed=seed)
    assert sorted(checks) == sorted(e for e in range(len(epochs)) for _ in range(workers))


# -- the fabric itself -------------------------------------------------------------------------------------------


def test_a_seed_gives_the_same_run_and_batches_really_overtake_each_other():
    script = Script([(t % 4, (k, 1)) for t in range(24) for k in "abc"])
    runs = []
    for seed in (5, 5, 6):
        fabric = ReorderingFabric(3, seed=seed)
        out = run_reordered(looped(script), 3, fabric=fabric)
        runs.append((fabric.statistics(), {w: list(o.pairs()) for w, o in out["totals"].workers.items()}))
    assert runs[0] == runs[1]
    assert runs[0][0] != runs[2][0]
    stats = runs[0][0]
    assert stats.overtaken > 0 and stats.delayed > stats.sent // 2 and stats.in_flight == 0


def test_delays_are_bounded_and_an_idle_computation_is_not_stuck_while_batches_are_in_flight():
    # one record, all progress in flight while every worker waits: the fabric delivers, nothing is called stuck
    fabric = ReorderingFabric(2, seed=1, max_delay=50)
    out = run_reordered(lambda s: at.to_stream([("a", 1)] if s.worker.index == 0 else [], s).exchange(
        lambda r: r[0]), 2, fabric=fabric)
    assert out == {0: [("a", 1)]}
    stats = fabric.statistics()
    assert 0 < stats.longest_wait <= 50 and stats.in_flight == 0


def test_a_dataflow_that_really_is_stuck_is_still_reported():
    def stuck(scope):
        async def hoarder(input, output, cap):
            cap.drop()
            held = []
            async for _ in input.activations():
                for time, _batch in input.drain():
                    held.append(time.delayed(time.time + 1))   # kept, never dropped

        return at.to_stream([1, 2, 3], scope).exchange(lambda x: x).unary(hoarder, name="Hoarder")

    with pytest.raises(at.DataflowError, match="cannot complete.*'Hoarder'"):
        run_reordered(stuck, 2, seed=3, timeout=20)


def test_a_fabric_of_other_size_or_used_twice_is_refused():
    with pytest.raises(ValueError, match="connects 2 workers, not 3"):
        run_reordered(lambda s: at.to_stream([], s), 3, fabric=ReorderingFabric(2))
    fabric = ReorderingFabric(2)
    assert run_reordered(lambda s: at.to_stream([1], s), 2, fabric=fabric) == {0: [1, 1]}
    with pytest.raises(ValueError, match="make a new one for each run"):
        run_reordered(lambda s: at.to_stream([1], s), 2, fabric=fabric)


def test_a_run_that_does_not_finish_times_out_promptly():
    def forever(scope):
        async def logic(output, cap):
            await asyncio.Event().wait()

        return at.source(scope, "Forever", logic)

    start = monotonic()
    with pytest.raises(DataflowTimeout, match="did not complete within 0.3 s"):
        run_reordered(forever, 2, seed=0, timeout=0.3)
    assert monotonic() - start < 5


# -- planted bugs: progress batches of one sender overtaking each other ----------------------------------------------
# Progress overtaking data is fine (the sender's batch carries the count of the records it sent); a worker's
# progress batches overtaking each other is not, and the progress channel itself refuses it (batches are
# numbered). With the numbers rewritten to look in order, as a protocol without them would see it, the checks
# above must catch it. Seeds are fixed, so these are deterministic; the first catching seed is in a comment.


class ProgressOutOfOrder(ReorderingFabric):
    """A broken fabric: every progress batch on a lane of its own, so a worker's later batch (a release) may reach
    another worker before an earlier one (the acquire it undoes, the records it counts)."""

    def __init__(self, peers: int, **options: Any) -> None:
        super().__init__(peers, **options)
        self.batches = itertools.count()

    def lane(self, sender: int, receiver: int, channel: Any, kind: Kind) -> Any:
        if kind == "progress":
            return ("progress", sender, receiver, channel, next(self.batches))
        return super().lane(sender, receiver, channel, kind)


class ProgressOutOfOrderRenumbered(ProgressOutOfOrder):
    """:class:`ProgressOutOfOrder`, each batch renumbered as it arrives so that it looks in order."""

    def __init__(self, peers: int, **options: Any) -> None:
        super().__init__(peers, **options)
        self.numbers: Counter = Counter()

    def deliver(self, receiver: int, box: Any, item: Any) -> None:
        if isinstance(item, ProgressBatch):
            key = (item.path, item.sender, receiver)
            item = item._replace(seq=self.numbers[key])
            self.numbers[key] += 1
        super().deliver(receiver, box, item)


def test_the_progress_channel_refuses_batches_out_of_order():
    script = schedule([(t % 6, (k, 1)) for t in range(18) for k in "abcd"], shuffle=0)
    with pytest.raises(at.ProgressError, match="a batch was lost or reordered"):   # (at seed 0)
        run_reordered(keyed_counts(script), 3, fabric=ProgressOutOfOrder(3, seed=0), timeout=10)


def failure(script: Script, fabric: ReorderingFabric) -> str | None:
    """Why the keyed count of ``script`` on ``fabric`` went wrong, or ``None``."""
    try:
        out = run_reordered(keyed_counts(script), fabric.peers, fabric=fabric, timeout=10)
    except (at.DataflowError, DataflowTimeout) as error:
        return f"{type(error.__cause__ or error).__name__}: {error}"
    return None if out == model_counts(script.events()) else f"wrong counts: {out}"


def test_the_checks_catch_progress_batches_out_of_order():
    def run(seed: int) -> str | None:
        script = schedule([(t % 6, (k, t % 3)) for t in range(18) for k in "abcd"], shuffle=seed)
        return failure(script, ProgressOutOfOrderRenumbered(3, seed=seed))

    found = next((why for seed in range(60) if (why := run(seed)) is not None), None)   # seed 10
    assert found is not None, "progress batches out of order went unnoticed in 60 runs"
    assert found.startswith("ClosedTime: ")     # a frontier went backwards, or a record came at a time closed
