"""Graceful stops of a recoverable computation, with real processes and real signals: a SIGTERM suspends the
dataflows at a final snapshot without closing a window early, so stops and restarts (and SIGKILLs between them,
on other numbers of workers and processes, with a process that builds late behind a backlog) publish only the
windows a crash-free run publishes, each with its crash-free value."""

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

from aiotimely.launch import free_ports

from .stop_program import truth

ROOT = Path(__file__).resolve().parent.parent.parent
SUSPENDED_LINE = "aiotimely: stopped by SIGTERM at a final snapshot"


class Program:
    """tests/recovery/stop_program.py's processes, writing windows to one file, with one recovery directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.out = tmp_path / "windows.jsonl"
        self.state = tmp_path / "state"

    def start(self, processes: int, workers: int, late: float = 0.0) -> list[subprocess.Popen]:
        hosts = self.tmp_path / "hosts.txt"
        hosts.write_text("".join(f"127.0.0.1:{port}\n" for port in free_ports(processes)))
        env = {**os.environ, "AIOTIMELY_SECRET": "stop-test", "AIOTIMELY_CONNECT_TIMEOUT": "20"}
        procs = [subprocess.Popen(
            [sys.executable, "-m", "tests.recovery.stop_program", str(self.out), str(self.state),
             "--late", str(late), "-w", str(workers), "-n", str(processes), "-p", str(p),
             "--hostfile", str(hosts)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in range(processes)]
        for proc in procs:  # running: a signal now is aiotimely's to handle (not Python's, as while importing)
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

    def check(self) -> None:
        expected = truth()
        seen = self.windows()
        wrong = {key: counts for key, counts in seen.items() if counts != {expected.get(key)}}
        assert wrong == {}, f"windows published with values a crash-free run never publishes: {wrong}"
        assert set(seen) == set(expected), f"windows missing: {sorted(set(expected) - set(seen))}"


def ended(procs: list[subprocess.Popen], timeout: float = 60) -> list[tuple[int, str]]:
    """Each process's exit status and stderr."""
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


def test_sigterm_then_restart_publishes_only_crash_free_windows(tmp_path):
    program = Program(tmp_path)
    for delay in (1.0, 1.4, 0.8):
        (proc,) = program.start(1, 2)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        ((code, err),) = ended([proc])
        assert code == 143, err[-3000:]
        assert SUSPENDED_LINE in err, err[-3000:]
    resumed = len(program.windows())
    assert 0 < resumed < len(truth()), "the stops came after the end, or before anything was published"
    ((code, err),) = ended(program.start(1, 2), timeout=120)
    assert code == 0, err[-3000:]
    program.check()


@pytest.mark.slow
def test_twenty_stops_and_kills_alternating_rescaled_with_a_late_process(tmp_path):
    """SIGTERM (every process) and SIGKILL (one process) by turns, twenty times, at random points, on 2 processes
    and then on other shapes, one process building late behind its peers' backlog: the windows equal a
    crash-free run's."""
    rng = random.Random(7)
    program = Program(tmp_path)
    shapes = [(2, 1), (1, 2), (2, 2), (1, 3), (3, 1)]
    rounds = 0
    while rounds < 20:
        processes, workers = shapes[rounds % len(shapes)]
        procs = program.start(processes, workers, late=0.4 if rounds % 3 == 0 else 0.0)
        time.sleep(rng.uniform(0.6, 2.0))
        if rounds % 2 == 0:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            ends = ended(procs)
            # (0: it had reached the end of its input; -15: the signal came as it exited, its handler gone, and
            # its peer may then lose it)
            if all(code != -signal.SIGTERM for code, _ in ends):
                for code, err in ends:
                    assert code in (0, 143), err[-3000:]
                    assert code == 0 or SUSPENDED_LINE in err, err[-3000:]
        else:
            victim = rng.choice(procs)
            if victim.poll() is None:
                victim.send_signal(signal.SIGKILL)
            ended(procs)                                # the others end on their own: their peer is gone
        rounds += 1
    for code, err in ended(program.start(2, 1), timeout=180):
        assert code == 0, err[-3000:]
    program.check()


def test_an_application_cancelled_inside_async_with_resumes_its_open_windows(tmp_path):
    """The application form: cancelling the task that runs ``async with at.Worker(recovery=...)`` suspends its
    dataflows at a final snapshot; a second run with the same directory ends them with crash-free windows."""
    import asyncio

    import aiotimely as at
    from aiotimely.recovery import Recovery

    from .stop_program import EVERY, build

    out = tmp_path / "windows.jsonl"

    async def application() -> None:
        async with at.Worker(recovery=Recovery(tmp_path / "state", every=EVERY)) as worker:
            await build(str(out), 0.0)(worker)
            await worker.step_until_done()     # the body awaits: the cancellation lands in it

    async def stopped_after(seconds: float) -> None:
        task = asyncio.create_task(application())
        await asyncio.sleep(seconds)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(stopped_after(1.0))
    program = Program(tmp_path)
    published = len(program.windows())
    assert 0 < published < len(truth())
    asyncio.run(application())
    program.check()
