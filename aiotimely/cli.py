"""The ``aiotimely`` command: run a computation over several local processes.

::

    aiotimely run module:build -w 2 -n 3 [-- program arguments]
    aiotimely run path/to/file.py:build -w 2 -n 3
    aiotimely run path/to/script.py -w 2 -n 3 [-- program arguments]   # a script calling execute_from_args
    aiotimely worker module:build -w 2 -n 3 -p 0 --hostfile hosts.txt  # one process, by hand
    aiotimely bench NAME [--quick]                                     # the benchmark suite (from a checkout)
    python -m aiotimely ...                                            # the same

``run`` picks free loopback ports and a fresh shared secret, starts the N
processes, prefixes each line they print with the process index, and exits with
a non-zero status if any process fails (stopping the others if they do not end
on their own). Ctrl-C or SIGTERM is passed on to every process, which stops
gracefully (docs/cli.md); ``run`` then says in one line how it went and exits
with status 130 (SIGINT) or 143 (SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from typing import Any, Callable, Sequence

from .comm.tls import ENV_CA, ENV_CERT, ENV_KEY
from .execution import execute
from .execution.stopping import DID_NOT_DRAIN, DRAINED, STOPPED, SUSPENDED, stop_grace
from .launch import free_ports, load_target
from .options import OptionParser, add_options, execute_options, parse_args

__all__ = ["main"]

GRACE = 10.0  # seconds the other processes get to end after one failed
KILL_AFTER = 5.0
"""Seconds ``run`` gives its processes beyond their grace period (or after a second signal) before killing them."""
CLOSED_OUTPUT = 141
"""``run``'s status when its standard output was closed: a process ended by SIGPIPE's (128 + 13)."""


class _Launch:
    """The processes ``run`` started, and what a signal does to them: it is passed on to each (they stop
    gracefully), a second one too (they stop at once), and those still running when time is up are killed."""

    def __init__(self, procs: list[asyncio.subprocess.Process]) -> None:
        self.procs = procs
        self.signals: list[int] = []
        self.stop_lines: dict[int, str] = {}
        """Each process's line saying how it stopped (kept, not printed: ``run`` prints one for all)."""
        self.killed: set[int] = set()
        self.deadline: float | None = None
        self.changed = asyncio.Event()
        self.output_closed = False
        """Our standard output was closed (``aiotimely run ... | head``): the processes are stopped quietly."""

    def arrived(self, sig: int) -> None:
        self.signals.append(sig)
        for proc in self.procs:
            if proc.returncode is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + (stop_grace() + KILL_AFTER if len(self.signals) == 1 else KILL_AFTER)
        self.changed.set()

    def close_output(self) -> None:
        """The reader of our standard output went away: stop the processes as SIGTERM does, and exit
        quietly, with the status of a process ended by SIGPIPE (141), as ``yes | head`` does."""
        if self.output_closed:
            return
        self.output_closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)   # what is still buffered, or printed at exit, goes nowhere
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        self.arrived(signal.SIGTERM)

    def keeps(self, index: int, line: str) -> bool:
        """Whether ``line`` from process ``index``'s stderr is its stop line (kept for the summary)."""
        if self.signals and line.startswith(STOPPED) and index not in self.stop_lines:
            self.stop_lines[index] = line.rstrip("\n")
            return True
        return False

    def summary(self, codes: dict[int, int]) -> str:
        """One line for the whole computation: stopped by which signal, and whether every process drained."""
        name = signal.Signals(self.signals[0]).name
        problems = []
        suspended = False
        for i in sorted(codes):
            line, code = self.stop_lines.get(i), codes[i]
            if line is not None:
                _, _, outcome = line.partition(" by ")
                _, _, outcome = outcome.partition(" ")
                suspended = suspended or outcome == SUSPENDED
                if outcome.startswith(DID_NOT_DRAIN):
                    problems.append(f"process {i}: {outcome[len(DID_NOT_DRAIN):]}")
            elif i in self.killed:
                problems.append(f"process {i} did not end in time and was killed")
            elif code != 0:
                problems.append(f"process {i} exited with status {code}")
        n = len(codes)
        if not problems:
            return f"{STOPPED}by {name} {SUSPENDED if suspended else DRAINED} ({n} process{'es' if n > 1 else ''})"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"{STOPPED}by {name} {DID_NOT_DRAIN}{problems[0]}{more}"


async def _forward(stream: asyncio.StreamReader, prefix: str, out: Any, keep: Callable[[str], bool] | None = None,
                   closed: Callable[[], None] | None = None) -> None:
    """Copy a process's lines to ``out`` with ``prefix``, except those ``keep`` keeps; if ``out`` is closed,
    call ``closed`` and read on without copying, so that the process never blocks on a full pipe."""
    while True:
        line = await stream.readline()
        if not line:
            return
        text = line.decode("utf-8", "replace")
        if out is None or (keep is not None and keep(text)):
            continue
        try:
            out.write(prefix + text)
            out.flush()
        except BrokenPipeError:
            out = None
            if closed is not None:
                closed()


async def launch(commands: list[list[str]], env: dict[str, str]) -> int:
    """Run every command, forwarding its output with a ``[process i]`` prefix; the exit status."""
    loop = asyncio.get_running_loop()
    run = _Launch([])
    handled = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, run.arrived, int(sig))
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        handled.append(sig)
    try:
        for cmd in commands:
            # Each in a process group of its own: Ctrl-C in a terminal reaches only run, which passes it on once.
            own_group: dict[str, Any] = {"process_group": 0} if os.name == "posix" else {}
            run.procs.append(await asyncio.create_subprocess_exec(
                *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, **own_group))
            if run.signals:
                run.procs[-1].send_signal(run.signals[-1])
        return await _supervise(run)
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        for proc in run.procs:
            if proc.returncode is None:
                proc.kill()


async def _supervise(run: _Launch) -> int:
    loop = asyncio.get_running_loop()
    procs = run.procs
    failed: list[tuple[int, int]] = []
    codes: dict[int, int] = {}
    async with asyncio.TaskGroup() as tasks:
        for i, p in enumerate(procs):
            assert p.stdout is not None and p.stderr is not None
            tasks.create_task(_forward(p.stdout, f"[process {i}] ", sys.stdout, closed=run.close_output))
            tasks.create_task(_forward(p.stderr, f"[process {i}] ", sys.stderr, functools.partial(run.keeps, i)))
        waits = {tasks.create_task(p.wait()): i for i, p in enumerate(procs)}
        pending: set[asyncio.Task[int]] = set(waits)
        failed_at: float | None = None
        while pending:
            deadlines = [d for d in (run.deadline, failed_at and failed_at + GRACE) if d]
            timeout = max(0.0, min(deadlines) - loop.time()) if deadlines else None
            changed = tasks.create_task(run.changed.wait())
            done, _ = await asyncio.wait(pending | {changed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            run.changed.clear()
            if not done and deadlines and loop.time() >= min(deadlines):  # time is up for those still running
                for fut in pending:
                    run.killed.add(waits[fut])
                    procs[waits[fut]].kill()
                run.deadline = failed_at = None
                continue
            for fut in done & pending:
                pending.discard(fut)
                code = fut.result()
                codes[waits[fut]] = code
                if code != 0:
                    failed.append((waits[fut], code))
                    if failed_at is None:
                        failed_at = loop.time()
    if run.output_closed:
        return CLOSED_OUTPUT
    if run.signals:
        print(run.summary(codes), file=sys.stderr, flush=True)
        return 128 + run.signals[0]
    for i, code in sorted(failed):
        print(f"aiotimely: process {i} exited with status {code}", file=sys.stderr)
    return 1 if failed else 0


def run_command(args: argparse.Namespace, program: list[str]) -> int:
    n, w = args.processes, args.workers
    if n < 1 or w < 1:
        print("aiotimely run: -n and -w must be at least 1 (see aiotimely run -h)", file=sys.stderr)
        return 2
    ports = free_ports(n)
    hostfile = tempfile.NamedTemporaryFile("w", prefix="aiotimely-hosts-", suffix=".txt", delete=False)
    with hostfile:
        hostfile.write("".join(f"127.0.0.1:{port}\n" for port in ports))
    env = {**os.environ, "AIOTIMELY_SECRET": os.environ.get("AIOTIMELY_SECRET") or secrets.token_hex(16)}
    for option, variable in (("tls_cert", ENV_CERT), ("tls_key", ENV_KEY), ("tls_ca", ENV_CA)):
        value = getattr(args, option)
        if value:
            env[variable] = os.path.abspath(value)
    served = []
    if args.metrics_port is not None:
        served += ["--metrics-port", str(args.metrics_port)]
    if args.ui_port is not None:
        served += ["--ui", str(args.ui_port)]
    target = args.target
    commands = []
    for p in range(n):
        timely = ["-w", str(w), "-n", str(n), "-p", str(p), "--hostfile", hostfile.name, *served]
        if target.endswith(".py"):
            commands.append([sys.executable, target, *timely, *program])
        else:
            commands.append([sys.executable, "-m", "aiotimely", "worker", target, *timely, "--", *program])
    try:
        return asyncio.run(launch(commands, env))
    finally:
        os.unlink(hostfile.name)


def worker_command(argv: list[str]) -> int:
    """``aiotimely worker TARGET [options] [-- program arguments]``: one process, as ``run`` starts them."""
    cut = argv.index("--") if "--" in argv else len(argv)
    described = argparse.ArgumentParser(
        prog="aiotimely worker", add_help=False,
        description="Run one process of a computation: what 'aiotimely run' starts, once per process; by hand, "
                    "one on each machine, with the same --hostfile and AIOTIMELY_SECRET. The program's own "
                    "arguments go after '--' (the build function finds them in sys.argv[1:]).")
    described.add_argument("target", help="module:build or file.py:build")
    args, _ = parse_args(argv[:cut], parser=described)
    build = load_target(args.target)
    sys.argv = [args.target, *argv[cut + 1:]]
    execute(build, **execute_options(args))
    return 0


def bench_command(argv: list[str]) -> int:
    """``python -m benchmarks`` of the repository checkout in the current directory (not part of the package)."""
    if not os.path.exists(os.path.join("benchmarks", "__main__.py")):
        print("aiotimely bench runs the benchmarks/ folder of a repository checkout: run it from there",
              file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv]).returncode


def _version() -> str:
    try:
        return importlib.metadata.version("aiotimely")
    except importlib.metadata.PackageNotFoundError:  # (run from a checkout that is not installed)
        from . import __version__

        return __version__


RUN_DESCRIPTION = """\
Start every process of a computation on this machine: free loopback ports, a fresh
shared secret, each process's output prefixed with its index.

TARGET is a script calling execute_from_args (script.py), or a build function
(module:build or file.py:build). The program's own arguments go after '--'; a script
gets them after aiotimely's options, as if typed after its name.

Ctrl-C or SIGTERM is passed on to every process: the sources end, the dataflows drain
what they hold (a final snapshot with recovery, committed Kafka offsets) for up to
AIOTIMELY_STOP_GRACE seconds (10), and run exits with status 130 (SIGINT) or 143
(SIGTERM), saying in one line how it went. A second signal stops them at once."""


def _parser() -> argparse.ArgumentParser:
    parser = OptionParser(prog="aiotimely", allow_abbrev=False,
                          description="Run computations written with aiotimely (timely dataflow for asyncio).",
                          epilog="examples:\n  aiotimely run examples/hello.py -w 2 -n 3\n"
                                 "  aiotimely run mymodule:build -n 2 --ui 8080 -- input.txt\n"
                                 "  aiotimely run -h          (the options of run)\n\nSee docs/cli.md.",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"aiotimely {_version()}")
    commands = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="start every process of a computation on this machine",
                              description=RUN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
                              usage="aiotimely run TARGET [options] [-- program arguments]", allow_abbrev=False)
    run.add_argument("target", metavar="TARGET", help="script.py, module:build or file.py:build")
    add_options(run, launcher=True)
    commands.add_parser("worker", help="run one process of a computation (what run starts)")
    commands.add_parser("bench", help="run the benchmark suite of a repository checkout")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["worker"]:
            return worker_command(argv[1:])
        if argv[:1] == ["bench"]:
            return bench_command(argv[1:])
        cut = argv.index("--") if "--" in argv else len(argv)
        parser = _parser()
        args, extra = parser.parse_known_args(argv[:cut])
        unknown = [a for a in extra if a.startswith("-") and a != "-"]
        if unknown:
            prog = "aiotimely run" if args.command == "run" else "aiotimely"
            print(f"{prog}: unrecognized option {unknown[0]!r}: the program's own arguments go after '--' "
                  f"(see {prog} -h)", file=sys.stderr)
            return 2
        if args.command != "run":
            parser.error(f"put {args.command!r} first: aiotimely {args.command} ...")
        return run_command(args, extra + argv[cut + 1:])
    except KeyboardInterrupt:  # (before the computation took Ctrl-C over: nothing to drain yet)
        print(f"{STOPPED}by SIGINT before the computation started", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
