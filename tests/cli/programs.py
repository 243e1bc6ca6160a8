"""Programs the command-line tests run in real processes: each prints ``ready`` (stdout, flushed) once its
dataflow moves, so that a test sends its signal at a known point, never after a sleep.

As a script: ``PROGRAM=NAME python programs.py [aiotimely options] [program arguments]``; as a target of
``aiotimely run``: ``tests/cli/programs.py:NAME`` (or the script, with ``PROGRAM`` set).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import aiotimely as at
from aiotimely.connectors import from_aiter
from aiotimely.execution import parse_args
from aiotimely.lowlevel import InputPort, OperatorOutput


def _ready_once() -> Any:
    said = []

    def say(_: Any) -> None:
        if not said:
            said.append(True)
            print("ready", flush=True)

    return say


async def _ticks() -> Any:
    """An endless source: only a stop ends it."""
    i = 0
    while True:
        yield i
        i += 1
        await asyncio.sleep(0.005)


def ticking(worker: at.Worker) -> None:
    """Endless ticks exchanged between the workers; worker 0 says ``ready`` at its first one."""
    ready = _ready_once() if worker.index == 0 else (lambda _: None)
    worker.dataflow(lambda scope: from_aiter(scope, lambda i, n: _ticks(), name="Ticks")
                    .exchange(lambda x: x).inspect(ready))


def chatty(worker: at.Worker) -> None:
    """Endless ticks, every one printed."""
    worker.dataflow(lambda scope: from_aiter(scope, lambda i, n: _ticks(), name="Ticks").inspect(print))


def stubborn(worker: at.Worker) -> None:
    """A source that refuses to stop (it catches every cancellation): only the grace period or a second
    signal ends it."""
    ready = _ready_once()

    async def logic(output: OperatorOutput, cap: at.Capability) -> None:
        n = 0
        told = False
        while True:
            try:
                await asyncio.sleep(0.005)
            except asyncio.CancelledError:
                if not told:
                    told = True
                    print("stopping", flush=True)
                continue
            output.session(cap).give(n)
            n += 1

    worker.dataflow(lambda scope: at.source(scope, "Stubborn", logic).inspect(ready))


def show_options(worker: at.Worker) -> dict[str, Any]:
    """Print what a process was given: its arguments and the TLS variables."""
    if worker.index == 0:
        print("argv", sys.argv[1:], flush=True)
        for name in ("AIOTIMELY_TLS_CERT", "AIOTIMELY_TLS_KEY", "AIOTIMELY_TLS_CA"):
            print(name, os.environ.get(name), flush=True)
    return {}


# -- recovery: SIGTERM, then a restart that resumes ------------------------------------------------------

async def _numbers(start: int, upto: int | None) -> Any:
    x = start
    while upto is None or x < upto:
        yield x
        x += 1
        if upto is None:
            await asyncio.sleep(0.002)


async def _running_sum(input: InputPort, output: OperatorOutput, cap: at.Capability) -> None:
    cap.drop()
    sums = input.keyed_state("sums", dict)
    order = input.time_order()
    async for _ in input.activations():
        for time, records in order.ready():
            for key, x in records:
                sums[key] = sums.get(key, 0) + x
            output.session(time).give_many(sorted(sums.items()))


def sums(worker: at.Worker, upto: int | None) -> dict[int, int]:
    """Running sums of 0, 1, 2, ... by ``x % 3`` (kept in snapshots); endless without ``upto``. A resumed run
    says after how many numbers it goes on."""
    latest: dict[int, int] = {}
    ready = _ready_once()

    def reopen(n: int) -> Any:
        print(f"resumed after {n} numbers", flush=True)
        return _numbers(n, upto)

    def make(scope: at.Scope) -> None:
        (from_aiter(scope, _numbers(0, upto), resume=reopen)
         .map(lambda x: (x % 3, x))
         .unary_frontier(_running_sum, exchange=lambda kv: kv[0], name="RunningSum")
         .inspect(lambda kv: (latest.__setitem__(kv[0], kv[1]), kv[1] > 300 and ready(kv))))

    worker.dataflow(make, name="sums")
    return latest


def _sums_main() -> None:
    from aiotimely.recovery import Recovery

    own = argparse.ArgumentParser(prog="programs.py sums", add_help=False)
    own.add_argument("--state", required=True, help="the recovery directory")
    own.add_argument("--upto", type=int, default=None, help="end after the numbers below UPTO")
    args, _ = parse_args(parser=own)
    results = at.execute_from_args(lambda w: sums(w, args.upto), parser=own,
                                   recovery=Recovery(args.state, every=5))
    print("total", sum(v for r in results for v in r.values()), flush=True)


# -- Kafka: the offsets of what was done are committed on the way out -------------------------------------

def kafka_drain(worker: at.Worker) -> None:
    """Topic ``in`` -> a slow call per batch -> topic ``out`` (each record ``partition:offset``), committing what
    reached ``out``; no idle timeout: only a stop ends it."""
    from aiotimely.connectors import kafka, to_async

    bootstrap = os.environ["BOOTSTRAP"]
    done = at.ProbeHandle()
    ready = _ready_once() if worker.index == 0 else (lambda _: None)

    async def slowly(time: Any, records: list[Any]) -> None:
        await asyncio.sleep(0.002)

    def make(scope: at.Scope) -> None:
        records = kafka.source(scope, bootstrap, "in", group_id="drain", commit=done, max_records=20,
                               commit_interval=0.05)
        lines = to_async(records, slowly, max_in_flight=1).map(lambda r: f"{r.partition}:{r.offset}".encode())
        kafka.sink(lines, bootstrap, "out").inspect(ready).probe_with(done)

    worker.dataflow(make)


# -- an application with its own event loop --------------------------------------------------------------

async def _app_with_worker() -> None:
    probes: list[at.ProbeHandle] = []
    try:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda scope: inp.to_stream(scope).probe())
            probes.append(probe)
            for t in range(1_000_000):
                inp.send(t)
                inp.advance_to(t + 1)
                await worker.step_while(lambda: probe.less_than(inp.time))
                if t == 10:
                    print("ready", flush=True)
                await asyncio.sleep(0.002)
    except asyncio.CancelledError:
        print(f"the app saw CancelledError; its dataflow complete: {probes[0].done()}", flush=True)
        raise


def _app_main() -> None:
    try:
        asyncio.run(_app_with_worker())
    except KeyboardInterrupt:
        print("then asyncio.run raised KeyboardInterrupt", flush=True)
        sys.exit(130)


if __name__ == "__main__":
    name = os.environ["PROGRAM"]
    if name == "sums":
        _sums_main()
    elif name == "app":
        _app_main()
    else:
        at.execute_from_args(globals()[name])
