"""Real processes killed with SIGKILL mid-run and restarted with the same recovery directory on other numbers of
processes and workers (tests/recovery/test_stops.py's harness): the columnar windows published equal a
crash-free run's (nothing lost; a window published twice has the same count)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("polars")

from aiotimely.launch import free_ports  # noqa: E402

from .window_program import truth  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent


class Program:
    """tests/columnar/window_program.py's processes, writing windows to one file, with one recovery directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.out = tmp_path / "windows.jsonl"
        self.state = tmp_path / "state"

    def start(self, processes: int, workers: int) -> list[subprocess.Popen]:
        hosts = self.tmp_path / "hosts.txt"
        hosts.write_text("".join(f"127.0.0.1:{port}\n" for port in free_ports(processes)))
        env = {**os.environ, "AIOTIMELY_SECRET": "columnar-kill-test", "AIOTIMELY_CONNECT_TIMEOUT": "20"}
        procs = [subprocess.Popen(
            [sys.executable, "-m", "tests.columnar.window_program", str(self.out), str(self.state),
             "-w", str(workers), "-n", str(processes), "-p", str(p), "--hostfile", str(hosts)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in range(processes)]
        for proc in procs:
            assert proc.stdout is not None
            assert "building" in proc.stdout.readline()
        return procs

    def windows(self) -> dict[tuple[int, str], set[int]]:
        seen: dict[tuple[int, str], set[int]] = {}
        if self.out.exists():
            for line in self.out.read_text().splitlines():
                start, key, count = json.loads(line)
                seen.setdefault((start, key), set()).add(count)
        return seen


def ended(procs: list[subprocess.Popen], timeout: float = 60) -> list[tuple[int, str]]:
    results = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        results.append((proc.returncode, err))
    return results


def test_killed_processes_resume_rescaled_to_the_crash_free_windows(tmp_path):
    rng = random.Random(3)
    program = Program(tmp_path)
    for processes, workers in [(2, 1), (1, 3), (2, 2)]:
        procs = program.start(processes, workers)
        time.sleep(rng.uniform(1.0, 2.0))
        victim = rng.choice(procs)
        if victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
        ended(procs)                                   # the others end on their own: their peer is gone
    published = len(program.windows())
    assert 0 < published < len(truth()), "the kills came after the end, or before anything was published"
    for code, err in ended(program.start(2, 1), timeout=180):
        assert code == 0, err[-3000:]
    expected = truth()
    seen = program.windows()
    wrong = {key: counts for key, counts in seen.items() if counts != {expected.get(key)}}
    assert wrong == {}, f"windows published with values a crash-free run never publishes: {wrong}"
    assert set(seen) == set(expected), f"windows missing: {sorted(set(expected) - set(seen))}"
