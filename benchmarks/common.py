"""What every benchmark shares: repeats and medians, running the peers, tables and JSON.

The peers are programs in :mod:`benchmarks.peers`, run in processes of their own from
the repository; everything they read is made by the benchmarks (nothing outside the
repository is read). bytewax and quixstreams are bench-only extras (``pip install -e
'.[bench]'``): a peer that is not installed is reported as skipped, not as a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def command_line(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """The command line every benchmark starts from: its docstring as help and ``--quick`` for a smoke run."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser


def stats(samples: list[float]) -> dict[str, float]:
    """min / median / max of a list of samples."""
    ordered = sorted(samples)
    return {"min": ordered[0], "median": statistics.median(ordered), "max": ordered[-1], "runs": len(ordered)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def repeat(fn: Callable[[], tuple[float, Any]], repeats: int) -> tuple[dict[str, float], Any]:
    """Run ``fn`` (returning ``(seconds, result)``) ``repeats`` times; the stats and the last result."""
    samples, result = [], None
    for _ in range(repeats):
        seconds, result = fn()
        samples.append(seconds)
    return stats(samples), result


def have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def missing(*modules: str) -> str | None:
    """A one-line note naming the first of ``modules`` not installed (``None``: all are)."""
    for module in modules:
        if not have(module):
            return f"{module} not installed (pip install -e '.[bench]')"
    return None


def run_peer(args: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> list[dict]:
    """Run ``python ARGS`` (a peer of :mod:`benchmarks.peers`) from the repository; return the JSON records its
    workers wrote into ``$PEER_CHECK_DIR`` or, if none, the JSON lines it printed."""
    with tempfile.TemporaryDirectory() as check_dir:
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        full_env = {**os.environ, "PYTHONPATH": path, "PEER_CHECK_DIR": check_dir, **(env or {})}
        done = subprocess.run([sys.executable, *args], cwd=ROOT, env=full_env, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
        records = [json.loads(p.read_text()) for p in sorted(Path(check_dir).glob("*.json"))]
        if not records:
            records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        return records


def run_processes(module: str, args: list[str], processes: int, timeout: float = 600, *,
                  env: dict[str, str] | None = None, worker_flag: str = "--worker") -> list[dict[str, Any]]:
    """Run ``python -m module --worker *args`` (or another ``worker_flag``) as ``processes`` processes of one
    computation on loopback, in environment ``env`` (default: this process's); each prints a JSON report as its
    last line: the reports, in process order."""
    from aiotimely.launch import free_ports

    ports = free_ports(processes)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as hosts:
        hosts.write("".join(f"127.0.0.1:{p}\n" for p in ports))
    full = {**(os.environ if env is None else env), "AIOTIMELY_SECRET": "bench"}
    try:
        procs = [subprocess.Popen([sys.executable, "-m", module, worker_flag, *args, "-n", str(processes),
                                   "-p", str(p), "--hostfile", hosts.name],
                                  cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for p in range(processes)]
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        os.unlink(hosts.name)
    reports = []
    for p, (out, err) in zip(procs, outs, strict=True):
        if p.returncode != 0:
            raise RuntimeError(f"{module} process failed:\n{err[-3000:]}")
        reports.append(json.loads(out.splitlines()[-1]))
    return reports


def in_process_seconds(records: list[dict]) -> float:
    """A peer's dataflow time: first source built to last sink closed, as its check files say."""
    return max(r["t_close"] for r in records) - min(r["t_build"] for r in records)


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def table(title: str, rows: list[tuple[str, dict[str, float], str]], unit_per: float, unit: str,
          baseline: str) -> str:
    """Rows of ``(name, seconds stats, note)`` as text, with rate per ``unit`` and ratio to ``baseline``."""
    base = next((s["median"] for name, s, _ in rows if name == baseline and s), None)
    lines = [title, f"{'':42} {'median s':>9} {'min..max s':>15} {unit:>12} {'vs ' + baseline:>18}"]
    for name, s, note in rows:
        if not s:
            lines.append(f"{name:42} {'skipped':>9}   {note}")
            continue
        ratio = f"{base / s['median']:.2f}x" if base else "-"
        lines.append(
            f"{name:42} {s['median']:9.3f} {s['min']:7.3f}..{s['max']:<7.3f} "
            f"{unit_per / s['median'] / 1e6:10.2f} M {ratio:>17}  {note}"
        )
    return "\n".join(lines)


def save(name: str, results: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **results}, indent=2, default=str))
    return path
