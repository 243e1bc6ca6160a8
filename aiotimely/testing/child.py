"""One process of :func:`aiotimely.testing.run_processes`: build, run, and write what the workers captured.

::

    python -m aiotimely.testing.child module:build OUTFILE [--loop L] -w W -n N -p P --hostfile H [-- args]

``OUTFILE`` gets a pickle of ``{"minimum": time, "workers": {index: {name: [events]}}}``
(``name`` is ``None`` for a single stream), written once the computation completed.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path
from typing import Any, Sequence

from ..dataflow.capture import Captured
from ..execution import Worker, execute, parse_args
from ..launch import load_target
from .running import collect

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    own = argparse.ArgumentParser(prog="python -m aiotimely.testing.child", add_help=False)
    own.add_argument("target")
    own.add_argument("outfile")
    own.add_argument("--loop", default="auto")
    argv = list(sys.argv[1:] if argv is None else argv)
    program: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, program = argv[:cut], argv[cut + 1:]
    args, timely = own.parse_known_args(argv)
    options, _ = parse_args(timely)
    build = load_target(args.target, who="aiotimely.testing")
    sys.argv = [args.target, *program]
    addresses = None
    if options.hostfile:
        addresses = [line.strip() for line in Path(options.hostfile).read_text().splitlines() if line.strip()]
    captures: dict[int, dict[str | None, Captured]] = {}
    minimum: list[Any] = [0]

    def on_worker(worker: Worker) -> None:
        def make(scope: Any) -> None:
            minimum[0] = scope.ttype.minimum
            captures[worker.index] = collect(build(scope), args.target)

        worker.dataflow(make, name=args.target.rpartition(":")[2])

    execute(on_worker, workers=options.workers, processes=options.processes, process=options.process,
            addresses=addresses, loop=args.loop)
    written = {"minimum": minimum[0],
               "workers": {index: {name: list(c.events) for name, c in named.items()}
                           for index, named in captures.items()}}
    with open(args.outfile, "wb") as f:
        pickle.dump(written, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
