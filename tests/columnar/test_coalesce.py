"""``ColumnarStream.coalesce``: small batches of a time merged to a target of rows, the rest sent once the frontier
passes the time (or at the end of an activation); nothing lost, reordered within a time, or held past its time."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

SCHEMA = {"k": pl.Int64, "x": pl.Int64}


def frames_at(sizes_by_time):
    """Frames of the given sizes at each time, ``x`` numbering the rows in order."""
    frames, times, x = [], [], 0
    for t, sizes in sizes_by_time:
        for n in sizes:
            frames.append(pl.DataFrame({"k": [i % 5 for i in range(x, x + n)], "x": list(range(x, x + n))},
                                       schema=SCHEMA))
            times.append(t)
            x += n
    return frames, times


def _sizes(stream, name):
    @stream.stream.unary(name=name)
    async def logic(input, output, cap):
        cap.drop()
        async for _ in input.activations():
            for time, batch in input.drain():
                frame = batch.frame
                output.session(time).give((len(batch), frame["x"].to_list()))

    return logic


def coalesced(sizes_by_time, rows, until, workers_exchange=False):
    def build(scope):
        frames, times = frames_at(sizes_by_time) if scope.worker.index == 0 else ([], [])
        stream = at.from_arrow(scope, frames, times=times, schema=SCHEMA)
        if workers_exchange:
            stream = stream.exchange("k")
        return _sizes(stream.coalesce(rows=rows, until=until), "Sizes")
    return build


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=8), min_size=1, max_size=5),
       st.integers(1, 100), st.sampled_from(["frontier", "activation"]))
def test_every_row_comes_once_in_order_at_its_time_and_batches_reach_the_target(sizes, rows, until):
    timed = [(t * 3, s) for t, s in enumerate(sizes)]
    out = run_dataflow(coalesced(timed, rows, until))
    x = 0
    for t, s in timed:
        got = out.get(t, [])
        assert all(b == list(range(b[0], b[0] + n)) for n, b in got)     # each batch: rows in arrival order
        assert sorted(v for _, b in got for v in b) == list(range(x, x + sum(s)))   # every row once, at its time
        x += sum(s)
        if until == "frontier":
            # merged up to the target: every batch but the time's last holds at least `rows` rows (or is one
            # input batch that big); the last is what was left when the frontier passed
            assert sum(1 for n, _ in got if n < rows) <= 1
            assert len(got) <= max(1, -(-sum(s) // rows))
    assert x == sum(sum(s) for _, s in timed)


def test_small_batches_are_merged_and_a_big_one_passes_whole():
    out = run_dataflow(coalesced([(0, [3] * 10), (1, [50, 2, 2]), (2, [1])], 20, "frontier"))
    assert sorted(n for n, _ in out[0]) == [9, 21]
    assert sorted(n for n, _ in out[1]) == [4, 50]
    assert [n for n, _ in out[2]] == [1]


def test_what_is_held_keeps_its_time_incomplete_downstream():
    """A probe after the coalescer does not pass a time while the coalescer holds rows of it: the rows arrive
    before the frontier moves past their time."""
    def build(scope):
        inp = at.InputHandle()
        seen = []
        merged = inp.to_stream(scope).columnar(SCHEMA).coalesce(rows=1000)
        merged.inspect_batch(lambda t, df: seen.append((t, df.height)))
        return inp, merged.probe(), seen

    async def run(worker):
        inp, probe, seen = worker.dataflow(build)
        inp.send_batch([(1, 1), (2, 2)])
        for _ in range(5):
            await worker.step()
        assert seen == [] and probe.less_equal(0)        # held: too few rows, and time 0 is not complete
        inp.send_batch([(3, 3)])
        inp.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))
        assert seen == [(0, 3)]                          # sent when the frontier passed time 0
        inp.close()
        await worker.step_until_done()
        return seen

    assert at.execute(run) == [[(0, 3)]]


@pytest.mark.parametrize("workers", [1, 3])
def test_after_an_exchange_each_worker_merges_its_parts(workers):
    timed = [(0, [10] * 30), (5, [7] * 20)]
    out = run_dataflow(coalesced(timed, 1000, "frontier", workers_exchange=True), workers=workers)
    assert len(out[0]) <= workers and len(out[5]) <= workers     # one batch per worker and time
    assert sorted(v for _, b in out[0] for v in b) == list(range(300))
    assert sorted(v for _, b in out[5] for v in b) == list(range(300, 440))


def test_until_activation_holds_nothing_between_activations():
    out = run_dataflow(coalesced([(0, [3] * 4)], 1000, "activation"))
    assert sum(n for n, _ in out[0]) == 12


def test_bad_arguments_are_refused_as_the_dataflow_is_built():
    def build(rows, until):
        def b(scope):
            return at.to_stream([], scope).columnar(SCHEMA).coalesce(rows=rows, until=until).records()
        return b

    with pytest.raises(ValueError, match="rows must be a positive int"):
        run_dataflow(build(0, "frontier"))
    with pytest.raises(ValueError, match="until must be one of"):
        run_dataflow(build(10, "never"))
