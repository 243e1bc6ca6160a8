"""Snapshots cut at frontiers and resumed from, in one process: a crash then a resume gives what a crash-free
run gives; keyed state moves to another number of workers; what cannot be resumed is refused."""

from __future__ import annotations

import asyncio

import pytest

import aiotimely as at
from aiotimely.connectors import to_async

from .common import PER_TIME, RECORDS, crashing, final_sums, numbers_source, run, running_sums

JUMP = 4


def build_factory(crash_at: int | None, outputs: list, pace: float = 0.0):
    """A source of RECORDS numbers (PER_TIME per time, its position kept), a running sum per key
    (kept by key, applied time by time), and a sink that remembers ``(time, key, sum)``."""

    def build(worker: at.Worker) -> None:
        def make(scope):
            numbers = at.source(scope, "Numbers", numbers_source(worker, jump=JUMP, pace=pace))
            running_sums(numbers.map(crashing(crash_at)).map(lambda x: (x % 7, x))).inspect(outputs.append)

        worker.dataflow(make, name="sums")

    return build


def test_a_crash_and_a_resume_give_what_a_crash_free_run_gives(tmp_path):
    truth: list = []
    at.execute(build_factory(None, truth), loop="asyncio")
    expected = final_sums(truth)

    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        run(build_factory(400, seen, pace=0.02), tmp_path)   # slow enough for snapshots to land on a loaded machine
    crashed = list(seen)
    run(build_factory(None, seen), tmp_path)
    resumed_from = min(time for time, _, _ in seen[len(crashed):])
    assert 0 < resumed_from <= 40                          # it did not start over, and nothing was skipped
    assert final_sums(seen) == expected                    # repeats only of outputs at times >= the snapshot


def test_keyed_state_moves_to_another_number_of_workers(tmp_path):
    truth: list = []
    at.execute(build_factory(None, truth), loop="asyncio")
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 300"):
        run(build_factory(300, seen, pace=0.002), tmp_path, workers=1)
    run(build_factory(None, seen), tmp_path, workers=3)
    assert final_sums(seen) == final_sums(truth)


def test_a_directory_of_another_dataflow_shape_is_refused(tmp_path):
    run(build_factory(None, []), tmp_path)

    def other(worker):
        worker.dataflow(lambda s: at.to_stream([1], s).map(str).inspect(print), name="sums")

    with pytest.raises(at.RecoveryError, match="another shape"):
        run(other, tmp_path)


def test_a_corrupt_snapshot_file_is_refused(tmp_path):
    run(build_factory(None, []), tmp_path)
    [file] = (tmp_path / "state").glob("g*/worker-0.sqlite3")
    file.write_bytes(b"this is not a database" * 100)
    with pytest.raises(at.RecoveryError, match="worker-0.sqlite3 is not a snapshot file"):
        run(build_factory(None, []), tmp_path)


def test_snapshots_cut_differently_are_refused(tmp_path):
    run(build_factory(None, []), tmp_path, every=3)
    with pytest.raises(at.RecoveryError, match="cut every 3 units of time, and this run cuts them every 5"):
        run(build_factory(None, []), tmp_path, every=5)


def delays_factory(crash_at: int | None, outputs: list, pace: float = 0.0):
    """The same source into delay (each record 5 times later) and reclock (released at multiples of 7)."""

    def build(worker: at.Worker) -> None:
        def make(scope):
            numbers_ = at.source(scope, "Numbers", numbers_source(worker, jump=JUMP, pace=pace, crash_at=crash_at))
            delayed = numbers_.delay(lambda x, t: t + 5).map(lambda x: ("delayed", x))
            clock = numbers_.filter(lambda x: x % (7 * PER_TIME) == 0).map(lambda x: x // PER_TIME) \
                .delay(lambda x, t: x)
            reclocked = numbers_.reclock(clock).map(lambda x: ("reclocked", x))
            delayed.concat(reclocked).inspect_time(lambda t, r: outputs.append((t, *r)))

        worker.dataflow(make, name="delays")

    return build


def test_delay_and_reclock_keep_what_waits(tmp_path):
    truth: list = []
    at.execute(delays_factory(None, truth), loop="asyncio")
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        run(delays_factory(400, seen, pace=0.002), tmp_path)
    crashed = len(seen)
    run(delays_factory(None, seen), tmp_path)
    assert crashed < len(truth)                             # it crashed halfway
    assert set(seen) == set(truth)                          # nothing lost (what was repeated, was repeated alike)
    assert len(seen) - crashed < len(truth)                  # and the resumed run did not start over


def test_kept_state_of_another_kind_is_refused(tmp_path):
    def program(kind):
        def build(worker: at.Worker) -> None:
            def make(scope):
                @at.to_stream(range(10), scope).unary_frontier(name="Keeper")
                async def keeper(input, output, cap):
                    cap.drop()
                    input.keyed_state("seen", kind)
                    order = input.time_order()
                    async for _ in input.activations():
                        for _time, _records in order.ready():
                            pass
            worker.dataflow(make, name="kinds")
        return build

    run(program(dict), tmp_path)
    with pytest.raises(at.RecoveryError, match="keeps 'seen' as keyed state of type list, and the snapshot"):
        run(program(list), tmp_path)


def windows_factory(crash_at: int | None, outputs: list, pace: float = 0.0):
    """The numbers counted per window of 8 times by an operator that keeps its counts and asks its
    notificator to be told when each window ends."""

    def build(worker: at.Worker) -> None:
        def make(scope):
            numbers = at.source(scope, "Numbers", numbers_source(worker, pace=pace, crash_at=crash_at))

            @numbers.unary_notify(exchange=lambda x: 0, name="Windows")
            async def windows(input, output, notificator):
                counts = input.keyed_state("counts", dict)     # window end -> count
                order = input.time_order()
                async for _ in input.activations():
                    for time, records in order.ready():
                        end = (time.time // 8 + 1) * 8
                        counts[end] = counts.get(end, 0) + len(records)
                        notificator.notify_at(time.delayed(end))
                    for cap in notificator.ready():
                        count = counts.pop(cap.time, None)    # on another number of workers, every worker
                        if count is not None:                 # is told of every pending time
                            output.session(cap).give((cap.time, count))

            windows.inspect(outputs.append)

        worker.dataflow(make, name="windows")

    return build


def test_a_notificator_keeps_its_pending_times(tmp_path):
    truth: list = []
    at.execute(windows_factory(None, truth), loop="asyncio")
    assert sorted(truth) == [(end, 8 * PER_TIME) for end in range(8, 61, 8)] + [(64, 4 * PER_TIME)]
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 400"):      # at time 40, the end of a window
        run(windows_factory(400, seen, pace=0.002), tmp_path, every=8)
    assert (40, 8 * PER_TIME) not in seen
    run(windows_factory(None, seen, pace=0.002), tmp_path, workers=2, every=8)
    assert sorted(set(seen)) == sorted(truth)               # every window, counted once in full


def deliveries_factory(crash_at: int | None, delivered: list):
    """Numbers from a source keeping its position, delivered by a slow async call (one at a time)."""

    async def deliver(time, records):
        await asyncio.sleep(0.005)
        if crash_at is not None and crash_at in records:
            raise RuntimeError(f"crashed at {crash_at}")
        delivered.extend(records)

    def build(worker: at.Worker) -> None:
        def make(scope):
            to_async(at.source(scope, "Numbers", numbers_source(worker)), deliver, max_in_flight=1)

        worker.dataflow(make, name="deliveries")

    return build


def test_a_snapshot_is_complete_only_once_what_came_before_it_is_delivered(tmp_path):
    # the source runs far ahead of the deliveries; a snapshot of its position is no use until they catch up
    delivered: list = []
    with pytest.raises(at.DataflowError, match="crashed at 300"):
        run(deliveries_factory(300, delivered), tmp_path)
    assert sorted(delivered) == list(range(300))
    run(deliveries_factory(None, delivered), tmp_path)
    assert set(delivered) == set(range(RECORDS))            # nothing lost; repeated only what came again
