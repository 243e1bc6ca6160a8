"""Every example runs and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str) -> list[str]:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=60)
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
