"""A user's program, fully annotated: mypy --strict checks it in CI (``.ci/run``), and
``test_typed_program_runs`` runs it. ``assert_type`` lines fail the type check if the public
API hands back ``Any`` (or the wrong type) where a user relies on a precise one."""

from __future__ import annotations

from typing import Any, assert_type

import aiotimely as at
from aiotimely.dataflow import Capability
from aiotimely.lowlevel import InputPort, OperatorOutput


def doubled_sums(scope: at.Scope[at.Stream], inp: at.InputHandle[int]) -> at.ProbeHandle:
    numbers = inp.to_stream(scope)
    assert_type(numbers, at.Stream[int])
    doubled = numbers.map(lambda x: 2 * x).exchange(lambda x: x)
    assert_type(doubled, at.Stream[int])
    labels = doubled.map(str).filter(lambda s: s != "")
    assert_type(labels, at.Stream[str])
    assert_type(labels.flat_map(lambda s: list(s)).count(), at.Stream[int])
    assert_type(labels.timed().settle(), at.Stream[str])
    assert_type(labels.accumulate(0, lambda acc, batch: acc + len(batch)), at.Stream[int])

    @doubled.unary_frontier(name="Sums")
    async def sums(input: InputPort, output: OperatorOutput, cap: Capability) -> None:
        cap.drop()
        pending: dict[Capability, int] = {}
        async for _ in input.activations():
            for time, batch in input.drain():
                pending[time.retain()] = sum(batch)
            for held in [c for c in pending if not input.frontier.less_equal(c.time)]:
                with held:
                    output.session(held).give(pending.pop(held))

    assert_type(sums, at.Stream)
    evens, odds = sums.branch(lambda x: x % 4 == 0)
    return evens.concat(odds).probe()


def keyed(scope: at.Scope, inp: at.InputHandle[tuple[str, int]]) -> at.Stream[Any]:
    pairs = inp.to_stream(scope)
    assert_type(pairs, at.Stream[tuple[str, int]])
    totals = pairs.reduce(lambda a, b: a + b)
    assert_type(totals, at.Stream[tuple[str, int]])
    running = pairs.stateful_map(lambda state, n: ((state or 0) + n, str(n)))
    assert_type(running, at.Stream[tuple[str, str]])
    joined = totals.join(running)
    assert_type(joined, at.Stream[tuple[str, tuple[int, str]]])
    return pairs.window(at.Tumbling(10), at.Agg.count(), key=lambda kv: kv[0])


def rounds(scope: at.Scope[at.Stream]) -> at.Captured:
    def loop(inner: at.Scope[at.Stream]) -> at.Stream:
        handle, again = inner.feedback(1)
        assert_type(again, at.Stream)
        step = at.to_stream([3], inner).concat(again).filter(lambda x: x > 0).map(lambda x: x - 1)
        step.connect_loop(handle)
        return step.leave()

    looped: at.Stream = scope.iterative(loop)
    return looped.capture()


async def build(worker: at.Worker) -> tuple[list[int], int]:
    inp = at.InputHandle[int]()
    probe = worker.dataflow(lambda scope: doubled_sums(scope, inp))
    assert_type(probe, at.ProbeHandle)
    captured = worker.dataflow(rounds)
    for t in range(3):
        inp.send_batch(range(t, t + 4))
        inp.advance_to(t + 1)
        await probe.wait_beyond(t)
    inp.close()
    await probe.wait_done()
    counts = [len(records) for _time, records in captured.extract()]
    return counts, worker.index


def main() -> None:
    results = at.execute(build, workers=2)
    assert [index for _, index in results] == [0, 1]
    assert sum(sum(counts) for counts, _ in results) == 2 * 3   # 2, 1, 0 left the loop, on each worker
    try:
        at.execute(lambda worker: worker.dataflow(lambda s: at.to_stream([0], s).map(lambda x: 1 // x)))
    except at.DataflowError as error:
        assert error.operator == "Map" and error.worker == 0
    else:
        raise AssertionError("expected a DataflowError")
    print("ok")


if __name__ == "__main__":
    main()
