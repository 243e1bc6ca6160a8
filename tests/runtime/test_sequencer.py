"""Sequencer and Barrier (timely's ``synchronization``): one order of every worker's commands; rounds no worker
leaves before every worker has reached them."""

from __future__ import annotations

import asyncio
import random

import pytest

import aiotimely as at
from tests.cluster.harness import launch, lines_after_prefix

HANG = 20.0
"""A guard against a hang (never a timing claim): a test that waits this long has failed."""


async def take(seq, n):
    """The next ``n`` commands of ``seq``, waiting for each."""
    return [await asyncio.wait_for(anext(seq), HANG) for _ in range(n)]


# -- Sequencer -------------------------------------------------------------------------


def test_every_worker_sees_every_command_in_the_same_order(run):
    async def build(worker):
        seq = at.Sequencer(worker)
        rng = random.Random(worker.index)
        got, n = [], 0
        for _ in range(15):  # pushes interleaved with reads and pauses of different lengths on each worker
            for _ in range(rng.randrange(3)):
                seq.push((worker.index, n))
                n += 1
            got.extend(seq)
            await asyncio.sleep(rng.random() / 1000)
        seq.close()
        async for command in seq:
            got.append(command)
        return got

    results = run(build, workers=4)
    assert all(r == results[0] for r in results)
    order = results[0]
    assert len(order) == len(set(order)) and len(order) > 15
    for w in range(4):  # each worker's commands keep the order it pushed them in
        mine = [i for (who, i) in order if who == w]
        assert mine == sorted(mine)


def test_a_command_is_handed_out_while_every_sequencer_is_still_open(run):
    async def build(worker):
        seq = at.Sequencer(worker)
        if worker.index == 1:
            seq.push("first")
        got = await take(seq, 1)
        seq.push(f"from {worker.index}")  # and a second round, all of them answering
        got += sorted(await take(seq, worker.peers))
        return got

    assert run(build, workers=3) == [["first", "from 0", "from 1", "from 2"]] * 3


def test_the_sequence_ends_once_every_worker_has_closed(run):
    async def build(worker):
        seq = at.Sequencer(worker)
        seq.push(worker.index)
        assert not seq.done()
        if worker.index == 0:
            await asyncio.sleep(0.01)  # one worker closes late: the others' iteration waits for it
        seq.close()
        seq.close()  # harmless
        got = [c async for c in seq]
        return got, seq.done(), seq.next()

    assert run(build, workers=3) == [([0, 1, 2], True, None)] * 3


@pytest.mark.asyncio
async def test_next_and_iteration_take_only_what_is_ready():
    async with at.Worker() as worker:
        seq = at.Sequencer(worker)
        assert seq.next() is None and list(seq) == []
        for c in "abc":
            seq.push(c)
        await worker.step_while(lambda: len(seq._inbox) < 3)
        assert seq.next() == "a"
        assert list(seq) == ["b", "c"]
        assert seq.next() is None


def test_pushing_after_close_or_beyond_the_capacity_is_refused(run):
    async def build(worker):
        seq = at.Sequencer(worker, capacity=2)
        seq.push(1)
        seq.push(2)
        with pytest.raises(RuntimeError, match="2 commands waiting to be sent.*await sequencer.send"):
            seq.push(3)
        await asyncio.wait_for(seq.send(3), HANG)  # waits until the first two are sent
        seq.close()
        with pytest.raises(RuntimeError, match="closed"):
            seq.push(4)
        return [c async for c in seq]

    assert run(build) == [[1, 2, 3]]
    with pytest.raises(ValueError, match="capacity"):
        run(lambda worker: at.Sequencer(worker, capacity=0))


def test_a_full_inbox_holds_the_sequence_back_without_losing_or_reordering_commands(run):
    async def build(worker):
        seq = at.Sequencer(worker, capacity=3)
        got = []

        async def send():
            for i in range(40):
                await seq.send((worker.index, i))
            seq.close()

        async def read():
            async for command in seq:  # slowly: the inbox of 3 fills, and the senders wait
                got.append(command)
                if len(got) % 7 == 0:
                    await asyncio.sleep(0.001)

        await asyncio.wait_for(asyncio.gather(send(), read()), HANG)
        return got

    results = run(build, workers=2)
    assert results[0] == results[1]
    assert sorted(results[0]) == [(w, i) for w in range(2) for i in range(40)]


def test_an_open_sequencer_is_closed_when_the_build_ends(run):
    def build(worker):  # a plain build: nobody closes the sequencer, nobody reads it; the computation ends
        seq = at.Sequencer(worker)
        seq.push(worker.index)
        return seq

    for seq in run(build, workers=2):
        with pytest.raises(RuntimeError, match="closed"):
            seq.push(1)


# -- Barrier ---------------------------------------------------------------------------


def test_no_worker_leaves_a_round_before_every_worker_has_reached_it(run):
    log = []

    async def build(worker):
        barrier = at.Barrier(worker)
        rng = random.Random(worker.index)
        for r in range(4):
            await asyncio.sleep(rng.random() / 200)
            log.append(("reached", r, worker.index))
            await asyncio.wait_for(barrier.wait(), HANG)
            log.append(("left", r, worker.index))
        return barrier.round

    assert run(build, workers=3) == [4, 4, 4]
    for r in range(4):
        reached = [i for i, (what, rr, _) in enumerate(log) if what == "reached" and rr == r]
        left = [i for i, (what, rr, _) in enumerate(log) if what == "left" and rr == r]
        assert len(reached) == len(left) == 3
        assert max(reached) < min(left)


def test_a_closed_barrier_holds_nobody_back_and_cannot_be_waited_on(run):
    async def build(worker):
        barrier = at.Barrier(worker)
        if worker.index == 0:
            barrier.close()
            with pytest.raises(RuntimeError, match="closed"):
                await barrier.wait()
            return "closed"
        for _ in range(3):
            await asyncio.wait_for(barrier.wait(), HANG)
        return barrier.round

    assert run(build, workers=2) == ["closed", 3]


# -- across processes --------------------------------------------------------------------


def test_workers_of_two_processes_see_one_order():
    code, out, err = launch("tests/cluster/programs.py:sequenced", 2, 2, timeout=120)
    assert code == 0, err
    orders = [line for line in lines_after_prefix(out) if line.startswith("order ")]
    assert len(orders) == 4
    assert len({line.split(" ", 2)[2] for line in orders}) == 1, orders
    commands = eval(orders[0].split(" ", 2)[2])  # noqa: S307 - our own program's output
    assert sorted(map(tuple, commands)) == sorted((w, i) for w in range(4) for i in range(5))
    assert sum(line.startswith("barrier ") for line in lines_after_prefix(out)) == 4
