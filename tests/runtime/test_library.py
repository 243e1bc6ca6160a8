"""The rest of timely's operator library: branch_when, map_in_place, notifications asked for up front, the
N-input operator, unordered inputs and scopes of any refinement, each against timely's documented behaviour."""

from __future__ import annotations

from collections import Counter
from functools import total_ordering

import pytest

import aiotimely as at
from aiotimely.progress import INT, ProductType, Refinement

P = at.Product


def collect(stream, into):
    return stream.inspect_time(lambda t, x: into.append((t, x)))


def feed(inp, rounds):
    """Send ``rounds[t]`` at time t, then close."""
    for t, records in enumerate(rounds):
        inp.advance_to(t)
        inp.send_batch(records)
    inp.close()


# -- branch_when ------------------------------------------------------------------------


def test_branch_when_splits_by_time_once_per_batch(run):
    def build(worker):
        no, yes, asked = [], [], []
        inp = at.InputHandle()

        def make(s):
            def late(t):
                asked.append(t)
                return t >= 2

            before, after = inp.to_stream(s).branch_when(late)
            return collect(before, no).probe(), collect(after, yes).probe()

        probes = worker.dataflow(make)
        feed(inp, [[1, 2], [3], [4, 5, 6], [7]])
        return no, yes, asked, probes

    no, yes, asked, (p_no, p_yes) = run(build)[0]
    assert no == [(0, 1), (0, 2), (1, 3)]            # records whose time fails the predicate: the first stream
    assert yes == [(2, 4), (2, 5), (2, 6), (3, 7)]
    assert sorted(asked) == [0, 1, 2, 3]             # once per batch, by its time, not once per record
    assert p_no.done() and p_yes.done()


def test_branch_when_bounds_the_books_collatz_loop(run):
    """The book's example: numbers go round a loop until they reach 1, but never past time 100."""
    def build(worker):
        seen = []

        def make(s):
            handle, looped = s.feedback(1)
            (at.to_stream(range(1, 10), s).concat(looped)
             .map(lambda x: x // 2 if x % 2 == 0 else 3 * x + 1)
             .inspect_time(lambda t, x: seen.append((t, x)))
             .filter(lambda x: x != 1)
             .branch_when(lambda t: t < 100)[1]
             .connect_loop(handle))

        worker.dataflow(make)
        return seen

    seen = run(build)[0]
    # 3 -> 10 -> 5 -> 16 -> 8 -> 4 -> 2 -> 1, one step per time; 9 takes 19 steps
    assert {(0, 10), (1, 5), (2, 16), (3, 8), (4, 4), (5, 2), (6, 1)} <= set(seen)
    assert max(t for t, _ in seen) == 18 and (18, 1) in seen
    assert Counter(x for _, x in seen)[1] == 9       # each start reaches 1 exactly once


def test_branch_when_in_a_loop_drops_what_reaches_the_bound(run):
    def build(worker):
        seen = []

        def make(s):
            handle, looped = s.feedback(1)
            (at.to_stream([0], s).concat(looped).inspect_time(lambda t, x: seen.append(t))
             .map(lambda x: x + 1).branch_when(lambda t: t < 4)[1].connect_loop(handle))

        worker.dataflow(make)
        return seen

    assert run(build)[0] == [0, 1, 2, 3, 4]        # the record at time 4 leaves by the first (false) stream


# -- map_in_place -------------------------------------------------------------------------


def test_map_in_place_changes_the_records_themselves_and_fuses(run, monkeypatch):
    monkeypatch.setenv("AIOTIMELY_FUSE", "1")

    def build(worker):
        out, originals = [], []
        inp = at.InputHandle()

        def make(s):
            stream = inp.to_stream(s).inspect(originals.append).map_in_place(lambda r: r.append(len(r)))
            collect(stream.map_in_place(lambda r: r.reverse()), out)
            return [[stage.name for stage in op.chain.stages] for op in s.operators() if op.chain is not None]

        chains = worker.dataflow(make)
        feed(inp, [[[1], [2, 3]], [[]]])
        return out, originals, chains

    out, originals, chains = run(build)[0]
    assert out == [(0, [1, 1]), (0, [2, 3, 2]), (1, [0])]
    assert [x for _, x in out] == originals
    assert all(a is b for (_, a), b in zip(out, originals, strict=True))  # no copies
    assert chains == [["Inspect", "MapInPlace", "MapInPlace", "InspectTime"]]   # one fused chain, as maps make


def test_map_in_place_error_names_the_operator_and_time(run):
    def build(worker):
        worker.dataflow(lambda s: at.to_stream([(1,)], s).map_in_place(lambda r: r.append(0)))

    with pytest.raises(at.DataflowError, match=r"'MapInPlace'.*at time 0: AttributeError"):
        run(build)


# -- notifications asked for up front -------------------------------------------------------


def test_unary_notify_init_times_are_notified_once_the_frontier_passes_them(run):
    def build(worker):
        fired = []
        inp = at.InputHandle()

        def make(s):
            @inp.to_stream(s).unary_notify(name="Ticks", init=[3, 1])
            async def ticks(input, output, notificator):
                async for _ in input.activations():
                    for time, batch in input.drain():
                        output.session(time).give_many(batch)
                    for cap in notificator.ready():
                        fired.append((cap.time, list(input.frontier)))
                        output.session(cap).give(f"tick {cap.time}")

            out = []
            return collect(ticks, out), out

        _, out = worker.dataflow(make)
        feed(inp, [["a"], [], ["b"], [], []])
        return fired, out

    fired, out = run(build)[0]
    assert [t for t, _ in fired] == [1, 3]               # in time order, without any record at those times
    assert all(frontier == [] or frontier[0] > t for t, frontier in fired)   # only once the frontier passed
    assert sorted(out) == [(0, "a"), (1, "tick 1"), (2, "b"), (3, "tick 3")]   # the notification's capability sends


def test_binary_notify_init_fires_once_both_inputs_pass_it(run):
    async def build(worker):
        fired = []
        a, b = at.InputHandle(), at.InputHandle()

        def make(s):
            @a.to_stream(s).binary_notify(b.to_stream(s), name="Join", init=[2])
            async def join(left, right, output, notificator):
                async for _ in left.activations():
                    for inp in (left, right):
                        for _time, _batch in inp.drain():
                            pass
                    for cap in notificator.ready():
                        fired.append(cap.time)

            return join.probe()

        probe = worker.dataflow(make)
        for handle in (a, b):
            handle.advance_to(5)
        await worker.step_while(lambda: probe.less_equal(2))
        frontier_after = list(probe.frontier)
        a.close()
        b.close()
        return fired, frontier_after

    fired, frontier_after = run(build)[0]
    assert fired == [2]
    assert frontier_after == [5]                   # notified, the init time no longer holds the output


def test_init_times_of_the_wrong_type_or_without_notify_are_refused(run):
    def wrong_type(worker):
        def make(s):
            @at.to_stream([1], s).unary_notify(name="Ticks", init=[1, "two"])
            async def ticks(input, output, notificator):
                pass

        worker.dataflow(make)

    with pytest.raises(at.CapabilityError, match=r"unary_notify 'Ticks' in dataflow .*init time 'two'.*int") as e:
        run(wrong_type)
    assert e.value.operator == "Ticks" and e.value.time == "two"

    def not_notify(worker):
        worker.dataflow(lambda s: at.operator([at.to_stream([1], s)], _idle, init=[1], name="Plain"))

    with pytest.raises(at.GraphError, match="'Plain': init= asks for notifications"):
        run(not_notify)


async def _idle(inputs, outputs, caps):
    for cap in caps:
        cap.drop()


# -- the N-input operator ---------------------------------------------------------------------


def test_operator_with_three_inputs_and_two_outputs_on_two_workers(run):
    def build(worker):
        records, totals = [], []
        inputs = [at.InputHandle() for _ in range(3)]

        def make(s):
            @at.operator([inp.to_stream(s) for inp in inputs], outputs=2, exchange=[None, lambda x: x, None],
                         name="Gather")
            async def gather(ins, outs, caps):
                tag, total = outs
                note = at.FrontierNotificator()
                sums = {}
                caps[0].drop()
                async for _ in ins[0].activations():
                    for i, inp in enumerate(ins):
                        for time, batch in inp.drain():
                            tag.session(time).give_many((i, x) for x in batch)
                            sums[time.time] = sums.get(time.time, 0) + sum(batch)
                            note.notify_at(caps[1].delayed(time.time))
                    for cap in note.ready([inp.frontier for inp in ins]):
                        total.session(cap).give(sums.pop(cap.time))
                caps[1].drop()

            tagged, summed = gather
            collect(tagged, records)
            collect(summed, totals)

        worker.dataflow(make)
        me = worker.index
        feed(inputs[0], [[10 + me], [20 + me]])
        feed(inputs[1], [[2 + me, 4 + me], [6 + me]])   # exchanged: even records to worker 0, odd to 1
        feed(inputs[2], [[], [100]])
        return records, totals

    (rec0, tot0), (rec1, tot1) = run(build, workers=2)
    assert sorted(rec0) == [(0, (0, 10)), (0, (1, 2)), (0, (1, 4)), (1, (0, 20)), (1, (1, 6)), (1, (2, 100))]
    assert sorted(rec1) == [(0, (0, 11)), (0, (1, 3)), (0, (1, 5)), (1, (0, 21)), (1, (1, 7)), (1, (2, 100))]
    assert sorted(tot0) == [(0, 16), (1, 126)] and sorted(tot1) == [(0, 19), (1, 128)]


def test_operator_without_inputs_and_with_notify(run):
    def build(worker):
        out = []

        def make(s):
            @at.operator([], outputs=2, scope=s, name="Source")
            async def source(ins, outs, caps):
                assert ins == []
                for i, (out_, cap) in enumerate(zip(outs, caps, strict=True)):
                    out_.session(cap.delayed(i + 1)).give(f"out {i}")
                    cap.drop()

            first, second = source

            @at.operator([first, second], notify=True, init=[7], name="Notified")
            async def notified(ins, outs, notificator):
                async for _ in ins[0].activations():
                    for inp in ins:
                        for time, batch in inp.drain():
                            outs[0].session(time).give_many(batch)
                    for cap in notificator.ready():
                        outs[0].session(cap).give("init")

            collect(notified[0], out)

        worker.dataflow(make)
        return out

    assert sorted(run(build)[0]) == [(1, "out 0"), (2, "out 1"), (7, "init")]


def test_operator_misuse_is_refused(run):
    def no_scope(worker):
        worker.dataflow(lambda s: at.operator([], _idle))

    with pytest.raises(at.GraphError, match="has no input stream: say which scope"):
        run(no_scope)

    def wrong_keys(worker):
        worker.dataflow(lambda s: at.operator([at.to_stream([1], s)] * 2, _idle, exchange=[None]))

    with pytest.raises(ValueError, match="1 exchange keys for 2 inputs"):
        run(wrong_keys)

    def unconnected(worker):
        async def logic(ins, outs, caps):
            for cap in caps:
                cap.drop()
            async for _ in ins[0].activations():
                for time, _batch in ins[0].drain():
                    outs[1].session(time.retain(1))

        worker.dataflow(lambda s: at.operator([at.to_stream([1], s)], logic, outputs=2, connection=[{0: 0}],
                                              name="Half"))

    with pytest.raises(at.CapabilityError, match="'Half'.*cannot justify a capability at 0 on output 1"):
        run(unconnected)


# -- unordered inputs ---------------------------------------------------------------------------


def test_unordered_input_sends_at_any_time_it_holds_and_frontiers_follow_its_capabilities(run):
    async def build(worker):
        out = []

        def make(s):
            (handle, cap), stream = s.new_unordered_input()
            return handle, cap, collect(stream, out).probe()

        handle, cap, probe = worker.dataflow(make)
        late = cap.delayed(5)
        handle.session(late).give("five")            # later first: the input's times need not be in order
        handle.session(cap).give_many(["zero", "zero again"])
        cap.downgrade(3)
        await worker.step_while(lambda: probe.less_than(3))
        steps = [list(probe.frontier)]
        cap.downgrade(4)                              # alone, with nothing sent: it wakes the input itself
        for _ in range(5):
            if not probe.less_than(4):
                break
            await worker.step()
        steps.append(list(probe.frontier))
        handle.session(cap).give("four")
        cap.drop()
        await worker.step_while(lambda: probe.less_than(5))
        steps.append(list(probe.frontier))            # only the capability at 5 holds the stream now
        handle.session(late).give("five again")
        late.drop()
        await worker.step_while(lambda: not probe.done())
        return out, steps

    out, steps = run(build)[0]
    assert steps == [[3], [4], [5]]
    assert sorted(out) == [(0, "zero"), (0, "zero again"), (4, "four"), (5, "five"), (5, "five again")]


def test_unordered_input_sends_many_records_in_batches_and_waits_for_room(run):
    async def build(worker):
        counted = []

        def make(s):
            (handle, cap), stream = s.new_unordered_input()
            collect(stream.count(), counted)
            return handle, cap

        handle, cap = worker.dataflow(make)
        later = cap.delayed(1)
        for i in range(5000):                          # several batches' worth, at two times, interleaved
            handle.session(later if i % 2 else cap).give(i)
        await handle.wait_room()                       # returns once the dataflow took enough of them
        cap.drop()
        later.drop()
        await worker.step_until_done()
        return counted

    assert sorted(run(build)[0]) == [(0, 2500), (1, 2500)]


def test_unordered_input_on_two_workers_completes_a_time_once_every_worker_passed_it(run):
    async def build(worker):
        counted = []

        def make(s):
            (handle, cap), stream = s.new_unordered_input()
            collect(stream.exchange(lambda x: 0).count(), counted)
            return handle, cap

        handle, cap = worker.dataflow(make)
        for t in (2, 1, 0):                           # every worker sends at 0, 1, 2, latest first
            handle.session(cap.delayed(t)).give_many(range(t + 1))
        return counted                                # the capabilities held are dropped at the build's end

    (counted0, counted1) = run(build, workers=2)
    assert sorted(counted0) == [(0, 2), (1, 4), (2, 6)] and counted1 == []


def test_unordered_input_refuses_to_send_without_a_capability(run):
    def build(worker):
        def make(s):
            (handle, cap), _ = s.new_unordered_input(name="Events")
            (_, other), _ = s.new_unordered_input(name="Others")
            return handle, cap, other

        handle, cap, other = worker.dataflow(make)
        errors = []
        session = handle.session(cap)
        cap.downgrade(2)
        for attempt in (lambda: session.give("stale"), lambda: handle.session(other),
                        lambda: handle.session(None), lambda: cap.delayed(1), lambda: cap.delayed("x")):
            with pytest.raises(at.CapabilityError) as e:
                attempt()
            errors.append(str(e.value))
        cap.drop()
        with pytest.raises(at.CapabilityError, match="already dropped"):
            handle.session(cap)
        return errors

    errors = run(build)[0]
    assert "cannot send at time 0: the session's capability was downgraded to 2" in errors[0]
    assert "'Events'" in errors[0] and "needs a capability of this unordered input" in errors[1]
    assert "needs a capability of this unordered input" in errors[2]
    assert "earlier than" in errors[3] and "'x'" in errors[4]


# -- scoped --------------------------------------------------------------------------------------


@total_ordering
class Round:
    """A user timestamp for an inner coordinate: a counter of rounds."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def less_equal(self, other: Round) -> bool:
        return self.n <= other.n

    def __lt__(self, other: Round) -> bool:
        return self.n < other.n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Round) and self.n == other.n

    def __hash__(self) -> int:
        return hash(self.n)

    def __repr__(self) -> str:
        return f"Round({self.n})"

    @classmethod
    def minimum(cls) -> Round:
        return cls(0)

    def to_tuple(self) -> tuple[int]:
        return (self.n,)

    @classmethod
    def from_tuple(cls, data) -> Round:
        return cls(data[0])

    class Summary:
        __slots__ = ("k",)

        def __init__(self, k: int = 0) -> None:
            self.k = k

        def results_in(self, time: Round) -> Round:
            return Round(time.n + self.k)

        def followed_by(self, other: Round.Summary) -> Round.Summary:
            return Round.Summary(self.k + other.k)

        def less_equal(self, other: Round.Summary) -> bool:
            return self.k <= other.k


def test_scoped_with_a_user_refinement_on_two_workers(run):
    """Doubling inside a scope of ``Product(int, Round)`` times until 20 or more, round by round."""
    def build(worker):
        inner, outer = [], []
        inp = at.InputHandle()

        def make(s):
            stream = inp.to_stream(s)

            def loop(scope):
                handle, looped = scope.feedback(Round.Summary(1))   # the inner coordinate's summary
                doubled = (stream.enter(scope).concat(looped).exchange(lambda x: x)
                           .inspect_time(lambda t, x: inner.append((t, x))))
                small, big = doubled.branch(lambda x: x >= 20)
                small.map(lambda x: 2 * x).connect_loop(handle)
                return big.leave()

            done = s.scoped("Doubling", Round, loop)
            return collect(done, outer).probe()

        probe = worker.dataflow(make)
        feed(inp, [[3 + worker.index], [25]])
        return inner, outer, probe

    results = run(build, workers=2)
    inner = sorted((t.outer, t.inner.n, x) for w in results for t, x in w[0])
    assert all(type(t) is P and type(t.inner) is Round for w in results for t, _ in w[0])
    assert inner == sorted([(0, 0, 3), (0, 1, 6), (0, 2, 12), (0, 3, 24),
                            (0, 0, 4), (0, 1, 8), (0, 2, 16), (0, 3, 32),
                            (1, 0, 25), (1, 0, 25)])
    outer = sorted(r for w in results for r in w[1])
    assert outer == [(0, 24), (0, 32), (1, 25), (1, 25)]     # left at the outer time, the round removed
    assert all(w[2].done() for w in results)


def test_scoped_with_int_is_an_iterative_scope_and_bad_refinements_are_refused(run):
    def build(worker):
        seen = []

        def make(s):
            with s.scoped("Inner", int) as scope:
                collect(at.to_stream([1], s).enter(scope), seen).leave()
            with pytest.raises(at.GraphError, match=r"scoped\('Bad', 'int'\): not a timestamp type"):
                s.scoped("Bad", "int")
            with pytest.raises(at.GraphError, match="object cannot be used as a timestamp"):
                s.scoped("Bad", object)

        worker.dataflow(make)
        return seen

    assert run(build)[0] == [(P(0, 0), 1)]


def test_scoped_with_a_refinement_uses_it_as_it_is(run):
    def build(worker):
        seen = []

        def make(s):
            with s.scoped("Same", Refinement.region(s.ttype)) as scope:
                collect(at.to_stream([1], s).enter(scope).map(lambda x: x + 1), seen).leave()
            with pytest.raises(at.GraphError, match="refinement of Product.* times, but the scope's times are int"):
                s.scoped("Wrong", Refinement.iterative(ProductType(INT, INT)))

        worker.dataflow(make)
        return seen

    assert run(build)[0] == [(0, 2)]
