"""Many short dataflows built one after another in one build, and what each one leaves behind.

Each dataflow is tiny: an input (an ``InputHandle``, or ``to_stream``) exchanged across the workers, and a probe;
a few records go in, the input closes, and the build waits for the probe before it builds the next one. The
memory this process holds is measured (``tracemalloc``, after a full collection) once ``--first`` dataflows are
done and again after ``--last``: a finished dataflow should leave nothing behind, so the growth per dataflow in
between should be about nothing. Each process prints one line, ``growth BYTES OBJECTS``, per dataflow.

    python tests/hardening/churn.py -w 2 --kind input --first 500 --last 1500 [--recovery DIR]
    aiotimely run tests/hardening/churn.py -w 1 -n 2 -- --kind to_stream --first 500 --last 1500

(used by tests/hardening/test_memory.py, which runs it in this process or on several).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from typing import Any

import aiotimely as at
from aiotimely.execution import execute_options, parse_args


def parser() -> argparse.ArgumentParser:
    own = argparse.ArgumentParser(description=__doc__, add_help=False)
    own.add_argument("--kind", choices=["input", "to_stream"], default="input")
    own.add_argument("--first", type=int, default=500, help="dataflows built before the first measure")
    own.add_argument("--last", type=int, default=1500, help="dataflows built before the second measure")
    own.add_argument("--recovery", default=None, help="a recovery directory: snapshot every dataflow")
    own.add_argument("--every", type=int, default=1, help="the recovery's snapshot interval")
    own.add_argument("--wait", choices=["probe", "complete"], default="probe",
                     help="after each dataflow, wait for its probe only, or until it is complete on the worker "
                          "(with recovery, that is once its last snapshot is written)")
    return own


class Measures:
    """The memory of this process at the two points, taken by its first worker."""

    def __init__(self) -> None:
        self.taken: list[tuple[int, int]] = []
        self.live: list[int] = []
        """The dataflows still running on the measuring worker at each point, before it let them finish: those a
        build that waits only for probes has got ahead of (their snapshots not written yet, with recovery)."""

    def take(self) -> None:
        gc.collect()
        self.taken.append((tracemalloc.get_traced_memory()[0], len(gc.get_objects())))

    def growth(self, dataflows: int) -> tuple[float, float]:
        """Bytes and gc-tracked objects per dataflow between the two measures."""
        (bytes0, objects0), (bytes1, objects1) = self.taken
        return (bytes1 - bytes0) / dataflows, (objects1 - objects0) / dataflows


def churn(kind: str, first: int, last: int, workers: int, measures: Measures, wait: str = "probe") -> Any:
    """The build function: ``last`` dataflows one after another, measured after ``first`` and ``last`` by the
    first of the process's ``workers`` workers."""
    async def build(worker: at.Worker) -> None:
        measuring = worker.index % workers == 0
        for i in range(last):
            mine = range(worker.index, worker.index + 4)
            if kind == "input":
                inp: at.InputHandle[int] = at.InputHandle()
                probe = worker.dataflow(lambda scope, inp=inp: inp.to_stream(scope).exchange(lambda x: x).probe(),
                                        name=f"churn-{i}")
                inp.send_batch(mine)
                inp.close()
            else:
                probe = worker.dataflow(
                    lambda scope, mine=mine: at.to_stream(mine, scope).exchange(lambda x: x).probe(),
                    name=f"churn-{i}")
            await probe.wait_done()
            if wait == "complete":
                await worker.step_until_done()
            if measuring and i + 1 in (first, last):
                measures.live.append(worker.statistics().dataflows)
                await worker.step_until_done()  # (what is measured is what finished dataflows leave behind)
                measures.take()

    return build


def run(kind: str, first: int, last: int, *, recovery: str | None = None, every: int = 1, wait: str = "probe",
        measures: Measures | None = None, **options: Any) -> tuple[float, float]:
    """Run the churn with ``at.execute(**options)``; bytes and objects per dataflow that this process kept."""
    measures = measures if measures is not None else Measures()
    build = churn(kind, first, last, options.get("workers", 1), measures, wait)
    if recovery is not None:
        from aiotimely.recovery import Recovery
        options["recovery"] = Recovery(recovery, every=every)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        at.execute(build, **options)
    finally:
        if started:
            tracemalloc.stop()
    return measures.growth(last - first)


def main() -> None:
    args, _ = parse_args(parser=parser())
    options = execute_options(args)
    per_bytes, per_objects = run(args.kind, args.first, args.last, recovery=args.recovery, every=args.every,
                                 wait=args.wait, **options)
    print(f"growth {per_bytes:.1f} {per_objects:.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
