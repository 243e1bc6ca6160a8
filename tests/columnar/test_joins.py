"""Columnar joins against the record path's join and interval_join on the same rows and a plain-Python model, on
1 and 3 workers and 2 processes: same-time equi-joins (sent as soon as both sides are there), interval joins on
dataflow and event times (sent exactly when both frontiers pass max(t, u) + lateness, rows kept just as long as
they may still meet one), errors naming their place, and a crash and a resume giving the crash-free pairs."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.columnar import ColumnarStream  # noqa: E402
from aiotimely.columnar.interval import KeptCounts, kept_rows  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402
from aiotimely.testing.processes import run_processes  # noqa: E402
from tests.recovery.common import numbers_source, run  # noqa: E402

from .windowing import EVENTS, events  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None)

Timed = list[tuple[int, list[tuple[int, int, int]]]]
"""Rows ``(k, ts, x)`` by dataflow time (times not decreasing)."""


def numbered(items: list, start: int) -> Timed:
    """``(d, [(k, dt, _)...])`` items as rows ``(k, d + dt, x)`` with distinct ``x`` from ``start`` (so that pairs
    are told apart), sorted by ``d``."""
    out, n = [], start
    for d, rows in sorted(items, key=lambda item: item[0]):
        out.append((d, [(k, d + dt, n + i) for i, (k, dt) in enumerate(rows)]))
        n += len(rows)
    return out


def timed_rows(start: int) -> st.SearchStrategy[Timed]:
    return st.lists(st.tuples(st.integers(0, 12), st.lists(st.tuples(st.integers(0, 3), st.integers(-4, 4)),
                                                              max_size=6)),
                    max_size=6).map(lambda items: numbered(items, start))


def flat(timed: Timed) -> list[tuple[int, int, int, int]]:
    """``(d, k, ts, x)`` for every row."""
    return [(d, k, ts, x) for d, rows in timed for k, ts, x in rows]


def as_pairs(stream: at.Stream) -> at.Stream:
    """Records ``(k, ts, x)`` as the record path's keyed pairs ``(k, (ts, x))``."""
    return stream.map(lambda r: (r[0], (r[1], r[2])))


def flattened(joined: at.Stream) -> at.Stream:
    """The record path's ``(k, ((ts, x), (ts', x')))`` as the columnar result row ``(k, ts, x, ts', x')``."""
    return joined.map(lambda kv: (kv[0], *kv[1][0], *kv[1][1]))


def by_time(pairs: list[tuple[int, tuple]]) -> dict[int, list[tuple]]:
    """Rows by time, each time's sorted (as :class:`~aiotimely.testing.Outputs` has them)."""
    out: dict[int, list[tuple]] = {}
    for t, row in pairs:
        out.setdefault(t, []).append(row)
    return {t: sorted(rows) for t, rows in out.items()}


# -- the plain-Python models --------------------------------------------------------------------------------------

def model_join(lefts: Timed, rights: Timed) -> dict[int, list[tuple]]:
    """Rows with equal keys at the same dataflow time."""
    return by_time([(d, (k, t, x, u, y)) for d, k, t, x in flat(lefts) for e, j, u, y in flat(rights)
                    if (d, k) == (e, j)])


def model_interval(lefts: Timed, rights: Timed, lower: int, upper: int, lateness: int,
                   event_time: bool) -> dict[int, list[tuple]]:
    """Rows with equal keys and ``lower <= u - t <= upper``, at ``max(t, u) + lateness``; event time ``ts`` (a row
    at ``d`` with ``ts < d - lateness`` is late: dropped) or the dataflow time."""
    def on_time(timed: Timed) -> list[tuple[int, int, int, int, int]]:
        return [(ts if event_time else d, k, ts, x, d) for d, k, ts, x in flat(timed)
                if not event_time or ts >= d - lateness]

    return by_time([(max(t, u) + lateness, (k, ts, x, us, y))
                    for t, k, ts, x, _ in on_time(lefts) for u, j, us, y, _ in on_time(rights)
                    if k == j and lower <= u - t <= upper])


# -- against the record path and the model ------------------------------------------------------------------------

def both_joins(lefts: Timed, rights: Timed, lower: int, upper: int, lateness: int):
    def build(scope):
        left, right = events(scope, lefts), events(scope, rights)
        record_left, record_right = as_pairs(left.records()), as_pairs(right.records())
        return {
            "join": left.join(right, on="k").records(),
            "record_join": flattened(record_left.join(record_right)),
            "interval": left.interval_join(right, "k", lower=lower, upper=upper).records(),
            "record_interval": flattened(record_left.interval_join(record_right, lower, upper)),
            "event_time": right.interval_join(left, "k", time="ts", lower=lower, upper=upper, lateness=lateness,
                                              name="ByEventTime").records(),
        }
    return build


@SETTINGS
@given(lefts=timed_rows(0), rights=timed_rows(1000), lower=st.integers(-3, 2), width=st.integers(0, 4),
       lateness=st.integers(0, 3), workers=st.sampled_from([1, 3]))
def test_joins_equal_the_record_paths_and_the_model(lefts, rights, lower, width, lateness, workers):
    upper = lower + width
    got = run_dataflow(both_joins(lefts, rights, lower, upper, lateness), workers=workers)
    assert got["join"] == model_join(lefts, rights) == dict(got["record_join"].items())
    assert got["interval"] == model_interval(lefts, rights, lower, upper, 0, event_time=False)
    assert got["interval"] == dict(got["record_interval"].items())
    assert got["event_time"] == model_interval(rights, lefts, lower, upper, lateness, event_time=True)


def test_result_columns_are_polars_joins_with_suffixes_and_other_key_names():
    lefts = [(0, [(1, 5, 10), (2, 6, 20)])]
    rights = [(0, [(1, 7, 30)]), (2, [(2, 9, 40)])]

    def build(scope):
        left = events(scope, lefts)
        right = events(scope, rights).select(pl.col("k").alias("key"), "ts", "x")
        same = left.join(right, left_on="k", right_on="key", suffix="_r")
        near = left.interval_join(right, left_on=["k"], right_on=["key"], time=("ts", "ts"), lower=0, upper=3)
        assert list(same.schema.items()) == [("k", pl.Int64), ("ts", pl.Int64), ("x", pl.Int64),
                                             ("ts_r", pl.Int64), ("x_r", pl.Int64)]
        assert list(near.schema) == ["k", "ts", "x", "ts_right", "x_right"]
        return {"same": same.records(), "near": near.records()}

    got = run_dataflow(build, workers=2)
    assert got["same"] == {0: [(1, 5, 10, 7, 30)]}
    assert got["near"] == {7: [(1, 5, 10, 7, 30)], 9: [(2, 6, 20, 9, 40)]}


# -- between processes ----------------------------------------------------------------------------------------------

TWO_LEFTS = [(d, [((i * 7 + d) % 5, d + i % 5 - 2, d * 100 + i) for i in range(10)]) for d in range(0, 30, 3)]
TWO_RIGHTS = [(d, [((i * 3 + d) % 5, d + i % 4 - 1, 10_000 + d * 100 + i) for i in range(8)]) for d in range(1, 30, 4)]


def two_processes(scope):
    mine = scope.worker.index == 0
    left, right = events(scope, TWO_LEFTS if mine else []), events(scope, TWO_RIGHTS if mine else [])
    record_left, record_right = as_pairs(left.records()), as_pairs(right.records())
    return {"join": left.join(right, on="k").records(),
            "interval": left.interval_join(right, "k", lower=-2, upper=3).records(),
            "record_interval": flattened(record_left.interval_join(record_right, -2, 3)),
            "event_time": left.interval_join(right, "k", time="ts", lower=-1, upper=2, lateness=1).records()}


def test_joins_on_two_processes_equal_the_record_paths_and_the_model():
    got = run_processes(two_processes, processes=2, workers=2)
    assert got["join"] == model_join(TWO_LEFTS, TWO_RIGHTS)
    assert got["interval"] == model_interval(TWO_LEFTS, TWO_RIGHTS, -2, 3, 0, event_time=False)
    assert got["interval"] == dict(got["record_interval"].items())
    assert got["event_time"] == model_interval(TWO_LEFTS, TWO_RIGHTS, -1, 2, 1, event_time=True)
    assert got["event_time"]
    assert len([w for w, out in got["event_time"].workers.items() if out]) > 1     # the keys spread over workers


# -- exactly when the frontiers pass, and kept just as long as needed -------------------------------------------

def test_a_same_time_pair_goes_as_soon_as_both_rows_are_there():
    async def build(worker):
        a, b = at.InputHandle(), at.InputHandle()
        seen: list = []
        worker.dataflow(lambda s: a.to_stream(s).columnar(EVENTS).join(b.to_stream(s).columnar(EVENTS), on="k")
                        .inspect_batch(lambda t, df: seen.append((t, df.rows()))))
        a.send_batch([(1, 0, 10)])
        b.send_batch([(1, 0, 20), (2, 0, 30)])
        for _ in range(10):                       # time 0 stays open: the pair goes anyway
            await worker.step()
        early = list(seen)
        a.close()
        b.close()
        await worker.step_until_done()
        return early, seen

    [(early, seen)] = at.execute(build, loop="asyncio")
    assert early == seen == [(0, [(1, 0, 10, 0, 20)])]


def test_an_interval_pair_goes_exactly_when_both_frontiers_pass_its_time_and_rows_are_kept_just_long_enough():
    sent: list = []

    async def build(worker):
        a, b = at.InputHandle(), at.InputHandle()
        scopes = []

        def make(scope):
            scopes.append(scope)
            joined = a.to_stream(scope).columnar(EVENTS).interval_join(
                b.to_stream(scope).columnar(EVENTS), on="k", time="ts", lower=-1, upper=2)
            joined.inspect_batch(lambda t, df: sent.append((t, df.rows())))
            return joined.probe()

        probe = worker.dataflow(make)

        async def settle():
            for _ in range(30):
                await worker.step()
            return probe.frontier, kept_rows(scopes[0])

        a.send_batch([(1, 5, 0)])                 # at 0: t = 5
        b.send_batch([(1, 6, 100)])               # at 0: u = 6, a pair at 6
        a.advance_to(6)
        b.advance_to(6)
        assert await settle() == (at.Antichain([6]), KeptCounts(1, 1, 1, 0)) and sent == []
        a.advance_to(7)                           # b still at 6: time 6 is not complete
        assert await settle() == (at.Antichain([6]), KeptCounts(1, 1, 1, 0)) and sent == []
        b.advance_to(7)
        assert (await settle())[0] == at.Antichain([7])
        assert sent == [(6, [(1, 5, 0, 6, 100)])]
        b.send_batch([(1, 7, 101)])               # at 7: u - t = 2 for the left row at 5, kept until now
        a.advance_to(8)
        b.advance_to(8)
        assert await settle() == (at.Antichain([8]), KeptCounts(0, 1, 0, 0))   # 5 + 2 < 8, 6 + 1 < 8: gone
        assert sent[1:] == [(7, [(1, 5, 0, 7, 101)])]
        a.send_batch([(1, 3, 1)])                 # at 8: t = 3 < 8 is late
        a.advance_to(40)
        b.advance_to(40)
        assert await settle() == (at.Antichain([40]), KeptCounts(0, 0, 0, 1))  # nothing held, nothing kept
        a.close()
        b.close()
        await worker.step_until_done()

    at.execute(build, loop="asyncio")
    assert len(sent) == 2


def test_kept_rows_go_back_to_nothing_once_the_inputs_complete():
    scopes: list = []
    lefts = [(d, [(d % 3, d + 50, d)]) for d in range(10)]           # event times far ahead: kept till the end
    rights = [(d, [(d % 3, d + 52, 100 + d)]) for d in range(10)]

    def build(scope):
        scopes.append(scope)
        return events(scope, lefts).interval_join(events(scope, rights), "k", time="ts", lower=0, upper=5).records()

    got = run_dataflow(build, workers=3)
    assert sum(len(rows) for rows in got.values()) == len(
        [1 for _, (k, t, _) in flat_rows(lefts) for _, (j, u, _) in flat_rows(rights) if k == j and 0 <= u - t <= 5])
    assert [kept_rows(scope) for scope in scopes] == [KeptCounts(0, 0, 0, 0)] * 3


def flat_rows(timed: Timed) -> list[tuple[int, tuple[int, int, int]]]:
    return [(d, row) for d, rows in timed for row in rows]


# -- errors name their place ------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, kind, error", [
    (lambda a, b: a.join(b, on="nope"), at.GraphError, "there is no key column 'nope'"),
    (lambda a, b: a.join(b), TypeError, "give the key columns as on="),
    (lambda a, b: a.join(b, on="k", how="outer"), ValueError, "how must be one of 'inner'"),
    (lambda a, b: a.join(b.with_columns(pl.col("k").cast(pl.String)), on="k"), at.GraphError,
     "key column 'k' is Int64 on the left and 'k' is String on the right"),
    (lambda a, b: a.join(b, left_on=["k", "ts"], right_on="k"), TypeError, "as many left key columns"),
    (lambda a, b: a.interval_join(b, "k", lower=2, upper=1), ValueError, "lower (2) must not be greater"),
    (lambda a, b: a.interval_join(b, "k", lower=0, upper=1.5), TypeError, "upper must be an int"),
    (lambda a, b: a.interval_join(b, "k", lower=0, upper=1, time=("ts", "x2")), at.GraphError,
     "there is no event-time column 'x2'"),
    (lambda a, b: a.interval_join(b, "k", lower=0, upper=1, lateness=-1), ValueError, "lateness must be"),
])
def test_a_bad_join_is_refused_as_the_dataflow_is_built(make, kind, error):
    def joins(scope):
        rows = events(scope, [(0, [(1, 2, 3)])])
        return make(rows, events(scope, [(0, [(1, 2, 3)])])).records()

    with pytest.raises(kind) as info:
        run_dataflow(joins)
    assert "in dataflow 'joins' on worker 0" in str(info.value) and error in str(info.value)


def test_interval_join_needs_int_dataflow_times():
    def joins(scope):
        with scope.iterative() as loop:
            rows = events(scope, [(0, [(1, 2, 3)])])
            inner = ColumnarStream(rows.stream.enter(loop), rows.schema)
            inner.interval_join(inner, "k", lower=0, upper=1)

    with pytest.raises(at.GraphError, match="interval_join compares int times"):
        run_dataflow(joins)


# -- a crash and a resume ---------------------------------------------------------------------------------------

def row(n: int) -> tuple[int, int, int]:
    """Number ``n`` (at dataflow time ``n // 10``) as a row: a key, an event time 3 before to 1 after its dataflow
    time (some late with lateness 2), and ``n``."""
    return (n % 5, n // 10 + n % 5 - 3, n)


def factory(crash_at: int | None, outputs: list, numbers: list, pace: float = 0.0):
    """The dataflow: the numbers as rows, even ones on the left, odd ones on the right, interval-joined by event
    time; ``outputs`` gets each pair as ``(time, row)``, ``numbers`` each number the source sends."""
    def build(worker: at.Worker) -> None:
        def make(scope):
            source = at.source(scope, "Numbers", numbers_source(worker, pace=pace, crash_at=crash_at))
            rows = source.inspect(numbers.append).map(row)
            left = rows.filter(lambda r: r[2] % 2 == 0).columnar(EVENTS)
            right = rows.filter(lambda r: r[2] % 2 == 1).columnar(EVENTS)
            joined = left.interval_join(right, "k", time="ts", lower=-2, upper=3, lateness=2)
            joined.inspect_batch(lambda t, df: outputs.extend((t, r) for r in df.rows()))

        worker.dataflow(make, name="columnar-joins")

    return build


@pytest.mark.parametrize("workers", [1, 3])
def test_a_crash_and_a_resume_give_the_crash_free_pairs(tmp_path, workers):
    truth: list = []
    at.execute(factory(None, truth, []), loop="asyncio")
    assert truth and len(set(truth)) == len(truth)
    crashed: list = []
    with pytest.raises(at.DataflowError, match="crashed at 350"):
        run(factory(350, crashed, [], pace=0.002), tmp_path, every=4)
    assert 0 < len(set(crashed)) < len(truth)
    resumed: list = []
    numbers: list = []
    run(factory(None, resumed, numbers, pace=0.002), tmp_path, workers=workers, every=4)
    start = min(numbers) // 10                      # the time the run resumed at (the source's first)
    assert 0 < start < 35
    assert set(crashed + resumed) == set(truth)     # every pair, nothing else
    assert {p for p in truth if p[0] >= start} <= set(resumed)   # those kept or waiting at the snapshot too
    assert {p for p in truth if p[0] < start} <= set(crashed)
