"""ArrowBatch as a container: rows as tuples, runs of rows, one vectorized split by route, its size, and Arrow IPC
on the wire (in halves when a frame is too small), held as a Polars frame or a pyarrow record batch alike."""

from __future__ import annotations

import pickle

import pytest

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from aiotimely.columnar import ArrowBatch  # noqa: E402
from aiotimely.comm.codec import RecordCodec  # noqa: E402
from aiotimely.dataflow.channels import DataCodec  # noqa: E402
from aiotimely.dataflow.containers import Container, copy_batch, is_container  # noqa: E402
from aiotimely.progress import timestamp_type  # noqa: E402

SCHEMA = {"k": pl.Int64, "w": pl.String, "l": pl.List(pl.Int64)}
row = st.tuples(st.integers(-5, 5), st.text("abc", max_size=3), st.lists(st.integers(0, 9), max_size=3))
rows = st.lists(row, max_size=30)


def batch_of(records, arrow=False):
    frame = pl.DataFrame(records, schema=SCHEMA, orient="row")
    return ArrowBatch(frame.to_arrow().to_batches()[0] if arrow and records else frame)


@pytest.mark.parametrize("arrow", [False, True])
def test_a_batch_is_a_registered_container_whose_records_are_its_rows(arrow):
    records = [(1, "a", [1, 2]), (2, "b", []), (3, "c", [3])]
    batch = batch_of(records, arrow)
    assert isinstance(batch, Container) and is_container(batch)
    assert len(batch) == 3 and list(batch) == records
    assert list(batch[1:]) == records[1:] and type(batch[1:]) is ArrowBatch
    assert copy_batch(batch) is batch                     # immutable: consumers share it
    assert batch.nbytes > 0
    assert isinstance(batch.to_arrow(), pa.RecordBatch) and batch.to_arrow().num_rows == 3
    assert batch.to_polars().rows() == records
    assert batch.schema == pl.Schema(SCHEMA)


def test_a_frame_handed_out_is_the_callers_own():
    batch = batch_of([(1, "a", [1])])
    mine = batch.to_polars()
    mine.insert_column(0, pl.Series("extra", [9]))
    assert batch.frame.columns == ["k", "w", "l"]


@settings(max_examples=60, deadline=None)
@given(records=rows, parts=st.integers(1, 5), data=st.data(), arrow=st.booleans())
def test_partition_puts_row_i_in_part_routes_i_keeping_order(records, parts, data, arrow):
    routes = data.draw(st.lists(st.integers(0, parts - 1), min_size=len(records), max_size=len(records)))
    split = batch_of(records, arrow).partition(routes, parts)
    assert len(split) == parts and all(type(part) is ArrowBatch for part in split)
    routed = list(zip(records, routes, strict=True))
    assert [list(part) for part in split] == [[r for r, to in routed if to == p] for p in range(parts)]
    assert all(part.schema == pl.Schema(SCHEMA) for part in split)


@settings(max_examples=40, deadline=None)
@given(records=rows, arrow=st.booleans())
def test_a_batch_crosses_as_arrow_ipc_and_pickles(records, arrow):
    batch = batch_of(records, arrow)
    wire = batch.to_ipc()
    assert pa.ipc.open_stream(wire).read_all().num_rows == len(records)   # plain Arrow IPC: any reader
    for copy in (ArrowBatch.from_ipc(wire), pickle.loads(pickle.dumps(batch))):
        assert list(copy) == records and copy.schema == pl.Schema(SCHEMA)


def test_a_batch_too_big_for_a_frame_crosses_in_halves_each_an_arrow_batch():
    codec = DataCodec(timestamp_type(int), RecordCodec())
    records = [(i, str(i) * 20, [i]) for i in range(200)]
    payloads = codec.encode((7, batch_of(records)), 4000)
    assert len(payloads) > 1
    parts = [codec.decode(p) for p in payloads]
    assert all(time == 7 and type(part) is ArrowBatch for time, part in parts)
    assert [r for _, part in parts for r in part] == records


def test_a_batch_holds_a_frame_or_a_record_batch_only():
    with pytest.raises(TypeError, match="not a pyarrow.lib.Table"):
        ArrowBatch(pa.table({"n": [1]}))
