"""Each columnar operator against a plain-Python model of it, on random rows and times, on 1 and 3 workers:
select, with_columns, filter, explode, map_batches (once per batch), records."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from aiotimely.testing import run_dataflow  # noqa: E402

from .flows import by_time, rows_at_times  # noqa: E402

row = st.tuples(st.integers(0, 4), st.sampled_from(["a", "bb", "c"]), st.integers(-50, 50),
                st.lists(st.integers(0, 9), min_size=1, max_size=3))
timed_rows = st.lists(st.tuples(st.integers(0, 2), st.lists(row, max_size=12)), max_size=5).map(
    lambda items: sorted(items, key=lambda item: item[0]))
workers = st.sampled_from([1, 3])
SETTINGS = settings(max_examples=25, deadline=None)


def run(timed, build, workers):
    return run_dataflow(lambda scope: build(rows_at_times(scope, timed)).records(), workers=workers)


def model(timed, fn):
    """Each time's rows through a plain-Python function of one row to a list of rows."""
    return by_time([(t, [out for r in rows for out in fn(r)]) for t, rows in timed])


@SETTINGS
@given(timed=timed_rows, workers=workers, threshold=st.integers(-50, 50))
def test_filter_keeps_the_rows_whose_predicate_holds(timed, workers, threshold):
    got = run(timed, lambda s: s.filter(pl.col("x") > threshold, pl.col("w") != "c"), workers)
    assert got == model(timed, lambda r: [r] if r[2] > threshold and r[1] != "c" else [])


@SETTINGS
@given(timed=timed_rows, workers=workers)
def test_select_gives_the_columns_of_its_expressions(timed, workers):
    got = run(timed, lambda s: s.select("w", (pl.col("x") * 2).alias("y"), z=pl.col("k") + 1), workers)
    assert got == model(timed, lambda r: [(r[1], r[2] * 2, r[0] + 1)])


@SETTINGS
@given(timed=timed_rows, workers=workers)
def test_with_columns_adds_and_replaces_columns(timed, workers):
    got = run(timed, lambda s: s.with_columns(pl.col("x").abs(), kx=pl.col("k") * pl.col("x")), workers)
    assert got == model(timed, lambda r: [(r[0], r[1], abs(r[2]), r[3], r[0] * r[2])])


@SETTINGS
@given(timed=timed_rows, workers=workers)
def test_explode_gives_a_row_for_each_element(timed, workers):
    got = run(timed, lambda s: s.explode("l"), workers)
    assert got == model(timed, lambda r: [(r[0], r[1], r[2], e) for e in r[3]])


@SETTINGS
@given(timed=timed_rows, workers=workers)
def test_map_batches_runs_once_per_batch_on_the_whole_frame(timed, workers):
    got = run(timed, lambda s: s.map_batches(lambda df: pl.DataFrame({"rows": [df.height]}),
                                             schema={"rows": pl.Int64}), workers)
    # one row per non-empty batch: worker 0 made one batch of each item
    expected = by_time([(t, [(len(rows),)]) for t, rows in timed if rows])
    assert got == expected


@SETTINGS
@given(timed=timed_rows, workers=workers)
def test_a_chain_of_operators_matches_the_chain_of_models(timed, workers):
    got = run(timed, lambda s: (s.filter(pl.col("k") != 2).explode("l").exchange("k")
                                .with_columns(s=pl.col("x") + pl.col("l")).select("k", "s")
                                .map_batches(lambda df: df.filter(pl.col("s") % 2 == 0))), workers)
    assert got == model(timed, lambda r: [(r[0], r[2] + e) for e in r[3] if r[0] != 2 and (r[2] + e) % 2 == 0])


def test_records_can_be_dicts_by_column_name():
    timed = [(0, [(1, "a", 5, [1])]), (1, [(2, "b", 6, [2, 3])])]
    got = run_dataflow(lambda scope: rows_at_times(scope, timed).select("k", "w").records(named=True))
    assert got == {0: [{"k": 1, "w": "a"}], 1: [{"k": 2, "w": "b"}]}


def test_operators_follow_the_schema_as_the_dataflow_is_built():
    seen = {}

    def build(scope):
        s = rows_at_times(scope, [])
        seen["select"] = s.select("w", y=pl.col("x") * 2).schema
        seen["explode"] = s.explode("l").schema
        seen["mapped"] = s.map_batches(lambda df: df).schema
        return s.records()

    run_dataflow(build)
    assert seen["select"] == pl.Schema({"w": pl.String, "y": pl.Int64})
    assert seen["explode"] == pl.Schema({"k": pl.Int64, "w": pl.String, "x": pl.Int64, "l": pl.Int64})
    assert seen["mapped"] is None                     # map_batches without a schema: unknown downstream


def test_a_filter_that_leaves_no_rows_sends_no_batch():
    batches = []

    def build(scope):
        s = rows_at_times(scope, [(0, [(1, "a", 5, [1])]), (1, [(2, "b", -6, [2])])])
        return s.filter(pl.col("x") > 0).inspect_batch(lambda t, df: batches.append((t, df.height))).records()

    assert run_dataflow(build) == {0: [(1, "a", 5, [1])]}
    assert batches == [(0, 1)]
