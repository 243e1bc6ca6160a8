"""Errors name their place: a bad expression or a missing column is refused as the dataflow is built when the
schema is known, and fails the dataflow naming the operator, the dataflow, the worker and the time when it is
only found on a batch."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

import aiotimely as at  # noqa: E402
from aiotimely.columnar import ColumnarStream  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

from .flows import rows_at_times  # noqa: E402

TIMED = [(0, [(1, "a", 5, [1])]), (4, [(2, "b", 6, [2])])]


@pytest.mark.parametrize("build, operator, error", [
    (lambda s: s.select("nope"), "Select", "ColumnNotFoundError"),
    (lambda s: s.with_columns(y=pl.col("w") + 1), "WithColumns", "InvalidOperationError"),
    (lambda s: s.filter(pl.col("nope") > 1), "Filter", "ColumnNotFoundError"),
    (lambda s: s.explode("nope"), "Explode", "ColumnNotFoundError"),
    (lambda s: s.exchange("k", "nope"), "Exchange", "ColumnNotFoundError"),
    (lambda s: s.exchange(), "Exchange", "give the key columns"),
    (lambda s: s.select("k").filter(pl.col("x") > 0, name="Positive"), "Positive", "ColumnNotFoundError"),
])
def test_a_bad_expression_is_refused_as_the_dataflow_is_built(build, operator, error):
    def make(scope):
        return build(rows_at_times(scope, TIMED)).records()

    with pytest.raises(at.GraphError) as info:
        run_dataflow(make)
    message = str(info.value)
    assert f"operator {operator!r} in dataflow 'make' on worker 0" in message
    assert error in message


@pytest.mark.parametrize("build, operator, error", [
    (lambda s: s.select("nope"), "Select", "ColumnNotFoundError"),
    (lambda s: s.select(pl.col("w").cast(pl.Int64)), "Select", "InvalidOperationError"),
    (lambda s: s.exchange("nope"), "Exchange", "ColumnNotFoundError"),
])
def test_an_expression_that_fails_on_a_batch_fails_the_dataflow_naming_the_operator(build, operator, error):
    def make(scope):
        unknown = rows_at_times(scope, TIMED).map_batches(lambda df: df.filter(pl.col("x") > 5))  # (schema unknown)
        return build(unknown).records()

    with pytest.raises(at.DataflowError) as info:
        run_dataflow(make, workers=3)
    message = str(info.value)
    assert f"operator {operator!r}" in message and "in dataflow 'make'" in message
    assert "failed at time 4" in message and error in message
    assert (info.value.dataflow, info.value.operator, info.value.time) == ("make", operator, 4)


@pytest.mark.parametrize("fn, schema, error", [
    (lambda df: df.height, None, "returned a int, not a polars DataFrame"),
    (lambda df: df.select("k"), {"k": pl.String}, "not the declared"),
])
def test_map_batches_must_return_a_frame_of_its_declared_schema(fn, schema, error):
    with pytest.raises(at.DataflowError, match=f"operator 'MapBatches'.*{error}"):
        run_dataflow(lambda scope: rows_at_times(scope, TIMED).map_batches(fn, schema=schema).records())


def test_map_batches_refuses_an_async_function():
    async def not_sync(df):
        return df

    with pytest.raises(TypeError, match="async function"):
        run_dataflow(lambda scope: rows_at_times(scope, TIMED).map_batches(not_sync).records())


def test_a_columnar_operator_given_record_batches_says_how_to_make_columns():
    with pytest.raises(at.DataflowError, match="operator 'Select'.*got a list: make a columnar stream with"):
        run_dataflow(lambda scope: ColumnarStream(at.to_stream([(1, 2)], scope), None).select("a").records())


def test_a_record_that_does_not_fit_the_schema_names_the_conversion():
    with pytest.raises(at.DataflowError, match="operator 'Columnar'"):
        run_dataflow(lambda scope: at.to_stream([(1, "a", 2)], scope).columnar({"k": pl.Int64}).records())


def test_from_arrow_refuses_an_item_of_another_schema():
    frames = [pl.DataFrame({"n": [1]}), pl.DataFrame({"m": ["x"]})]
    with pytest.raises(at.DataflowError, match="operator 'FromArrow'.*item 1 of the data has columns"):
        run_dataflow(lambda scope: at.from_arrow(scope, frames, times=[0, 1]).records())
