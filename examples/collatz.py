"""Iteration with a feedback loop: how many Collatz steps each number takes to reach 1.

Numbers enter an iterative scope, whose times are ``Product(outer, round)``. Each
round applies one Collatz step; numbers not yet at 1 go round the loop again
(``feedback(1)``: the next round), the others leave the scope. A number leaves
in the round equal to its step count, which the example checks.

Run:  python examples/collatz.py -w 2 [LIMIT]
"""

from __future__ import annotations

import functools
from typing import Any

import aiotimely as at
from aiotimely.execution import parse_args


Record = tuple[int, int, int]
"""(start, current value, steps so far)"""


def step(record: Record) -> Record:
    start, n, steps = record
    return start, (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1


def collatz(scope: at.Scope, numbers: at.Stream[int], rounds: list[tuple[int, int]]) -> at.Stream[Record]:
    with scope.iterative(name="collatz") as loop:
        handle, again = loop.feedback(1)
        stepped = numbers.enter(loop).map(lambda n: (n, n, 0)).concat(again).map(step)
        more, done = stepped.branch(lambda r: r[1] == 1)
        more.connect_loop(handle)
        done = done.inspect_time(lambda t, r: rounds.append((r[0], t.inner)))
        result = done.leave()
    return result


def build(worker: at.Worker, limit: int = 30) -> dict[str, Any]:
    steps: dict[int, int] = {}
    rounds: list[tuple[int, int]] = []
    mine = range(1 + worker.index, limit + 1, worker.peers)
    worker.dataflow(
        lambda scope: collatz(scope, at.to_stream(mine, scope), rounds).inspect(
            lambda r: steps.__setitem__(r[0], r[2])
        )
    )
    return {"steps": steps, "rounds": rounds}


def main(argv: list[str] | None = None) -> dict[int, int]:
    _, rest = parse_args(argv)
    limit = int(rest[0]) if rest else 30
    results = at.execute_from_args(functools.partial(build, limit=limit), argv)
    steps = {n: s for r in results for n, s in r["steps"].items()}
    for start, round in (x for r in results for x in r["rounds"]):
        assert round + 1 == steps[start], (start, round, steps[start])  # left in the round it finished
    for n in sorted(steps):
        print(f"{n} reaches 1 after {steps[n]} steps")
    return steps


if __name__ == "__main__":
    main()
