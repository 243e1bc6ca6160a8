"""The ``aiotimely`` command: run a computation over several local processes.

::

    aiotimely run module:build -w 2 -n 3 [-- program arguments]
    aiotimely run path/to/file.py:build -w 2 -n 3
    aiotimely run path/to/script.py -w 2 -n 3 [program arguments]   # a script calling execute_from_args
    python -m aiotimely run ...                                       # the same
    aiotimely bench NAME [--quick]                                     # the benchmark suite (from a checkout)

``run`` picks free loopback ports and a fresh shared secret, starts the N
processes, prefixes each line they print with the process index, and exits with
a non-zero status if any process fails (stopping the others if they do not end
on their own).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["main", "load_target"]

GRACE = 10.0  # seconds the other processes get to end after one failed


def load_target(target: str) -> Callable[..., Any]:
    """The build function named by ``module:function`` or ``path/file.py:function``."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise SystemExit(f"aiotimely: {target!r} is not module:function or file.py:function")
    if where.endswith(".py"):
        path = Path(where).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"aiotimely: cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(where)
    try:
        build: Callable[..., Any] = getattr(module, name)
        return build
    except AttributeError:
        raise SystemExit(f"aiotimely: {where} has no {name!r}") from None


def free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


async def _forward(stream: asyncio.StreamReader, prefix: str, out: Any) -> None:
    while True:
        line = await stream.readline()
        if not line:
            return
        out.write(prefix + line.decode("utf-8", "replace"))
        out.flush()


async def launch(commands: list[list[str]], env: dict[str, str]) -> int:
    """Run every command, forwarding its output with a ``[process i]`` prefix; the exit status."""
    procs = [
        await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                             env=env)
        for cmd in commands
    ]
    failed: list[tuple[int, int]] = []
    async with asyncio.TaskGroup() as tasks:
        for i, p in enumerate(procs):
            for stream, sink in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
                assert stream is not None
                tasks.create_task(_forward(stream, f"[process {i}] ", sink))
        waits = {tasks.create_task(p.wait()): i for i, p in enumerate(procs)}
        pending: set[asyncio.Task[int]] = set(waits)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=GRACE if failed else None,
                                               return_when=asyncio.FIRST_COMPLETED)
            if not done:  # a process failed and the others did not end within the grace period
                for fut in pending:
                    procs[waits[fut]].kill()
                continue
            for fut in done:
                code = fut.result()
                if code != 0:
                    failed.append((waits[fut], code))
    for i, code in sorted(failed):
        print(f"aiotimely: process {i} exited with status {code}", file=sys.stderr)
    return 1 if failed else 0


def run_command(args: argparse.Namespace, rest: list[str]) -> int:
    n, w = args.processes, args.workers
    ports = free_ports(n)
    hostfile = tempfile.NamedTemporaryFile("w", prefix="aiotimely-hosts-", suffix=".txt", delete=False)
    with hostfile:
        hostfile.write("".join(f"127.0.0.1:{port}\n" for port in ports))
    env = {**os.environ, "AIOTIMELY_SECRET": os.environ.get("AIOTIMELY_SECRET") or secrets.token_hex(16)}
    target = args.target
    commands = []
    for p in range(n):
        timely = ["-w", str(w), "-n", str(n), "-p", str(p), "--hostfile", hostfile.name]
        if target.endswith(".py"):
            commands.append([sys.executable, target, *timely, *rest])
        else:
            commands.append([sys.executable, "-m", "aiotimely", "worker", target, *timely, "--", *rest])
    try:
        return asyncio.run(launch(commands, env))
    finally:
        os.unlink(hostfile.name)


def worker_command(args: argparse.Namespace, rest: list[str]) -> int:
    from .execution import execute_from_args

    build = load_target(args.target)
    sys.argv = [args.target, *rest]
    execute_from_args(build, rest)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiotimely", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start every process of a computation on this machine")
    run.add_argument("target", help="module:build, file.py:build, or a script.py that calls execute_from_args")
    run.add_argument("-w", "--workers", type=int, default=1, help="workers per process")
    run.add_argument("-n", "--processes", type=int, default=1, help="number of processes")
    worker = commands.add_parser("worker", help="one process of a computation (what run starts)", add_help=False)
    worker.add_argument("target")
    commands.add_parser("bench", help="run the benchmark suite of a repository checkout (python -m benchmarks)",
                        add_help=False)
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    else:
        extra = []
    args, rest = parser.parse_known_args(argv)
    if args.command == "run":
        return run_command(args, rest + extra)
    if args.command == "bench":
        return bench_command(rest + extra)
    return worker_command(args, rest + extra)


def bench_command(argv: list[str]) -> int:
    """``python -m benchmarks`` of the repository checkout in the current directory (not part of the package)."""
    if not os.path.exists(os.path.join("benchmarks", "__main__.py")):
        print("aiotimely bench runs the benchmarks/ folder of a repository checkout: run it from there",
              file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv]).returncode


if __name__ == "__main__":
    sys.exit(main())
