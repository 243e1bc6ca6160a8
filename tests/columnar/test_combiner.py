"""The combiner of decomposable aggregations (aiotimely/columnar/combine.py): which windows keep partial
aggregates rather than raw rows, and that their results equal the raw-row path's, batch for batch (rows, order,
dtypes), on random rows with nulls, lateness and late rows, keyed and not, on 1 and 3 workers."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.columnar.combine import recognise  # noqa: E402
from aiotimely.columnar.windows import WindowPlan  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

from .windowing import EVENTS, events  # noqa: E402

DECOMPOSABLE = (at.Agg.count(), at.Agg.sum("x"), at.Agg.min("x"), at.Agg.max("x"), at.Agg.mean("x"),
                pl.col("x").count().alias("x_count"), pl.len().alias("n"), pl.col("ts").max())
"""Every kind the combiner merges: built-ins and the Polars expressions it recognises."""

RAW_ONLY = pl.col("x").median().alias("x_median")
"""Not decomposable: beside the others it makes the window keep raw rows (its column is dropped to compare)."""


def plan_of(spec, *aggs, schema=EVENTS, key="k"):
    """The plan ``window(spec, *aggs, key=key, time="ts")`` makes, read inside a dataflow."""
    found = {}

    def build(scope):
        found["plan"] = WindowPlan(scope, pl.Schema(schema), spec, aggs, key=key, time="ts", lateness=0,
                                   late="drop", name="W")
        return events(scope, []).records()
    run_dataflow(build, workers=1)
    return found["plan"]


def test_decomposable_aggregations_keep_partials():
    assert plan_of(at.Tumbling(5), *DECOMPOSABLE).combined
    assert plan_of(at.Sliding(6, 2), at.Agg.count(), key=None).combined


def test_a_median_a_float_sum_or_sessions_keep_raw_rows():
    assert not plan_of(at.Tumbling(5), at.Agg.count(), RAW_ONLY).combined
    assert not plan_of(at.Tumbling(5), at.Agg.sum("x"), schema={**EVENTS, "x": pl.Float64}).combined
    assert not plan_of(at.Sessions(3), at.Agg.count()).combined
    assert not plan_of(at.Tumbling(5), (pl.col("x").sum() * 2).alias("twice")).combined


@pytest.mark.parametrize("expr", [pl.col("x").sum().alias("s"), pl.col("x").sum(), pl.len(), pl.col("x").mean()])
def test_recognised_expressions(expr):
    assert recognise(expr, pl.Schema(EVENTS)) is not None


@pytest.mark.parametrize("expr", [pl.col("x").median(), pl.col("x").sum() + 1,
                                  pl.col("x").filter(pl.col("k") > 0).sum(), pl.col("x", "k").sum(),
                                  pl.col("y").sum(), pl.col("x").n_unique()])
def test_unrecognised_expressions(expr):
    assert recognise(expr, pl.Schema(EVENTS)) is None


values = st.one_of(st.none(), st.integers(-(2 ** 40), 2 ** 40))
timed_events = st.lists(
    st.tuples(st.integers(0, 16), st.lists(st.tuples(st.integers(0, 3), st.integers(-8, 8), values), max_size=8)),
    max_size=7).map(lambda items: sorted(((d, [(k, d + dt, x) for k, dt, x in rows]) for d, rows in items),
                                         key=lambda item: item[0]))
specs = st.sampled_from([at.Tumbling(5), at.Tumbling(4, offset=1), at.Sliding(6, 2), at.Sliding(3, 5)])


def combined_and_raw(timed, spec, lateness, keyed):
    """The same window with the decomposable aggregations (partials), and with a median beside (raw rows)."""
    def build(scope):
        rows = events(scope, timed)
        key = "k" if keyed else None
        got = {}
        for name, aggs in (("combined", DECOMPOSABLE), ("raw", (*DECOMPOSABLE, RAW_ONLY))):
            results, late = rows.window(spec, *aggs, key=key, time="ts", lateness=lateness, late="stream")
            if name == "raw":
                results = results.select(pl.exclude("x_median"))
            got[name] = results.inspect_batch(lambda t, df, name=name: batches[name].append((t, df))).records()
            got[f"{name}_late"] = late.records()
        return got
    batches = {"combined": [], "raw": []}
    got = run_dataflow(build, workers=1)
    return got, batches


@settings(max_examples=40, deadline=None)
@given(timed=timed_events, spec=specs, lateness=st.integers(0, 4), keyed=st.booleans())
def test_partials_give_the_raw_row_paths_batches(timed, spec, lateness, keyed):
    got, batches = combined_and_raw(timed, spec, lateness, keyed)
    assert got["combined"] == got["raw"]
    assert got["combined_late"] == got["raw_late"]
    assert len(batches["combined"]) == len(batches["raw"])
    for (t1, mine), (t2, raw) in zip(sorted(batches["combined"], key=lambda b: b[0]),
                                     sorted(batches["raw"], key=lambda b: b[0]), strict=True):
        assert t1 == t2
        assert mine.schema == raw.schema
        assert mine.equals(raw, null_equal=True)


@settings(max_examples=15, deadline=None)
@given(timed=timed_events, spec=specs, lateness=st.integers(0, 3), keyed=st.booleans())
def test_partials_on_3_workers_equal_the_raw_row_path(timed, spec, lateness, keyed):
    def build(scope):
        rows = events(scope, timed)
        key = "k" if keyed else None
        combined = rows.window(spec, *DECOMPOSABLE, key=key, time="ts", lateness=lateness)
        raw = rows.window(spec, *DECOMPOSABLE, RAW_ONLY, key=key, time="ts", lateness=lateness)
        return {"combined": combined.records(), "raw": raw.select(pl.exclude("x_median")).records()}
    got = run_dataflow(build, workers=3)
    assert {t: sorted(rows, key=repr) for t, rows in got["combined"].items()} == \
        {t: sorted(rows, key=repr) for t, rows in got["raw"].items()}
