"""NEXMark Q0-Q8: the record API's rows and the columnar API's equal the plain reference's, on 1 and 3 workers
and (Q4, Q5, Q7) on 2 processes."""

from __future__ import annotations

import pytest

pytest.importorskip("polars")

from aiotimely.testing import run_dataflow  # noqa: E402
from aiotimely.testing.processes import run_processes  # noqa: E402
from benchmarks.nexmark.generator import KINDS, generate  # noqa: E402
from benchmarks.nexmark.params import TESTS  # noqa: E402
from benchmarks.nexmark.run import columnar_build, expected, record_build, rows  # noqa: E402

from . import flows  # noqa: E402

BUILDS = {"records": record_build, "columnar": columnar_build}


@pytest.fixture(scope="module")
def reference() -> dict[int, list]:
    return {query: expected(query, flows.events(), TESTS) for query in range(9)}


def test_every_query_has_rows_to_compare(reference):
    # (Q7 gives a row per window, 3 of them: the highest bids have no ties here)
    assert all(len(reference[q]) >= 3 for q in range(9)), {q: len(r) for q, r in reference.items()}


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("api", ["records", "columnar"])
@pytest.mark.parametrize("query", range(9))
def test_query_gives_the_reference_rows(reference, query, api, workers):
    got = rows(run_dataflow(BUILDS[api](query, flows.events(), TESTS), workers=workers))
    assert got == reference[query]


@pytest.mark.parametrize("query", [4, 5, 7])
@pytest.mark.parametrize("api", ["columnar", pytest.param("records", marks=pytest.mark.slow)])
def test_query_on_two_processes(reference, query, api):
    got = rows(run_processes(getattr(flows, f"q{query}_{api}"), processes=2))
    assert got == reference[query]


def test_the_generator_is_deterministic_and_both_forms_hold_the_same_events():
    a, b = generate(2000, rate=1000, batch=100, seed=3), generate(2000, rate=1000, batch=100, seed=3)
    assert all(a.records(kind) == b.records(kind) for kind in KINDS)
    assert generate(2000, rate=1000, batch=100, seed=4).records("bids") != a.records("bids")
    for kind in KINDS:
        assert a.frame(kind).rows() == a.records(kind)
        times, frames = a.frame_batches(kind, 1, 2)
        assert [r for f in frames for r in f.rows()] == [r for _t, batch in a.record_batches(1, 2)
                                                         for r in batch[kind]]
    assert [len(a.records(kind)) for kind in KINDS] == [40, 120, 1840]      # 1 : 3 : 46 per 50 events
    assert a.times == sorted(set(a.times))                                  # batch times strictly increase
    for kind in KINDS:                                                      # no event before its batch's time
        for time, batch in a.record_batches():
            assert all(r[-1 if kind != "auctions" else 5] >= time for r in batch[kind])


def test_a_batch_shorter_than_a_millisecond_is_refused():
    with pytest.raises(ValueError, match="less than 1 ms"):
        generate(100, rate=10_000, batch=5)
