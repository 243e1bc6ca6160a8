"""What the columnar benchmarks share: each measurement in a process of its own (so that its peak memory is its
own, and ``POLARS_MAX_THREADS`` is read fresh), 2-process runs over loopback, and a table with ratios."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from .common import ROOT, run_processes


def peak_mib() -> int:
    """This process's peak resident memory, MiB (``VmHWM``: not carried over from the parent, as ``ru_maxrss``
    may be)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def warm_up() -> None:
    """Import and first-call what the columnar path loads lazily (PyArrow's IPC and compute modules: a tenth of
    a second or more, once a process), so that timings measure the work, not the imports."""
    import polars as pl
    import pyarrow.compute  # noqa: F401
    import pyarrow.ipc  # noqa: F401

    from aiotimely.columnar.batch import ArrowBatch
    from aiotimely.columnar.exchange import key_routes

    frame = pl.DataFrame({"w": ["a", "b"], "n": [1, 2]})
    ArrowBatch.from_ipc(ArrowBatch(frame).to_ipc())
    key_routes(frame, ["w"], 2)
    key_routes(frame, ["w", "n"], 2)


def finish(results: list[tuple[float, list[tuple[float, Any]]]]) -> float:
    """Seconds from the first worker's start to its last result: ``results`` are each worker's ``(start,
    [(when, result), ...])`` (``time.perf_counter``, one clock for every process of the machine)."""
    starts = [started for started, _ in results]
    ends = [when for _, outs in results for when, _ in outs] or starts
    return max(ends) - min(starts)


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path, **(extra or {})}


def run_child(module: str, args: list[str], env: dict[str, str] | None = None, timeout: float = 1200) -> Any:
    """``python -m module --child *args`` in a process of its own; the JSON of its last line."""
    done = subprocess.run([sys.executable, "-m", module, "--child", *args], cwd=ROOT, env=_env(env),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def run_cluster(module: str, args: list[str], processes: int, env: dict[str, str] | None = None,
                timeout: float = 1200, worker_flag: str = "--worker") -> list[Any]:
    """``python -m module --worker *args`` (or another ``worker_flag``) as ``processes`` processes of one
    computation on loopback, in this environment with ``env`` (no inherited Polars thread count); each prints
    a JSON report as its last line: the reports, in process order."""
    return run_processes(module, args, processes, timeout, env=_env(env), worker_flag=worker_flag)


def ratio_rows(title: str, runs: dict[str, Any], units: int, unit: str,
               ratios: list[tuple[str, str, str]], threads: list[int]) -> str:
    """The runs (median and range of seconds, rate, peak RSS), then each ratio ``(label, slower, faster)`` (names
    with ``{t}`` for the thread setting) as ``slower's median / faster's median``, for each thread setting."""
    lines = [title, f"{'':46} {'median s':>9} {'min..max s':>17} {unit:>12} {'peak RSS':>9}"]
    for name, run in runs.items():
        s = run["seconds"]
        rate = f"{units / run['median'] / 1e6:9.2f} M" if run["median"] > 0 else "-"
        lines.append(f"{name:46} {run['median']:9.3f} {s[0]:8.3f}..{s[-1]:<8.3f} {rate:>12} "
                     f"{run['peak_mib']:6d} MiB")
    for t in threads:
        label = "1 thread" if t else "default threads"
        for text, slower, faster in ratios:
            a, b = runs.get(slower.format(t=label)), runs.get(faster.format(t=label))
            if a and b:
                lines.append(f"  {text.format(t=label):60} {a['median'] / b['median']:6.2f}x")
    return "\n".join(lines)
