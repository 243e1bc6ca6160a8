"""Nothing silent: what would give quietly wrong results is refused when the dataflow is built (or at the
operator's first activation), and failures are reported once, naming the operator that caused them."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aiotimely as at
from aiotimely.connectors import to_async

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent.parent


# -- keyed state on a stream not routed by key ------------------------------------------------------------------


def _counts(records_of, *, exchange=None, before=None, region=False, name="counts"):
    """A hand-written keyed operator counting ``(key, n)`` records with ``keyed_state``: per worker, what it
    counted. ``before(stream)`` shapes its input (then it enters a region, with ``region``); ``exchange`` is
    passed to the operator."""

    def build(worker):
        out: list = []

        def make(scope):
            stream = at.to_stream(records_of(worker.index), scope)
            if before is not None:
                stream = before(stream)

            async def counter(input, output, cap):
                cap.drop()
                counts = input.keyed_state("counts", dict)
                async for _ in input.activations():
                    for _time, batch in input.drain():
                        for key, n in batch:
                            counts[key] = counts.get(key, 0) + n
                out.extend(sorted(counts.items()))

            if region:
                with scope.region(name="inner") as inner:
                    stream.enter(inner).unary_frontier(counter, exchange=exchange, name="Counter")
            else:
                stream.unary_frontier(counter, exchange=exchange, name="Counter")

        worker.dataflow(make, name=name)
        return out

    return build


def _two_workers(index):
    return [("a", 1), ("b", 1)] if index == 0 else [("a", 1), ("a", 1)]


def _totals(results):
    totals: dict = {}
    for per_worker in results:
        for key, n in per_worker:
            assert key not in totals, f"key {key!r} counted on two workers: {results}"
            totals[key] = n
    return totals


@pytest.mark.parametrize("region", [False, True])
def test_keyed_state_on_a_stream_not_exchanged_is_refused_on_two_workers(region):
    with pytest.raises(at.DataflowError) as info:          # (it would count [[('a', 1), ('b', 1)], [('a', 2)]])
        at.execute(_counts(_two_workers, region=region), workers=2, loop="asyncio")
    message = str(info.value)
    assert "operator 'Counter'" in message and "dataflow 'counts'" in message and "on worker" in message
    assert "keyed state 'counts'" in message
    assert "exchange=" in message and ".exchange(" in message        # how to fix it, both ways
    assert info.value.operator == "Counter" and info.value.dataflow == "counts"


def test_keyed_state_on_a_broadcast_input_is_refused():
    with pytest.raises(at.DataflowError, match=r"operator 'Counter'.*not routed by key"):
        at.execute(_counts(_two_workers, before=lambda s: s.broadcast()), workers=2, loop="asyncio")


@pytest.mark.parametrize("shape", ["exchange=", ".exchange()", ".exchange().map()", "concat of exchanged",
                                   "entered after .exchange()"])
def test_keyed_state_on_a_stream_routed_by_key_counts_each_key_on_one_worker(shape):
    key = lambda kv: kv[0]  # noqa: E731
    build = {
        "exchange=": _counts(_two_workers, exchange=key),
        ".exchange()": _counts(_two_workers, before=lambda s: s.exchange(key)),
        ".exchange().map()": _counts(_two_workers, before=lambda s: s.exchange(key).map(tuple).filter(bool)),
        "concat of exchanged": _counts(_two_workers, before=lambda s: s.exchange(key).concat(
            at.to_stream([("b", 5)], s.scope).exchange(key))),
        "entered after .exchange()": _counts(_two_workers, before=lambda s: s.exchange(key), region=True),
    }[shape]
    totals = _totals(at.execute(build, workers=2, loop="asyncio"))
    assert totals == ({"a": 3, "b": 1} if shape != "concat of exchanged" else {"a": 3, "b": 11})


def test_keyed_state_on_one_worker_needs_no_exchange():
    assert at.execute(_counts(lambda _i: [("a", 1), ("b", 1), ("a", 1)]), loop="asyncio") == [[("a", 2), ("b", 1)]]


def test_a_source_keeps_keyed_state_on_two_workers():
    def build(worker):
        def make(scope):
            async def numbers(output, cap):
                position = output.keyed_state("position", dict)
                position[worker.index] = 1
                output.session(cap).give(worker.index)
                cap.drop()

            return at.source(scope, "Numbers", numbers).capture()

        captured = worker.dataflow(make)
        return captured

    results = at.execute(build, workers=2, loop="asyncio")
    assert [c.extract() for c in results] == [[(0, [0])], [(0, [1])]]


# -- exchange keys that are not functions ------------------------------------------------------------------------


def _built(make, workers=1):
    def build(worker):
        worker.dataflow(make, name="keys")

    return at.execute(build, workers=workers, loop="asyncio")


def test_exchange_with_a_key_that_is_not_a_function_is_refused_on_one_worker():
    with pytest.raises(TypeError) as info:
        _built(lambda s: at.to_stream([(1, 2)], s).exchange(0))
    message = str(info.value)
    assert "operator 'Exchange'" in message and "dataflow 'keys'" in message
    assert "exchange(lambda r: r[0])" in message and "0" in message


def test_an_exchange_key_of_a_generic_operator_that_is_not_a_function_is_refused():
    async def logic(input, output, cap):
        cap.drop()
        async for _ in input.activations():
            input.discard()

    with pytest.raises(TypeError, match=r"operator 'Mine'.*dataflow 'keys'.*exchange=lambda r: r\[0\]"):
        _built(lambda s: at.to_stream([1], s).unary(logic, exchange="key", name="Mine"))


@pytest.mark.parametrize("build", [
    lambda s: at.to_stream([1], s).partition(2, 0),
    lambda s: at.to_stream([(1, 2)], s).window(at.Tumbling(10), at.Agg.count(), key=0),
    lambda s: at.to_stream([(1, 2)], s).distinct(by=1),
    lambda s: at.to_stream([(1, 2)], s).map(0),
    lambda s: at.to_stream([(1, 2)], s).stateful_map("f"),
])
def test_key_and_record_functions_that_are_not_functions_are_refused(build):
    with pytest.raises(TypeError, match=r"operator '\w+'.*dataflow 'keys'.*(function|callable)"):
        _built(build)


# -- async functions given to synchronous operators ----------------------------------------------------------------


async def _double(x):
    return 2 * x


async def _look(x):
    pass


class _AsyncCallable:
    async def __call__(self, x):
        return x


class _Callable:
    def __call__(self, x):
        return x


@pytest.mark.parametrize("method, fn", [
    ("map", _double),
    ("map", functools.partial(_double)),
    ("map", _AsyncCallable()),
    ("flat_map", _double),
    ("filter", _double),
    ("inspect", _look),
    ("exchange", _double),
    ("branch", _double),
])
def test_an_async_function_given_to_a_synchronous_operator_is_refused(method, fn):
    with pytest.raises(TypeError) as info:
        _built(lambda s: getattr(at.to_stream([1, 2], s), method)(fn))
    message = str(info.value)
    assert "async" in message and "dataflow 'keys'" in message
    assert "to_async" in message                                   # where to go instead


def test_an_async_function_given_to_inspect_points_to_to_async():
    with pytest.raises(TypeError, match=r"operator 'Inspect'.*_look is an async function.*to_async\(stream, _look, "
                                        r"per=\"record\"\)"):
        _built(lambda s: at.to_stream([1, 2], s).inspect(_look))


def test_synchronous_callables_and_async_ones_where_they_belong_are_fine():
    seen: list = []

    async def deliver(x):
        seen.append(x)

    _built(lambda s: to_async(at.to_stream([1, 2], s).map(_Callable()).map(functools.partial(int)), deliver,
                              per="record"))
    assert sorted(seen) == [1, 2]


# -- from_aiter(late="error"): one located failure -------------------------------------------------------------------


def test_a_late_record_with_late_error_fails_once_with_no_spurious_traceback(tmp_path):
    program = tmp_path / "late.py"
    program.write_text(textwrap.dedent("""
        import asyncio
        import aiotimely as at
        from aiotimely.connectors import EventTime, from_aiter

        async def events():
            for t in [5, 10, 3, 12]:
                await asyncio.sleep(0.01)
                yield t

        def build(worker):
            worker.dataflow(lambda s: from_aiter(s, events(), time=EventTime(lambda r: r, late="error")),
                            name="late")

        at.execute(build)
    """))
    done = subprocess.run([sys.executable, str(program)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    err = done.stderr
    assert "already running" not in err and "error occurred during closing" not in err, err
    assert err.count("DataflowError: ") == 1, err                  # one failure, told once
    last = err.strip().splitlines()[-1]
    assert "operator 'AsyncIterator'" in last and "dataflow 'late'" in last and "worker 0" in last
    assert "record 3 at event time 3" in last and "larger lateness=" in last  # what, and how to fix it


# -- a record that cannot cross processes: blamed on the stage that made it ------------------------------------------


class Opaque:
    """A record type msgpack cannot encode (and not registered)."""


def make_opaque(x):
    return Opaque()


def opaque_program(worker):
    """Run by the test below in two processes: ``map`` makes records the exchange after it cannot send."""
    worker.dataflow(lambda s: at.to_stream(range(4) if worker.index == 0 else [], s)
                    .map(make_opaque).exchange(lambda r: 1), name="opaque")


def opaque_filtered_program(worker):
    """As :func:`opaque_program`, with a filter between: it passes the records ``map`` made on."""
    worker.dataflow(lambda s: at.to_stream(range(4) if worker.index == 0 else [], s)
                    .map(make_opaque).filter(bool).inspect(id).exchange(lambda r: 1), name="opaque")


@pytest.mark.parametrize("program, where", [("opaque_program", "operator 'Map' (#2)"),
                                            ("opaque_filtered_program", "operator 'Map' (#2, stage 1 of")])
def test_a_record_that_cannot_cross_processes_is_blamed_on_the_stage_that_made_it(program, where):
    done = subprocess.run([sys.executable, "-m", "aiotimely", "run", f"{HERE}:{program}", "-w", "1", "-n", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    err = done.stderr
    assert f"{where}" in err and "dataflow 'opaque' on worker 0 failed at time 0: CodecError" in err, err
    assert "operator 'ToStream'" not in err and "operator 'Filter'" not in err, err
    assert "Opaque between processes" in err and "register_type" in err     # and how to fix it
