"""Capture a stream in one computation and replay it in another, with a different worker count.

The first computation (2 workers) squares numbers and captures the result stream:
records and frontier changes. The second (3 workers) replays every capture and
counts records per time; the counts match what was captured.

Run:  python examples/capture_replay.py
"""

from __future__ import annotations

from typing import Callable

import aiotimely as at


async def produce(worker: at.Worker) -> at.Captured:
    inp = at.InputHandle()
    captured = worker.dataflow(lambda scope: inp.to_stream(scope).map(lambda x: x * x).capture())
    for round in range(5):
        for x in range(round * 10, round * 10 + 10):
            if x % worker.peers == worker.index:
                inp.send(x)
        inp.advance_to(round + 1)
    return captured


def consume(captures: list[at.Captured]) -> Callable[[at.Worker], list[tuple[int, int]]]:
    def build(worker: at.Worker) -> list[tuple[int, int]]:
        counts: list[tuple[int, int]] = []
        worker.dataflow(lambda scope: at.replay(captures, scope).exchange(lambda x: 0).count().inspect_time(
            lambda t, n: counts.append((t, n))))
        return counts

    return build


def main() -> dict[str, dict[int, int]]:
    captures = at.execute(produce, workers=2)
    captured = {t: len(records) for c in captures for t, records in c.extract()}
    counts = at.execute(consume(captures), workers=3)
    replayed: dict[int, int] = {}
    for worker_counts in counts:
        for t, n in worker_counts:
            replayed[t] = replayed.get(t, 0) + n
    for t in sorted(replayed):
        print(f"time {t}: {replayed[t]} records replayed")
    return {"captured": captured, "replayed": replayed}


if __name__ == "__main__":
    main()
