"""Run a dataflow on N real processes over loopback TCP, as ``aiotimely run`` does, and collect its outputs.

The build function is named by ``"module:function"`` or ``"path/to/file.py:function"``
(or given as a function defined at the top level of a module), and has the shape
:func:`~aiotimely.testing.run_dataflow` takes: ``build(scope)`` returns the stream to
collect, or a dict of named streams. Each process (``python -m aiotimely.testing.child``)
runs its workers to completion and writes what they captured to a file of a private
temporary folder; this process reads and merges them. A process that fails makes
the others stop too, and the error shows every process's exit status and output.

The files are pickles: they are written by the processes started here, running the
test's own code, into a folder only this user can read, so reading them runs
nothing the test did not already run; and records come back exactly as the dataflow
left them (a pickle keeps lists, tuples and classes apart).
"""

from __future__ import annotations

import os
import pickle
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import AiotimelyError
from ..launch import free_ports
from .running import merge

__all__ = ["run_processes", "ProcessesFailed", "target_of"]

TIMEOUT = 120.0
"""Seconds a run over processes may take by default."""
GRACE = 5.0
"""Seconds the other processes get to end after one of them failed, before they are killed."""


class ProcessesFailed(AiotimelyError):
    """A process of a test run failed, or the run did not end in time; the message shows each process's status
    and what it printed."""


def target_of(build: str | Callable[..., Any]) -> str:
    """``"module:function"`` for a function defined at the top level of a module (``path.py:function`` for one of
    a script run as ``__main__``); a string is returned as it is."""
    if isinstance(build, str):
        if ":" not in build:
            raise ValueError(f"{build!r} is not 'module:function' or 'path/to/file.py:function'")
        return build
    qualname, module = getattr(build, "__qualname__", ""), getattr(build, "__module__", None)
    if not qualname or "<" in qualname or module is None:
        raise ValueError(f"run_processes needs a function defined at the top level of a module (each process "
                         f"imports it), or 'module:function'; {build!r} is not one")
    if module == "__main__":
        return f"{sys.modules['__main__'].__file__}:{qualname}"
    return f"{module}:{qualname}"


def run_processes(build: str | Callable[..., Any], processes: int = 2, workers: int = 1, *,
                  timeout: float = TIMEOUT, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                  loop: str = "auto") -> Any:
    """Run ``build`` (``"module:function"``, ``"file.py:function"`` or a top-level function) on ``processes``
    processes of ``workers`` workers each, over loopback TCP, to completion; return its :class:`Outputs`
    merged over every worker (a dict of them for a dict of named streams).

    ``args`` are passed to the processes (``sys.argv[1:]`` of each), ``env`` added to their environment.
    Raises :class:`ProcessesFailed` if a process fails or the run takes longer than ``timeout`` seconds.
    """
    if processes < 1 or workers < 1:
        raise ValueError(f"run_processes needs at least one process and one worker, not {processes} and {workers}")
    target = target_of(build)
    with tempfile.TemporaryDirectory(prefix="aiotimely-test-") as folder:
        here = Path(folder)
        hostfile = here / "hosts.txt"
        hostfile.write_text("".join(f"127.0.0.1:{port}\n" for port in free_ports(processes)))
        full_env = {**os.environ, **(env or {}),
                    "AIOTIMELY_SECRET": secrets.token_hex(16),
                    "AIOTIMELY_CONNECT_TIMEOUT": str(min(timeout, 30.0)),
                    # the processes import the build function as this process would
                    "PYTHONPATH": os.pathsep.join(p for p in [(env or {}).get("PYTHONPATH", ""), *sys.path] if p)}
        procs = []
        try:
            for p in range(processes):
                out = open(here / f"stdout-{p}.txt", "w")
                err = open(here / f"stderr-{p}.txt", "w")
                with out, err:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "aiotimely.testing.child", target, str(here / f"outputs-{p}.pickle"),
                         "--loop", loop, "-w", str(workers), "-n", str(processes), "-p", str(p),
                         "--hostfile", str(hostfile), "--", *args],
                        env=full_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL))
            late = _wait(procs, timeout)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        codes = [proc.returncode for proc in procs]
        if late or any(codes):
            raise ProcessesFailed(_report(target, here, codes, timeout if late else None))
        per_worker: dict[int, Any] = {}
        minimum: Any = 0
        for p in range(processes):
            with open(here / f"outputs-{p}.pickle", "rb") as f:
                written = pickle.load(f)
            minimum = written["minimum"]
            per_worker.update(written["workers"])
        return merge(per_worker, minimum)


def _wait(procs: list[subprocess.Popen[Any]], timeout: float) -> bool:
    """Wait for every process to end (killing the rest ``GRACE`` seconds after one fails); True if the time ran
    out first."""
    deadline = time.monotonic() + timeout
    failed_at = None
    while any(proc.poll() is None for proc in procs):
        now = time.monotonic()
        if now > deadline:
            return True
        if failed_at is None and any(proc.returncode for proc in procs):
            failed_at = now
        if failed_at is not None and now > failed_at + GRACE:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        try:
            next(proc for proc in procs if proc.poll() is None).wait(0.05)
        except (StopIteration, subprocess.TimeoutExpired):
            pass
    return False


def _report(target: str, folder: Path, codes: list[int | None], timeout: float | None) -> str:
    what = (f"the run of {target} on {len(codes)} processes did not end within {timeout} s" if timeout is not None
            else f"a process of the run of {target} on {len(codes)} processes failed")
    lines, details = [what], []
    for p, code in enumerate(codes):
        status = "killed" if code is None or code < 0 else f"exit status {code}"
        err = (folder / f"stderr-{p}.txt").read_text(errors="replace").strip()
        last = err.splitlines()[-1] if err else ""
        lines.append(f"  process {p}: {status}" + (f": {last}" if code and last else ""))
        for stream, text in (("stdout", (folder / f"stdout-{p}.txt").read_text(errors="replace").strip()),
                             ("stderr", err)):
            if text:
                details.append(f"--- process {p}, {stream}:")
                details.append(text[-4000:])
    return "\n".join(lines + details)
