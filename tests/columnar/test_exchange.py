"""Columnar batches cross exchange and broadcast as ArrowBatches, on 1 and 3 workers and between 2 processes (as
Arrow IPC); an exchange by key columns puts equal keys on one worker, the worker a hash of the key columns picks,
the same in every process."""

from __future__ import annotations

from collections import Counter

import pytest

pl = pytest.importorskip("polars")

from aiotimely.columnar.exchange import key_routes  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402
from aiotimely.testing.processes import run_processes  # noqa: E402

from .flows import SCHEMA, rows_at_times, seen_as  # noqa: E402

ROWS = [(i % 7, "abc"[i % 3], i, [i, i + 1]) for i in range(60)]
TIMED = [(t, ROWS[t * 12:(t + 1) * 12]) for t in range(5)]


def worker_of(keys, peers):
    """Where the exchange sends rows with these key values: the routes computed alone, for a frame of them."""
    frame = pl.DataFrame(ROWS, schema=SCHEMA, orient="row")
    routes = key_routes(frame, keys, peers).to_list()
    return {tuple(r[list(SCHEMA).index(k)] for k in keys): to for r, to in zip(ROWS, routes, strict=True)}


def exchanged(scope):
    s = rows_at_times(scope, TIMED)
    return {"by_k": seen_as(s.exchange("k"), "AfterExchange"),
            "by_k_w": seen_as(s.exchange("k", "w"), "AfterExchange2"),
            "broadcast": seen_as(s.broadcast(), "AfterBroadcast"),
            "chained": seen_as(s.exchange("w").filter(pl.col("x") > 10).exchange("k"), "AfterTwo")}


@pytest.mark.parametrize("workers", [1, 3])
def test_batches_stay_arrow_batches_across_exchange_and_broadcast(workers):
    result = run_dataflow(exchanged, workers=workers)
    for name in ("by_k", "by_k_w", "broadcast", "chained"):
        assert {kind for _, (kind, _, _) in result[name].pairs()} == {"ArrowBatch"}, name
    got = result["by_k"].pairs()
    assert sorted((t, r) for t, (_, _, r) in got) == sorted((i // 12, r) for i, r in enumerate(ROWS))
    routes = worker_of(["k"], workers)
    assert all(routes[(r[0],)] == w for _, (_, w, r) in got)          # each row on its key's worker
    routes2 = worker_of(["k", "w"], workers)
    assert all(routes2[(r[0], r[1])] == w for _, (_, w, r) in result["by_k_w"].pairs())
    assert sorted(r for _, (_, _, r) in result["chained"].pairs()) == sorted(r for r in ROWS if r[2] > 10)
    copies = Counter(r[2] for _, (_, _, r) in result["broadcast"].pairs())   # (x is unique)
    assert copies == Counter({r[2]: workers for r in ROWS})


def test_equal_keys_meet_on_one_worker_and_keys_spread_over_workers():
    result = run_dataflow(exchanged, workers=3)
    workers_of_key = {}
    for _, (_, w, r) in result["by_k"].pairs():
        workers_of_key.setdefault(r[0], set()).add(w)
    assert all(len(ws) == 1 for ws in workers_of_key.values())
    assert len({w for ws in workers_of_key.values() for w in ws}) > 1


def two_processes(scope):
    return {"by_k": seen_as(rows_at_times(scope, TIMED).exchange("k"), "AfterExchange"),
            "routes": rows_at_times(scope, TIMED).exchange("k").map_batches(
                lambda df: df.with_columns(route=key_routes(df, ["k"], 4))).records()}


def test_batches_cross_processes_as_arrow_batches_to_the_same_workers():
    result = run_processes(two_processes, processes=2, workers=2)
    got = result["by_k"].pairs()
    assert {kind for _, (kind, _, _) in got} == {"ArrowBatch"}
    assert sorted(r for _, (_, _, r) in got) == sorted(ROWS)
    routes = worker_of(["k"], 4)                                     # computed in this process
    assert all(routes[(r[0],)] == w for _, (_, w, r) in got)
    # and the receiving process computes the same route for each row it got
    for w, outputs in result["routes"].workers.items():
        assert all(r[-1] == w for r in outputs.records())
