"""Async-iterator sources in recoverable dataflows: a resumed run reads on from the snapshot's position
(skipping what it read, or reopening there), sends again what event time sent ahead of the cut, and says
clearly when it cannot resume."""

from __future__ import annotations

import asyncio

import pytest

import aiotimely as at
from aiotimely.connectors import EventTime, WallClock, from_aiter

from .common import RECORDS, crashing, final_sums, run, running_sums

async def numbers(start: int = 0, stop: int = RECORDS, step: int = 1, pace: float = 0.0):
    """``start, start+step, ...`` in batches of 10 (the iterator waits between them)."""
    for i, x in enumerate(range(start, stop, step)):
        if i % 10 == 0:
            await asyncio.sleep(pace)
        yield x


def sums_factory(make_source, crash_at: int | None, outputs: list):
    """``make_source(scope, worker)`` into a running sum per key, its outputs into ``outputs``; a record
    ``crash_at`` fails the computation."""

    def build(worker: at.Worker) -> None:
        def make(scope):
            keyed = make_source(scope, worker).map(crashing(crash_at)).map(lambda x: (x % 7, x))
            running_sums(keyed).inspect(outputs.append)

        worker.dataflow(make, name="sums")

    return build


def crash_and_resume(make_source, tmp_path, crash_at=400, workers=(1, 1)):
    """The sums of a crash-free run, and of a run crashed at ``crash_at`` then resumed."""
    truth: list = []
    at.execute(sums_factory(make_source, None, truth), workers=workers[0], loop="asyncio")
    seen: list = []
    with pytest.raises(at.DataflowError, match=f"crashed at {crash_at}"):
        run(sums_factory(make_source, crash_at, seen), tmp_path, workers=workers[0])
    run(sums_factory(make_source, None, seen), tmp_path, workers=workers[1])
    return final_sums(truth), final_sums(seen)


def test_an_iterator_read_again_from_its_start_skips_what_was_read(tmp_path):
    truth, seen = crash_and_resume(lambda scope, w: from_aiter(scope, numbers(pace=0.002), resume="skip"),
                                      tmp_path)
    assert seen == truth


def test_an_iterator_reopened_at_its_position(tmp_path):
    reopened = []

    def reopen(n):
        reopened.append(n)
        return numbers(start=n)

    truth, seen = crash_and_resume(
        lambda scope, w: from_aiter(scope, numbers(pace=0.002), resume=reopen), tmp_path)
    assert seen == truth
    assert len(reopened) == 1 and 0 < reopened[0] <= 400      # read on from the snapshot, not from the start


def test_one_iterator_per_worker_resumes_on_as_many_workers(tmp_path):
    def source(scope, worker):
        return from_aiter(scope, lambda index, peers: numbers(index, RECORDS, peers, pace=0.002), resume="skip")

    truth, seen = crash_and_resume(source, tmp_path, crash_at=401, workers=(2, 2))
    assert seen == truth
    with pytest.raises(at.RecoveryError, match="reads one iterator per worker, and its snapshot was made by 2 "
                                               "workers: it resumes only on 2 workers"):
        run(sums_factory(source, None, []), tmp_path, workers=3)


def test_event_time_sent_ahead_of_the_cut_is_sent_again(tmp_path):
    # times run ahead of the frontier by up to `lateness`: a cut finds records already sent at later times
    async def shuffled(pace: float):
        order = [x + d for x in range(0, RECORDS, 4) for d in (3, 1, 2, 0)]
        for i, x in enumerate(order):
            if i % 8 == 0:
                await asyncio.sleep(pace)
            yield x

    def source(scope, worker):
        return from_aiter(scope, shuffled(0.002), time=EventTime(lambda x: x // 5, lateness=2), resume="skip")

    truth, seen = crash_and_resume(source, tmp_path)
    assert seen == truth


def test_a_live_feed_goes_on_at_times_after_the_snapshot(tmp_path):
    got: list = []

    def build(crash: bool):
        def make(scope):
            async def feed():
                for x in range(200) if crash else range(1000, 1020):
                    await asyncio.sleep(0.005)
                    yield x
                if crash:
                    raise RuntimeError("the feed broke")

            from_aiter(scope, feed(), time=WallClock(0.02), resume="live").inspect_time(
                lambda t, x: got.append((crash, t, x)))

        return lambda worker: worker.dataflow(make, name="live")

    with pytest.raises(at.DataflowError, match="the feed broke"):
        run(build(True), tmp_path, every=5)
    before = {x: t for crashed, t, x in got if crashed}
    run(build(False), tmp_path, every=5)
    after = {x: t for crashed, t, x in got if not crashed}
    assert [x for x in after if x >= 1000] == list(range(1000, 1020))     # what the feed gives now, all of it
    again = {x: t for x, t in after.items() if x < 1000}                  # what the snapshot sends again:
    assert all(before[x] == t for x, t in again.items())                  # at the times it had
    first_new = min(t for x, t in after.items() if x >= 1000)
    assert first_new >= max(again.values(), default=1) > 0                # the clock went on, not from 0


def test_a_source_that_cannot_say_how_it_resumes_is_refused(tmp_path):
    def build(worker):
        worker.dataflow(lambda scope: from_aiter(scope, numbers()).inspect(lambda x: None), name="plain")

    with pytest.raises(at.RecoveryError, match="say how it resumes with resume='skip'"):
        run(build, tmp_path)
    at.execute(build, loop="asyncio")                      # without recovery, nothing to say


def test_the_spark_ingress_is_refused_in_a_recoverable_dataflow(tmp_path):
    from aiotimely.connectors import spark

    def build(worker):
        worker.dataflow(lambda scope: spark.ingress(scope).inspect(lambda x: None), name="spark")

    with pytest.raises(at.RecoveryError, match="cannot be in a recoverable dataflow yet"):
        run(build, tmp_path)


def test_a_resume_that_is_not_one_of_the_three_is_refused():
    def build(worker):
        worker.dataflow(lambda scope: from_aiter(scope, numbers(), resume="again"), name="plain")

    with pytest.raises(ValueError, match="resume must be 'skip', 'live' or a function, not 'again'"):
        at.execute(build, loop="asyncio")
