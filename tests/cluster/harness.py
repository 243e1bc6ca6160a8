"""Starting real processes for the cluster tests, on loopback ports chosen here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aiotimely.launch import free_ports

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROGRAMS = HERE / "programs.py"


class Cluster:
    """N processes of one computation, started directly (not through the launcher)."""

    def __init__(self, target: str, processes: int, workers: int = 1, *, secrets: list[str] | None = None,
                 env: dict[str, str] | None = None, tmp_path: Path, timeout: float = 5.0) -> None:
        self.ports = free_ports(processes)
        hostfile = tmp_path / "hosts.txt"
        hostfile.write_text("".join(f"127.0.0.1:{port}\n" for port in self.ports))
        secrets = secrets or ["cluster-test-secret"] * processes
        self.procs = []
        for p in range(processes):
            full_env = {**os.environ, **(env or {}), "AIOTIMELY_SECRET": secrets[p],
                        "AIOTIMELY_CONNECT_TIMEOUT": str(timeout)}
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "aiotimely", "worker", target, "-w", str(workers), "-n", str(processes),
                 "-p", str(p), "--hostfile", str(hostfile)],
                cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))

    def wait(self, timeout: float = 60) -> list[tuple[int, str, str]]:
        return [finish(proc, timeout, f"process did not end within {timeout} s") for proc in self.procs]


def finish(proc: subprocess.Popen[str], timeout: float, failure: str) -> tuple[int, str, str]:
    """Wait for ``proc`` and return (status, stdout, stderr); if it does not end within ``timeout`` seconds,
    kill it and fail with ``failure`` and what it printed."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{failure}:\n{out}\n{err}") from None
    return proc.returncode, out, err


def launch(target: str, processes: int, workers: int, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """Run ``aiotimely run target -w W -n N`` and return (status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "aiotimely", "run", target, "-w", str(workers), "-n", str(processes),
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def lines_after_prefix(stdout: str) -> list[str]:
    """Output lines without the launcher's ``[process i] `` prefix."""
    return [line.split("] ", 1)[1] if line.startswith("[process ") else line for line in stdout.splitlines()]
