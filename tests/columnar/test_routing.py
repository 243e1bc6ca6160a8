"""A columnar exchange by key columns routes each row as the record path's ``aiotimely.route`` routes its key (the
value of its one key column, or the tuple of them), for the types both paths share; a record stream and a columnar
stream exchanged by the same key meet on the same worker; other types warn and still route alike everywhere."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import warnings

import pytest

pl = pytest.importorskip("polars")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely import route  # noqa: E402
from aiotimely.columnar.exchange import RouteWarning, key_hash, key_routes, routes_alike  # noqa: E402
from aiotimely.comm.routing import stable_hash  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

INT_TYPES = {pl.Int8: 8, pl.Int16: 16, pl.Int32: 32, pl.Int64: 64}
UINT_TYPES = {pl.UInt8: 8, pl.UInt16: 16, pl.UInt32: 32, pl.UInt64: 64}


def column(draw, kind):
    """A column of ``kind``'s values (some null), with its Polars type."""
    n = draw(st.integers(1, 30))
    if kind in INT_TYPES:
        bits = INT_TYPES[kind]
        values = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif kind in UINT_TYPES:
        values = st.integers(0, (1 << UINT_TYPES[kind]) - 1)
    elif kind == pl.Boolean:
        values = st.booleans()
    elif kind in (pl.String, pl.Categorical):
        values = st.text(max_size=12)
    elif kind == pl.Binary:
        values = st.binary(max_size=12)
    elif kind == pl.Date:
        values = st.dates()
    elif kind.time_unit == "ns":
        values = st.datetimes(min_value=dt.datetime(1678, 1, 2), max_value=dt.datetime(2261, 12, 30))
    else:
        values = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30))
    picked = draw(st.lists(st.one_of(st.none(), values) | values, min_size=n, max_size=n))
    return picked, (pl.Categorical if kind == pl.Categorical else kind)


KINDS = [*INT_TYPES, *UINT_TYPES, pl.Boolean, pl.String, pl.Categorical, pl.Binary, pl.Date,
         pl.Datetime("us"), pl.Datetime("ms"), pl.Datetime("ns"), pl.Datetime("us", "UTC")]


@st.composite
def key_frames(draw):
    """A frame of 1..3 key columns of random routable types (and their Python values, as records hold them)."""
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    n = draw(st.integers(1, 30))
    data = {}
    for i, kind in enumerate(kinds):
        values, dtype = column(draw, kind)
        values = (values * n)[:n]
        if isinstance(dtype, pl.Datetime) and dtype.time_unit == "ms":
            values = [None if v is None else v.replace(microsecond=v.microsecond // 1000 * 1000) for v in values]
        series = pl.Series(f"c{i}", values, dtype=pl.Datetime("us") if isinstance(dtype, pl.Datetime) else None,
                           strict=False)
        data[f"c{i}"] = series.cast(dtype)
    return pl.DataFrame(data)


@settings(max_examples=300, deadline=None)
@given(key_frames())
def test_columnar_routes_equal_the_record_paths_for_every_shared_type(frame):
    keys = frame.columns
    rows = frame.rows()                             # the values as the record path holds them
    records = [r[0] if len(keys) == 1 else r for r in rows]
    assert key_hash(frame, keys).to_list() == [stable_hash(k, strict=True) for k in records]
    for peers in range(1, 6):
        assert key_routes(frame, keys, peers).to_list() == [route(k, peers, strict=True) for k in records]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=8) | st.integers(-(1 << 63), (1 << 63) - 1).map(str), min_size=1, max_size=40),
       st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=1, max_size=40))
def test_word_and_number_tuples_route_alike(words, numbers):
    n = min(len(words), len(numbers))
    frame = pl.DataFrame({"w": words[:n], "n": numbers[:n]}, schema={"w": pl.String, "n": pl.Int64})
    for peers in range(1, 6):
        assert key_routes(frame, ["w", "n"], peers).to_list() == [route(r, peers) for r in frame.rows()]
        assert key_routes(frame, ["n", "w"], peers).to_list() == [route((b, a), peers) for a, b in frame.rows()]


def test_other_types_warn_once_and_still_route_the_same_in_every_process():
    frame = pl.DataFrame({"x": [1.5, 2.0, None], "k": [1, 2, 3]})
    assert not routes_alike(pl.Float64) and routes_alike(pl.Int64)
    assert not routes_alike(pl.Datetime("us", "Europe/Paris")) and routes_alike(pl.Datetime("ns", "UTC"))
    with pytest.warns(RouteWarning, match="'x' \\(Float64\\)"):
        first = key_routes(frame, ["x", "k"], 3).to_list()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert key_routes(frame, ["x", "k"], 3).to_list() == first        # (warned once)
    program = ("import polars as pl, warnings; warnings.simplefilter('ignore');"
               "from aiotimely.columnar.exchange import key_routes;"
               "print(key_routes(pl.DataFrame({'x': [1.5, 2.0, None], 'k': [1, 2, 3]}), ['x', 'k'], 3).to_list(),"
               "key_routes(pl.DataFrame({'w': ['a', 'bb', 'ccc']}), ['w'], 5).to_list())")
    seen = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("1", "2")}
    assert seen == {f"{first} {[route(w, 5) for w in ['a', 'bb', 'ccc']]}\n"}


ROWS = [(f"user{i % 23}", i % 11, i) for i in range(300)]
SCHEMA = {"user": pl.String, "n": pl.Int64, "x": pl.Int64}


def join_both(scope):
    """Records keyed by ``(user, n)`` on the record path and rows exchanged by columns ``user, n``: each worker
    sees which keys came by which path; a join by key on one worker needs both on it."""
    mine = ROWS if scope.worker.index == 0 else []
    records = at.to_stream(mine, scope).exchange(lambda r: (r[0], r[1]))
    columns = at.to_stream(mine, scope).columnar(SCHEMA).exchange("user", "n").records()
    by_user = at.to_stream(mine, scope).exchange(lambda r: r[0])
    columns_by_user = at.to_stream(mine, scope).columnar(SCHEMA).exchange("user").records()
    joined = _join_on_worker(records.map(lambda r: ("rec", r)).concat(columns.map(lambda r: ("col", r))))
    return {"joined": joined, "by_user": by_user.map(lambda r: (scope.worker.index, r[0])),
            "columns_by_user": columns_by_user.map(lambda r: (scope.worker.index, r[0]))}


def _join_on_worker(both):
    """A join of the two sides by key on the worker they are on (no exchange), once everything is in: each key's
    values from either side."""

    @both.unary(name="Join", interest=at.FrontierInterest.ALWAYS)
    async def logic(input, output, cap):
        sides = {}
        async for _ in input.activations():
            for _time, batch in input.drain():
                for side, r in batch:
                    sides.setdefault((r[0], r[1]), {"rec": [], "col": []})[side].append(r[2])
            if not input.frontier:
                break
        output.session(cap).give_many((key, sorted(f["rec"]), sorted(f["col"])) for key, f in sides.items())
        cap.drop()

    return logic


def test_a_record_stream_and_a_columnar_stream_meet_on_the_same_worker_by_key():
    result = run_dataflow(join_both, workers=3)
    joined = [r for _, rs in result["joined"].items() for r in rs]
    keys = {(u, n) for u, n, _ in ROWS}
    assert sorted(k for k, _, _ in joined) == sorted(keys)             # each key joined once: on one worker
    for key, recs, cols in joined:
        assert recs == cols == sorted(x for u, n, x in ROWS if (u, n) == key)
    by_user = {r for _, rs in result["by_user"].items() for r in rs}
    assert by_user == {r for _, rs in result["columns_by_user"].items() for r in rs}
    assert len({w for w, _ in by_user}) == 3                           # (the keys spread over the workers)
