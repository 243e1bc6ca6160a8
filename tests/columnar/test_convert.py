"""Records and columns convert into each other: ``stream.columnar(schema)`` and ``records()``, batch by batch;
``aiotimely.from_arrow`` introduces PyArrow tables and record batches and Polars frames, at times."""

from __future__ import annotations

import subprocess
import sys

import pytest

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

from .flows import SCHEMA, by_time, seen_as  # noqa: E402

row = st.tuples(st.integers(-(2 ** 63), 2 ** 63 - 1) | st.none(), st.text(max_size=5) | st.none(),
                st.integers(-9, 9), st.lists(st.integers(0, 9), max_size=3))
timed_rows = st.lists(st.tuples(st.integers(0, 3), st.lists(row, max_size=10)), max_size=4).map(
    lambda items: sorted(items, key=lambda item: item[0]))


def records_at_times(scope, timed):
    """Worker 0 sends each ``(time, rows)`` as records, through an input handle."""
    handle = at.InputHandle()
    stream = handle.to_stream(scope)
    for t, rows in timed if scope.worker.index == 0 else []:
        handle.advance_to(t)
        handle.send_batch(rows)
    handle.close()
    return stream


@settings(max_examples=30, deadline=None)
@given(timed=timed_rows, workers=st.sampled_from([1, 3]))
def test_records_to_columns_to_records_gives_the_records_back(timed, workers):
    got = run_dataflow(lambda scope: records_at_times(scope, timed).columnar(SCHEMA).exchange("w").records()
                       .columnar(SCHEMA).records(), workers=workers)
    assert got == by_time(timed)


def test_dict_records_become_columns_by_name_and_a_pyarrow_schema_is_taken():
    schema = pa.schema([("w", pa.string()), ("k", pa.int64())])
    got = run_dataflow(lambda scope: at.to_stream([{"k": 1, "w": "a"}, {"w": "b", "k": 2}], scope)
                       .columnar(schema).select("k", "w").records())
    assert got == {0: [(1, "a"), (2, "b")]}


def test_each_batch_of_records_becomes_one_arrow_batch():
    timed = [(0, [(1, "a", 1, [])] * 3), (2, [(2, "b", 2, [1])])]
    got = run_dataflow(lambda scope: seen_as(records_at_times(scope, timed).columnar(SCHEMA), "Seen"))
    assert got == {0: [("ArrowBatch", 0, (1, "a", 1, []))] * 3, 2: [("ArrowBatch", 0, (2, "b", 2, [1]))]}


def test_from_arrow_takes_tables_record_batches_and_frames_at_their_times():
    frame = pl.DataFrame({"k": [1, 2, 3], "w": ["a", "b", "c"]})
    table = frame.to_arrow()
    record = table.to_batches()[0]

    def build(scope):
        return {"data": at.from_arrow(scope, [frame, table, record], times=[0, 3, 5]).records(),
                "one": at.from_arrow(scope, table, rows=2).inspect_batch(lambda t, df: sizes.append(df.height))
                .records()}

    sizes = []
    got = run_dataflow(build)
    rows = [(1, "a"), (2, "b"), (3, "c")]
    assert got["data"] == {0: rows, 3: rows, 5: rows}
    assert got["one"] == {0: rows} and sizes == [2, 1]


def test_from_arrow_on_three_workers_introduces_what_each_is_given():
    frames = [pl.DataFrame({"n": list(range(i * 10, i * 10 + 10))}) for i in range(3)]
    got = run_dataflow(lambda scope: at.from_arrow(scope, frames[scope.worker.index]).records(), workers=3)
    assert sorted(got.records()) == [(n,) for n in range(30)]
    assert all(outputs.records() == [(n,) for n in range(w * 10, w * 10 + 10)] for w, outputs in got.workers.items())


def test_from_arrow_of_nothing_needs_a_schema():
    with pytest.raises(at.GraphError, match="schema="):
        run_dataflow(lambda scope: at.from_arrow(scope, []).records())
    assert run_dataflow(lambda scope: at.from_arrow(scope, [], schema={"n": pl.Int64}).records()) == {}


def test_importing_aiotimely_does_not_import_polars():
    code = "import sys, aiotimely; assert 'polars' not in sys.modules and 'pyarrow' not in sys.modules; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout == "ok\n", done.stderr
