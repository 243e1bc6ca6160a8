"""Every operator of the library: what comes out, at which times, on which worker."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from collections import Counter

import pytest

import aiotimely as at
from aiotimely.progress import INT, ProductType

P = at.Product


def collect(stream, into):
    return stream.inspect_time(lambda t, x: into.append((t, x)))


def single(run, make):
    """Run ``make(scope, out)`` on one worker; return the sorted (time, record) pairs it collected."""
    def build(worker):
        out = []
        worker.dataflow(lambda scope: make(scope, out))
        return out

    return sorted(run(build)[0], key=repr)


def feed(inp, rounds):
    """Send ``rounds[t]`` at time t, then close."""
    for t, records in enumerate(rounds):
        inp.advance_to(t)
        inp.send_batch(records)
    inp.close()


# -- record at a time ----------------------------------------------------------------


def test_map_flat_map_filter(run):
    got = single(run, lambda s, out: collect(
        at.to_stream(range(6), s).map(lambda x: x * 10).flat_map(lambda x: [x, x + 1]).filter(lambda x: x % 20 != 1),
        out))
    assert got == sorted([(0, x) for x in [0, 10, 11, 20, 30, 31, 40, 50, 51]], key=repr)


def test_inspect_variants_see_records_times_and_batches(run):
    def build(worker):
        seen, times, batches = [], [], []
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).inspect(seen.append)
                        .inspect_time(lambda t, x: times.append((t, x)))
                        .inspect_batch(lambda t, xs: batches.append((t, list(xs)))))
        feed(inp, [[1, 2], [3]])
        return seen, times, batches

    seen, times, batches = run(build)[0]
    assert seen == [1, 2, 3]
    assert times == [(0, 1), (0, 2), (1, 3)]
    assert batches == [(0, [1, 2]), (1, [3])]


def test_to_stream_and_a_source_that_awaits_io(run):
    async def ticking(output, cap):
        for i in range(3):
            await asyncio.sleep(0.001)            # real asyncio awaiting inside an operator
            output.session(cap).give(i)
            cap.downgrade(cap.time + 1)

    got = single(run, lambda s, out: collect(at.source(s, "Ticks", ticking).concat(at.to_stream("ab", s)), out))
    assert got == sorted([(0, 0), (0, "a"), (0, "b"), (1, 1), (2, 2)], key=repr)


# -- routing ----------------------------------------------------------------


def test_exchange_routes_by_key_and_broadcast_reaches_everyone(run):
    def build(worker):
        routed, everywhere = [], []
        mine = [x for x in range(12) if x % worker.peers == worker.index]
        def make(s):
            stream = at.to_stream(mine, s)
            stream.exchange(lambda x: x // 4).inspect(routed.append)
            stream.broadcast().inspect(everywhere.append)
        worker.dataflow(make)
        return routed, everywhere

    results = run(build, workers=3)
    for w, (routed, everywhere) in enumerate(results):
        assert sorted(routed) == [x for x in range(12) if (x // 4) % 3 == w]
        assert sorted(everywhere) == list(range(12))


def test_exchange_of_strings_is_stable_across_runs():
    assert at.route("word", 4) == at.route("word", 4)
    assert at.route(7, 4) == 3 and at.route((1, "a"), 4) in range(4)


def test_a_str_enum_member_and_a_named_tuple_route_alike_in_every_process_as_the_values_they_equal():
    """Their own ``__hash__`` is salted per process (a ``StrEnum``'s is its ``str``'s, a ``bytes`` subclass's its
    ``bytes``'): every process must still send a key to the same worker, the one its plain value goes to."""
    code = ("import enum, typing, aiotimely as at\n"
            "class Fruit(enum.StrEnum):\n    APPLE = 'apple'\n"
            "class Key(typing.NamedTuple):\n    name: str\n    n: int\n"
            "class Blob(bytes):\n    pass\n"
            "print([at.route(k, 1009) for k in (Fruit.APPLE, 'apple', Key('pear', 2), ('pear', 2), Blob(b'fig'),"
            " b'fig')])")
    seen = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    enum_route, plain_route, tuple_route, plain_tuple_route, blob_route, plain_bytes_route = ast.literal_eval(seen[0])
    assert seen[0] == seen[1]
    assert enum_route == plain_route and tuple_route == plain_tuple_route and blob_route == plain_bytes_route


ROUTED_KEYS = """\
import datetime as dt, decimal, enum, fractions, ipaddress, pathlib, uuid
class Color(enum.Enum):
    RED = 1
    GREEN = (2, 'g')
    BLUE = 'blue'
class Perm(enum.Flag):
    R = 1
    W = 2
utc, east = dt.timezone.utc, dt.timezone(dt.timedelta(hours=5, minutes=30))
KEYS = [dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 12, 30), dt.datetime(2024, 2, 29, 12, 30, tzinfo=utc),
        dt.time(7, 15, 2), dt.time(7, 15, tzinfo=east), dt.timedelta(days=3, seconds=5), east,
        Color.RED, Color.GREEN, Color.BLUE, Perm.R | Perm.W, frozenset({'a', 'b', 'cd'}), frozenset({b'x', 2}),
        1.5, -2.0, 1e300, float('inf'), decimal.Decimal('2.50'), fractions.Fraction(1, 3), None, True, 3 + 4j,
        uuid.UUID('12345678-1234-5678-1234-567812345678'), ipaddress.ip_address('10.0.0.1'),
        ipaddress.ip_network('10.0.0.0/8'), ipaddress.ip_interface('::1/64'), pathlib.PurePosixPath('a/b'),
        pathlib.PureWindowsPath('C:/x'), range(3), int, (('day', dt.date(2024, 1, 1)), frozenset({Color.RED, 'x'}))]
EQUAL = [(dt.datetime(2024, 2, 29, 12, 30, tzinfo=utc), dt.datetime(2024, 2, 29, 18, 0, tzinfo=east)),
         (frozenset({'a', 'b', 'cd'}), frozenset(['cd', 'b', 'a'])), (-2.0, -2), (decimal.Decimal('2.50'), 2.5),
         (fractions.Fraction(5, 2), 2.5), (True, 1), (1e300, int(1e300)), (complex(2, 0), 2),
         (dt.time(7, 15, tzinfo=east), dt.time(1, 45, tzinfo=utc)), ((1, frozenset({2.0})), (1.0, frozenset({2})))]
"""


def test_keys_of_every_standard_value_type_route_alike_in_every_process():
    """Dates, times, enum members, frozensets, numbers of every kind, UUIDs, addresses, paths: Python's own hash
    of many of these is salted per process (a date hashes its bytes, an enum member its name), so two processes
    with different hash seeds must still send each key to the same worker — and equal keys (the same instant in
    two timezones, 2.5 and Decimal('2.50'), a frozenset in any order) to the same worker too."""
    code = ROUTED_KEYS + (
        "import aiotimely as at\n"
        "assert all(a == b for a, b in EQUAL)\n"
        "print([at.route(k, 1009) for k in KEYS])\n"
        "print([i for i, (a, b) in enumerate(EQUAL) if at.route(a, 1009) != at.route(b, 1009)])")
    seen = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2", "3")]
    for done in seen:
        assert done.returncode == 0, done.stderr
    namespace: dict = {}
    exec(ROUTED_KEYS, namespace)
    routes, unequal = zip(*([ast.literal_eval(line) for line in done.stdout.splitlines()] for done in seen),
                          strict=True)
    assert [key for i, key in enumerate(namespace["KEYS"]) if len({r[i] for r in routes}) > 1] == []
    assert [namespace["EQUAL"][i] for i in unequal[0]] == []      # (equal keys route alike)


def test_concat_concatenate_partition_branch_ok_err(run):
    def make(s, out):
        a, b, c = at.to_stream([1, 2], s), at.to_stream([3], s), at.to_stream([4, 5, 6], s)
        collect(a.concat(b).map(lambda x: ("concat", x)), out)
        collect(at.concatenate(s, [a, b, c]).map(lambda x: ("all", x)), out)
        for i, part in enumerate(c.partition(3, lambda x: x % 3)):
            collect(part.map(lambda x, i=i: ("part", i, x)), out)
        no, yes = c.branch(lambda x: x > 4)
        collect(no.map(lambda x: ("no", x)), out)
        collect(yes.map(lambda x: ("yes", x)), out)
        oks, errs = a.concat(c).ok_err(lambda x: (x % 2 == 0, x * 100))
        collect(oks.map(lambda x: ("ok", x)), out)
        collect(errs.map(lambda x: ("err", x)), out)

    got = Counter(x for _, x in single(run, make))
    assert got == Counter([
        ("concat", 1), ("concat", 2), ("concat", 3),
        *[("all", x) for x in range(1, 7)],
        ("part", 1, 4), ("part", 2, 5), ("part", 0, 6),
        ("no", 4), ("yes", 5), ("yes", 6),
        ("ok", 200), ("ok", 400), ("ok", 600), ("err", 100), ("err", 500),
    ])


def test_partition_names_a_bad_index(run):
    def build(worker):
        worker.dataflow(lambda s: at.to_stream([1], s).partition(2, lambda x: 5))

    with pytest.raises(at.DataflowError, match="'Partition'.*returned 5 for 1; expected an int in 0..1"):
        run(build)


# -- time ----------------------------------------------------------------


def test_delay_moves_records_and_releases_them_when_complete(run):
    def build(worker):
        out = []
        inp = at.InputHandle()
        worker.dataflow(lambda s: collect(inp.to_stream(s).delay(lambda x, t: t + x), out))
        feed(inp, [[3, 1], [0, 2]])
        return out

    got = run(build)[0]
    assert sorted(got) == [(1, 0), (1, 1), (3, 2), (3, 3)]
    assert [t for t, _ in got] == sorted(t for t, _ in got)  # released in time order


def test_delay_refuses_to_move_records_back(run):
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda s: inp.to_stream(s).delay(lambda x, t: t - 1))
        inp.advance_to(5)
        inp.send("late")

    with pytest.raises(at.CapabilityError, match="Delay.*returned 4.*at 5.*must not be earlier"):
        run(build)


def test_delay_batch_accumulate_and_count(run):
    def build(worker):
        delayed, sums, counts = [], [], []
        inp = at.InputHandle()
        def make(s):
            stream = inp.to_stream(s)
            collect(stream.delay_batch(lambda t: t * 10), delayed)
            collect(stream.accumulate(0, lambda acc, xs: acc + sum(xs)), sums)
            collect(stream.count(), counts)
        worker.dataflow(make)
        feed(inp, [[1, 2], [], [3, 4, 5]])
        return delayed, sums, counts

    delayed, sums, counts = run(build)[0]
    assert sorted(delayed) == [(0, 1), (0, 2), (20, 3), (20, 4), (20, 5)]
    assert sums == [(0, 3), (2, 12)]
    assert counts == [(0, 2), (2, 3)]


def test_reclock_emits_data_at_the_next_clock_tick(run):
    def build(worker):
        out = []
        data, clock = at.InputHandle(), at.InputHandle()
        worker.dataflow(lambda s: collect(data.to_stream(s).reclock(clock.to_stream(s)), out))
        for t in range(1, 11):
            data.advance_to(t)
            data.send(t)
            clock.advance_to(t)
            if t in (3, 7, 10):
                clock.send(None)
        data.close()
        clock.close()
        return out

    got = run(build)[0]
    assert sorted(got) == [(3, 1), (3, 2), (3, 3), (7, 4), (7, 5), (7, 6), (7, 7), (10, 8), (10, 9), (10, 10)]


def test_partially_ordered_times_complete_by_the_product_order(run):
    """(1, 1) is complete while the frontier is {(0, 5), (3, 1)}, though (0, 5) < (1, 1) lexicographically."""
    async def build(worker):
        a, b = at.InputHandle(), at.InputHandle()
        counts = []
        probe = worker.dataflow(
            lambda s: collect(a.to_stream(s).concat(b.to_stream(s)).count(), counts).probe(),
            timestamp=ProductType(INT, INT))
        a.send_batch(["x", "y"])
        a.advance_to(P(0, 5))
        b.advance_to(P(1, 1))
        b.send("z")
        b.advance_to(P(3, 1))
        await worker.step_while(lambda: probe.less_equal(P(1, 1)))
        frontier = probe.frontier
        a.close()
        b.close()
        return counts, frontier

    counts, frontier = run(build)[0]
    assert frontier == at.Antichain([P(0, 5), P(3, 1)])
    assert counts == [(P(0, 0), 2), (P(1, 1), 1)]


# -- observing ------------------------------------------------------------------------


def test_probe_frontier_and_wait_beyond(run):
    async def build(worker):
        inp = at.InputHandle()
        probe = worker.dataflow(lambda s: inp.to_stream(s).map(lambda x: x).probe())
        history = [probe.frontier]
        for t in range(1, 4):
            inp.advance_to(t)
            await probe.wait_beyond(t - 1)
            history.append(probe.frontier)
            assert not probe.less_than(t) and probe.less_equal(t)
        inp.close()
        await probe.wait_beyond(100)
        history.append(probe.frontier)
        assert probe.done()
        return history

    assert run(build)[0] == [at.Antichain([0]), at.Antichain([1]), at.Antichain([2]), at.Antichain([3]),
                             at.Antichain()]


def test_probe_with_watches_several_streams(run):
    async def build(worker):
        a, b = at.InputHandle(), at.InputHandle()
        handle = at.ProbeHandle()
        worker.dataflow(lambda s: (a.to_stream(s).probe_with(handle), b.to_stream(s).probe_with(handle)))
        a.advance_to(5)
        b.advance_to(2)
        await worker.step_while(lambda: handle.less_than(2))
        first = handle.frontier
        b.close()
        await handle.wait_beyond(4)
        second = handle.frontier
        a.close()
        return first, second

    assert run(build)[0] == (at.Antichain([2]), at.Antichain([5]))


def test_capture_and_replay_reproduce_records_and_frontiers(run):
    def produce(worker):
        inp = at.InputHandle()
        captured = worker.dataflow(lambda s: inp.to_stream(s).capture())
        feed(inp, [[1, 2], [3], [], [4]])
        return captured

    captured = run(produce)[0]
    assert captured.extract() == [(0, [1, 2]), (1, [3]), (3, [4])]

    async def consume(worker):
        out = []
        probe = worker.dataflow(lambda s: collect(at.replay(captured, s), out).probe())
        await worker.step_until_done()
        return out, probe.done()

    out, done = run(consume)[0]
    assert sorted(out) == [(0, 1), (0, 2), (1, 3), (3, 4)] and done


# -- generic operators ----------------------------------------------------------------


def test_unary_and_binary_with_capabilities(run):
    def build(worker):
        out = []
        a, b = at.InputHandle(), at.InputHandle()

        def make(s):
            @a.to_stream(s).unary(name="Double")
            async def doubled(input, output, cap):
                cap.drop()
                async for _ in input.activations():
                    for time, batch in input.drain():
                        output.session(time).give_many(x * 2 for x in batch)

            @doubled.binary(b.to_stream(s), name="Pairs")
            async def paired(left, right, output, cap):
                cap.drop()
                async for _ in left.activations():
                    for time, batch in left.drain():
                        output.session(time).give_many(("L", x) for x in batch)
                    for time, batch in right.drain():
                        later = time.delayed(time.time + 100)
                        output.session(later).give_many(("R", x) for x in batch)
                        later.drop()

            collect(paired, out)

        worker.dataflow(make)
        feed(a, [[1], [2]])
        feed(b, [[], ["x"]])
        return out

    assert sorted(run(build)[0], key=repr) == sorted([(0, ("L", 2)), (1, ("L", 4)), (101, ("R", "x"))], key=repr)


def test_unary_notify_and_binary_notify_fire_in_time_order(run):
    def build(worker):
        fired, joined = [], []
        a, b = at.InputHandle(), at.InputHandle()

        def make(s):
            sa, sb = a.to_stream(s), b.to_stream(s)

            @sa.unary_notify(name="Notify")
            async def notified(input, output, notificator):
                stash = {}
                async for _ in input.activations():
                    for time, batch in input.drain():
                        stash.setdefault(time.time, []).extend(batch)
                        notificator.notify_at(time)
                    for cap in notificator.ready():
                        fired.append((cap.time, sorted(stash.pop(cap.time))))
                        output.session(cap).give(len(fired))

            @sa.binary_notify(sb, name="Join")
            async def join(left, right, output, notificator):
                stash = {}
                async for _ in left.activations():
                    for inp in (left, right):
                        for time, batch in inp.drain():
                            stash.setdefault(time.time, []).extend(batch)
                            notificator.notify_at(time)
                    for cap in notificator.ready():
                        joined.append((cap.time, sorted(stash.pop(cap.time))))

            collect(notified, [])

        worker.dataflow(make)
        a.send(3)
        a.advance_to(1)
        a.send(1)
        b.send(9)
        b.advance_to(1)
        a.advance_to(2)
        a.send(2)
        a.close()
        b.close()
        return fired, joined

    fired, joined = run(build)[0]
    assert fired == [(0, [3]), (1, [1]), (2, [2])]
    assert joined == [(0, [3, 9]), (1, [1]), (2, [2])]


def test_frontier_notificator_with_explicit_frontiers(run):
    def build(worker):
        seen = []

        def make(s):
            @at.to_stream([5, 1, 3], s).unary_frontier(name="Later")
            async def later(input, output, cap):
                note = at.FrontierNotificator()
                async for _ in input.activations():
                    for _time, batch in input.drain():
                        for x in batch:
                            note.notify_at(cap.delayed(x))
                    seen.append(note.pending())
                    for ready in note.ready([input.frontier]):
                        output.session(ready).give(ready.time)
                cap.drop()

            collect(later, seen)

        worker.dataflow(make)
        return seen

    seen = run(build)[0]
    assert seen[0] == [1, 3, 5]
    assert [x for x in seen if isinstance(x, tuple)] == [(1, 1), (3, 3), (5, 5)]


def test_sink_sees_everything_then_completes(run):
    def build(worker):
        got = []

        def make(s):
            @at.to_stream(range(5), s).sink(name="Collector")
            async def collector(input):
                async for _ in input.activations():
                    for _time, batch in input.drain():
                        got.extend(batch)
                got.append("complete")

        worker.dataflow(make)
        return got

    assert run(build)[0] == [0, 1, 2, 3, 4, "complete"]


def test_generic_builders_need_async_logic(run):
    def build(worker):
        worker.dataflow(lambda s: at.to_stream([1], s).unary(lambda i, o, c: None))

    with pytest.raises(TypeError, match="must be an 'async def'"):
        run(build)


def test_records_leave_in_the_order_given_across_sessions(run):
    def build(worker):
        out = []

        async def interleave(input, output, cap):
            early = cap
            late = cap.delayed(1)
            a, b = output.session(early), output.session(late)
            for i in range(3000):           # more than a batch, alternating sessions
                (a if i % 2 == 0 else b).give(i)
            early.drop()
            late.drop()
            async for _ in input.activations():
                pass

        worker.dataflow(lambda s: at.to_stream([], s).unary(interleave, name="Interleave").inspect(out.append))
        return out

    assert run(build)[0] == list(range(3000))
