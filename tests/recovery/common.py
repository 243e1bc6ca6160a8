"""What the recovery tests share: a source that keeps its position, a running sum that keeps its sums by key,
and a run with a recovery directory."""

from __future__ import annotations

import asyncio

import aiotimely as at
from aiotimely.recovery import Recovery

RECORDS = 600
PER_TIME = 10


def numbers_source(worker: at.Worker, *, jump: int = 1, pace: float = 0.0, crash_at: int | None = None):
    """The logic of a source of ``RECORDS`` numbers, ``PER_TIME`` per time and ``jump`` times per activation,
    keeping its position (key 0: on worker 0). At ``crash_at`` it waits for the snapshots to catch up with
    the frontier, then fails."""

    async def numbers(output, cap):
        position = output.keyed_state("position", dict)
        if worker.index != 0:
            cap.drop()
            return
        cap.downgrade(output.resume_time())
        n = position.get(0, 0)
        while n < RECORDS:
            for _ in range(min(jump, (RECORDS - n) // PER_TIME)):
                if n // PER_TIME > cap.time:
                    cap.downgrade(n // PER_TIME)
                if crash_at is not None and n >= crash_at:
                    await asyncio.sleep(0.3)
                    raise RuntimeError(f"crashed at {n}")
                output.session(cap).give_many(range(n, n + PER_TIME))
                n += PER_TIME
                position[0] = n
            await asyncio.sleep(pace)
        cap.drop()

    return numbers


def partitions_source(worker: at.Worker, partitions: int, count: int, per_time: int, record, pace: float | None):
    """The logic of a source of ``partitions`` partitions of ``count`` numbers each, ``per_time`` per unit of time,
    each partition's position kept by its key (so it moves with the workers): ``record(partition, n)`` is sent
    for each; it sleeps ``pace`` seconds after each unit of time (``None``: it does not yield)."""

    async def numbers(output, cap):
        positions = output.keyed_state("positions", dict)
        mine = [p for p in range(partitions) if at.route(p, worker.peers) == worker.index]
        cap.downgrade(output.resume_time())
        while True:
            moving = [p for p in mine if positions.get(p, 0) < count]
            if not moving:
                break
            now = min(positions.get(p, 0) // per_time for p in moving)
            if now > cap.time:
                cap.downgrade(now)
            for p in moving:
                n = positions.get(p, 0)
                if n // per_time == now:
                    output.session(cap).give_many(record(p, m) for m in range(n, n + per_time))
                    positions[p] = n + per_time
            if pace is not None:
                await asyncio.sleep(pace)
        cap.drop()

    return numbers


def running_sums(keyed: at.Stream) -> at.Stream:
    """``(key, x)`` records summed per key (kept by key, applied time by time): ``(time, key, sum)`` for the
    keys each time touched."""

    @keyed.unary_frontier(exchange=lambda kv: kv[0], name="RunningSum")
    async def running_sum(input, output, cap):
        cap.drop()
        sums = input.keyed_state("sums", dict)
        order = input.time_order()
        async for _ in input.activations():
            for time, records in order.ready():
                touched = set()
                for key, x in records:
                    sums[key] = sums.get(key, 0) + x
                    touched.add(key)
                output.session(time).give_many((time.time, key, sums[key]) for key in sorted(touched))

    return running_sum


def final_sums(outputs: list) -> dict:
    """The sums by (time, key), checking that a repeated output repeats the same sum."""
    by_key_time = {}
    for time, key, total in outputs:
        assert by_key_time.setdefault((time, key), total) == total, "a repeated output differs"
    return by_key_time


def run(build, tmp_path, workers=1, every=3):
    return at.execute(build, workers=workers, recovery=Recovery(tmp_path / "state", every=every), loop="asyncio")


def crashing(crash_at: int | None):
    """A map function failing at record ``crash_at``."""

    def crash(x):
        if x == crash_at:
            raise RuntimeError(f"crashed at {x}")
        return x

    return crash
