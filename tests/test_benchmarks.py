"""The benchmarks run and check their own results (figures are reported, never asserted)."""

from __future__ import annotations

import pytest

from benchmarks import tracker


def test_tracker_benchmark_quick_run_checks_its_results():
    results = tracker.main(["--quick"])
    assert set(results["runs"]) == {"chain/advance", "chain/records", "dag/advance", "dag/records"}
    # a capability moving down a 50-operator chain moves 4 frontier elements per operator (2 locations, -1 and +1)
    assert results["runs"]["chain/advance"]["frontier_changes_per_step"] == 4 * 50 - 2
    assert results["runs"]["dag/records"]["frontier_changes_per_step"] == 0


def test_pipeline_benchmark_quick_run_checks_its_sums():
    from benchmarks import pipeline

    results = pipeline.main(["--quick"])
    assert "aiotimely 1 worker (asyncio)" in results["runs"]


def test_wordcount_benchmark_quick_run_checks_its_counts():
    from benchmarks import wordcount
    from benchmarks.common import ANCHORS

    if not (ANCHORS / "gen_corpus.py").exists():
        pytest.skip(f"the anchors (../shared/anchors) are not beside the repository: {ANCHORS}")

    results = wordcount.main(["--quick"])
    assert results["words"] == 100_000
    assert "aiotimely book operator, 2 worker(s)" in results["runs"]


def test_exchange_benchmark_quick_run_moves_every_record():
    from benchmarks import exchange

    results = exchange.main(["--quick"])
    assert results["records"] == 100_000
    assert any(name.startswith("aiotimely") for name in results["runs"])
