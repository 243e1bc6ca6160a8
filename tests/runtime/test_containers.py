"""Batches as containers: a registered container class (here :class:`Columns`, two parallel columns) travels
whole through sessions, ports, exchange (split by route), broadcast and tees (copied), fused chains and the wire
(in halves when a frame is too small), and reaches operator logic as it was sent; record-at-a-time operators
iterate it."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Iterator, Sequence

import pytest

import aiotimely as at
from aiotimely.comm.backpressure import MAILBOX_HIGH_BYTES
from aiotimely.comm.codec import RecordCodec
from aiotimely.comm.local import Mailbox
from aiotimely.dataflow.channels import DataCodec
from aiotimely.dataflow.containers import Container, is_container, register_container
from aiotimely.progress import timestamp_type
from aiotimely.testing import run_dataflow
from aiotimely.testing.processes import run_processes


class Columns:
    """Records ``(key, value)`` kept as two columns."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: list[Any], values: list[Any]) -> None:
        self.keys = keys
        self.values = values

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[Any]:
        return zip(self.keys, self.values, strict=True)

    def __getitem__(self, part: slice) -> Columns:
        return Columns(self.keys[part], self.values[part])

    def copy(self) -> Columns:
        return Columns(list(self.keys), list(self.values))

    def partition(self, routes: Sequence[int], parts: int) -> list[Container]:
        split = [type(self)([], []) for _ in range(parts)]
        for to, k, v in zip(routes, self.keys, self.values, strict=True):
            split[to].keys.append(k)
            split[to].values.append(v)
        return list(split)

    @property
    def nbytes(self) -> int:
        return 16 * len(self.keys)


register_container(Columns, lambda c: (c.keys, c.values), lambda data: Columns(list(data[0]), list(data[1])))

ROWS = [(k % 5, k) for k in range(40)]


def columns_source(scope: at.Scope) -> at.Stream:
    """Worker 0 sends ROWS as Columns batches of 8, at times 0..4."""

    async def logic(output: Any, cap: Any) -> None:
        if scope.worker.index == 0:
            for t in range(5):
                cap.downgrade(t)
                rows = ROWS[t * 8:(t + 1) * 8]
                output.session(cap).give_container(Columns([k for k, _ in rows], [v for _, v in rows]))
        cap.drop()

    return at.source(scope, "Columns", logic)


def seen_as(stream: at.Stream, name: str) -> at.Stream:
    """The batches as the logic of an operator gets them: ``(kind, worker, record)`` for each record."""

    @stream.unary(name=name)
    async def logic(input: Any, output: Any, cap: Any) -> None:
        cap.drop()
        async for _ in input.activations():
            for time, batch in input.drain():
                kind = "Columns" if is_container(batch) else type(batch).__name__
                output.session(time).give_many((kind, stream.scope.worker.index, r) for r in batch)

    return logic


def exchanged(scope: at.Scope) -> dict[str, at.Stream]:
    cols = columns_source(scope)
    return {"exchanged": seen_as(cols.exchange(lambda r: r[0]), "AfterExchange"),
            "mapped": cols.map(lambda r: r[1] * 2),
            "broadcast": seen_as(cols.broadcast(), "AfterBroadcast")}


@pytest.mark.parametrize("workers", [1, 3])
def test_a_container_crosses_exchange_and_broadcast_whole_and_map_iterates_it(workers):
    result = run_dataflow(exchanged, workers=workers)
    got = result["exchanged"].pairs()
    assert {kind for _, (kind, _, _) in got} == {"Columns"}
    assert sorted((t, r) for t, (_, _, r) in got) == sorted((i // 8, r) for i, r in enumerate(ROWS))
    assert all(at.route(r[0], workers) == w for _, (_, w, r) in got)     # each record on its key's worker
    assert sorted(result["mapped"].pairs()) == sorted((i // 8, v * 2) for i, (_, v) in enumerate(ROWS))
    copies = Counter(r for _, (kind, _, r) in result["broadcast"].pairs() if kind == "Columns")
    assert copies == Counter({r: workers for r in ROWS})


def test_each_consumer_of_a_container_gets_its_own_copy():
    def build(scope):
        cols = columns_source(scope)

        @cols.unary(name="Changes")
        async def changes(input: Any, output: Any, cap: Any) -> None:
            cap.drop()
            async for _ in input.activations():
                for time, batch in input.drain():
                    batch.values[:] = [-1] * len(batch)           # its own copy: the other consumer sees none of it
                    output.session(time).give_many(batch)

        return {"changed": changes, "other": seen_as(cols, "Other")}

    result = run_dataflow(build)
    assert {v for _, (_, v) in result["changed"].pairs()} == {-1}
    assert sorted(r for _, (kind, _, r) in result["other"].pairs() if kind == "Columns") == sorted(ROWS)


def test_a_container_too_big_for_a_frame_crosses_in_halves_each_a_container():
    codec = DataCodec(timestamp_type(int), RecordCodec())
    batch = Columns(list(range(100)), [str(i) * 20 for i in range(100)])
    payloads = codec.encode((7, batch), 600)
    assert len(payloads) > 1
    parts = [codec.decode(p) for p in payloads]
    assert all(time == 7 and type(part) is Columns for time, part in parts)
    assert [r for _, part in parts for r in part] == list(batch)


def two_processes(scope: at.Scope) -> at.Stream:
    return seen_as(columns_source(scope).exchange(lambda r: r[0]), "AfterExchange")


def test_a_container_crosses_processes_as_itself():
    result = run_processes(two_processes, processes=2, workers=2)
    got = result.pairs()
    assert {kind for _, (kind, _, _) in got} == {"Columns"}
    assert sorted(r for _, (_, _, r) in got) == sorted(ROWS)
    assert all(at.route(r[0], 4) == w for _, (_, w, r) in got)


class Heavy(Columns):
    """Columns that say they weigh 8 MiB a batch (what an Arrow batch of a few hundred thousand rows would)."""

    __slots__ = ()

    @property
    def nbytes(self) -> int:
        return 8 << 20


register_container(Heavy, lambda c: (c.keys, c.values), lambda data: Heavy(list(data[0]), list(data[1])))


def test_a_mailbox_is_full_at_its_bound_in_bytes_and_wakes_its_producers_at_half():
    box = Mailbox(high=64, high_bytes=100)
    woken: list[str] = []
    box.push((0, "a"), 60)
    assert not box.full()
    box.push((0, "b"), 60)
    assert box.full() and box.bytes == 120          # two items of 64 allowed, but 120 bytes of 100
    box.wait(lambda: woken.append("producer"))
    box.weigh(-60)                                   # the receiver took one: 60 bytes left, over half the bound
    box.room()
    assert woken == [] and not box.full()
    box.weigh(-60)
    box.room()
    assert woken == ["producer"] and box.bytes == 0


@pytest.mark.asyncio
async def test_heavy_containers_hold_their_producer_back_by_bytes_not_by_count():
    """A producer sends one 8 MiB container per tick into a consumer that takes nothing until released: the
    consumer's mailbox is full at 32 MiB (4 batches, far under the 64-batch bound), the producer is no longer run
    (its ticks wait at its own input), and once the consumer takes them everything arrives."""
    released, gate_wake = [False], []

    def build(scope: at.Scope) -> tuple[at.InputHandle[int], at.ProbeHandle]:
        inp: at.InputHandle[int] = at.InputHandle()

        @inp.to_stream(scope).unary(name="Produce")
        async def produce(input: Any, output: Any, cap: Any) -> None:
            cap.drop()
            async for _ in input.activations():
                for time, batch in input.drain():
                    for r in batch:
                        output.session(time).give_container(Heavy([r], [r]))

        @produce.unary(name="Gate")
        async def gate(input: Any, output: Any, cap: Any) -> None:
            cap.drop()
            gate_wake.append(output.activator())
            async for _ in input.activations():
                if released[0]:
                    for time, batch in input.drain():
                        output.session(time).give_many(batch)

        return inp, gate.probe()

    async with at.Worker() as worker:
        inp, probe = worker.dataflow(build, name="heavy")
        for tick in range(20):
            inp.send(tick)
            inp.advance_to(tick + 1)
            for _ in range(3):
                await worker.step()
        stats = worker.statistics()
        held = stats.operator("Gate").inputs[0]
        waiting = stats.operator("Produce").inputs[0]
        assert held.queued_bytes == held.queued_batches * (8 << 20)
        assert MAILBOX_HIGH_BYTES <= held.queued_bytes <= MAILBOX_HIGH_BYTES + (8 << 20)   # + one activation's
        assert waiting.queued_records == 20 - held.queued_batches                          # held back upstream
        released[0] = True
        gate_wake[0].activate()
        inp.close()
        await asyncio.wait_for(worker.step_while(lambda: not probe.done()), 30)
        held = worker.statistics().operator("Gate").inputs[0]
        assert held.queued_bytes == 0 and held.records == 20
