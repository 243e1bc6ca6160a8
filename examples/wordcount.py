"""The book's word count: a ``unary_frontier`` operator that counts words once their time is complete.

Each line of text is split into words; words are exchanged so that each word is
counted on one worker; a count is emitted for a time only once the input frontier
has passed it, in time order, so the running counts are exact.

Run:  python examples/wordcount.py -w 2            (a built-in text)
      python examples/wordcount.py -w 2 FILE        (each line of FILE is one round)
"""

from __future__ import annotations

import functools
from typing import Any

import aiotimely as at
from aiotimely.execution import parse_args
from aiotimely.lowlevel import InputPort, OperatorOutput

TEXT = """\
the quick brown fox jumps over the lazy dog
the dog barks and the fox runs
a quick brown dog jumps over a lazy fox
"""


def wordcount(lines: at.Stream[str]) -> at.Stream[tuple[str, int]]:
    words = lines.flat_map(lambda line: [(word, 1) for word in line.split()])

    @words.unary_frontier(exchange=lambda kv: kv[0], name="WordCount")
    async def counted(input: InputPort, output: OperatorOutput, cap: at.Capability) -> None:
        cap.drop()
        pending: dict[at.Capability, list[tuple[str, int]]] = {}
        counts: dict[str, int] = {}
        async for _ in input.activations():
            for time, batch in input.drain():
                pending.setdefault(time.retain(), []).extend(batch)
            ready = [c for c in pending if not input.frontier.less_equal(c.time)]
            for cap in sorted(ready, key=lambda c: c.time):
                async with cap:
                    out = output.session(cap)
                    for word, diff in pending.pop(cap):
                        counts[word] = counts.get(word, 0) + diff
                        out.give((word, counts[word]))

    return counted


async def build(worker: at.Worker, text: str = TEXT) -> list[tuple[Any, tuple[str, int]]]:
    inp = at.InputHandle[str]()
    results: list[tuple[Any, tuple[str, int]]] = []
    probe = worker.dataflow(
        lambda scope: wordcount(inp.to_stream(scope))
        .inspect_time(lambda t, wc: results.append((t, wc)))
        .probe()
    )
    for round, line in enumerate(text.splitlines()):
        if round % worker.peers == worker.index:  # each line is introduced by one worker
            inp.send(line)
        inp.advance_to(round + 1)
        await worker.step_while(lambda: probe.less_than(inp.time))
    return results


def main(argv: list[str] | None = None) -> dict[str, int]:
    _, rest = parse_args(argv)
    text = TEXT
    if rest:
        with open(rest[0]) as f:
            text = f.read()
    results = at.execute_from_args(functools.partial(build, text=text), argv)
    final: dict[str, int] = {}
    for worker_results in results:
        for _time, (word, count) in sorted(worker_results):
            final[word] = max(final.get(word, 0), count)
    for word in sorted(final, key=lambda w: (-final[w], w)):
        print(f"{word}\t{final[word]}")
    return final


if __name__ == "__main__":
    main()
