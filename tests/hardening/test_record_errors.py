"""The per-record error policy (``errors="raise" | "skip" | "dead_letter"``, per operator and per dataflow): exactly
the records that fail are skipped or sent to dead letters, at their times, against a plain model on random inputs,
on 1 to 3 workers and on 2 processes; counted in statistics and metrics; logged at once, then at most every few
seconds; kept through a crash and a resume."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiotimely as at
from aiotimely.dataflow import failures
from aiotimely.testing import run_dataflow
from aiotimely.testing.processes import run_processes

from ..recovery.common import final_sums, numbers_source, run, running_sums

PER_TIME = 8
Record = tuple[Any, int]


def numbers(scope: at.Scope, records: list[Record]) -> at.Stream:
    """``records`` spread over the workers, ``PER_TIME`` at a time (record ``i`` at time ``i // PER_TIME``)."""
    worker, peers = scope.worker.index, scope.peers
    mine: dict[int, list[Record]] = {}
    for i, record in enumerate(records):
        if i % peers == worker:
            mine.setdefault(i // PER_TIME, []).append(record)

    async def logic(output: Any, cap: Any) -> None:
        for time, batch in mine.items():
            cap.downgrade(time)
            output.session(cap).give_many(batch)
        cap.drop()

    return at.source(scope, "Numbers", logic)


def key(record: Record) -> int:
    return record[0] * 1          # a TypeError for a record without a key (None)


def inverse(record: Record) -> Record:
    return record[0], 100 // record[1]   # a ZeroDivisionError for 0


def expand(record: Record) -> Any:
    yield record
    if record[1] == 4:            # (100 // 25): the record's first result is given before it fails
        raise ValueError(f"cannot expand {record!r}")
    yield record


def pipeline(stream: at.Stream, errors: Any = None) -> at.Stream:
    return stream.exchange(key, errors=errors).map(inverse, errors=errors).flat_map(expand, errors=errors)


def model(records: list[Record]) -> tuple[Counter, Counter]:
    """What the pipeline gives, as ``(time, record)`` counts, and its dead letters, as ``(time, (record,
    operator, error type))`` counts."""
    out: Counter = Counter()
    dead: Counter = Counter()
    for i, record in enumerate(records):
        time = i // PER_TIME
        if record[0] is None:
            dead[time, (record, "Exchange", "TypeError")] += 1
        elif record[1] == 0:
            dead[time, (record, "Map", "ZeroDivisionError")] += 1
        elif 100 // record[1] == 4:
            dead[time, ((record[0], 4), "FlatMap", "ValueError")] += 1
        else:
            out[time, inverse(record)] += 2
    return out, dead


def seen(outputs: Any) -> Counter:
    return Counter(outputs.pairs())


def seen_dead(outputs: Any) -> Counter:
    found: Counter = Counter()
    for time, letter in outputs.pairs():
        record, operator, error, letter_time = letter
        assert isinstance(letter, at.DeadLetter) and letter_time == time
        found[time, (tuple(record), operator, error.split(":")[0])] += 1
    return found


records_strategy = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.sampled_from([0, 1, 5, 25, 30])),
                            max_size=40)


@settings(max_examples=15, deadline=None)
@given(records=records_strategy, workers=st.integers(1, 3))
def test_dead_letters_are_exactly_the_records_that_fail_at_their_times(records, workers):
    def build(scope):
        return {"out": pipeline(numbers(scope, records), errors="dead_letter"), "dead": scope.dead_letters()}

    result = run_dataflow(build, workers=workers)
    out, dead = model(records)
    assert seen(result["out"]) == out
    assert seen_dead(result["dead"]) == dead


@settings(max_examples=10, deadline=None)
@given(records=records_strategy, workers=st.integers(1, 3))
def test_the_dataflow_policy_skips_exactly_the_records_that_fail(records, workers):
    result = run_dataflow(lambda scope: pipeline(numbers(scope, records)), workers=workers, errors="skip")
    assert seen(result) == model(records)[0]


def test_an_operator_policy_overrides_the_dataflow_policy_and_raise_stays_the_default():
    records = [(1, 5), (2, 0), (3, 1)]

    def build(scope):
        return {"out": numbers(scope, records).map(inverse, errors="raise"), "dead": scope.dead_letters()}

    with pytest.raises(at.GraphError, match="has no operator that sends records to dead letters"):
        run_dataflow(build, errors="dead_letter")

    def build_both(scope):
        return {"out": numbers(scope, records).map(inverse, errors="skip").map(str), "dead": scope.dead_letters()}

    result = run_dataflow(build_both, errors="dead_letter")
    assert sorted(result["out"].records()) == ["(1, 20)", "(3, 100)"] and result["dead"].records() == []
    with pytest.raises(at.DataflowError, match=r"operator 'Map' \(#2\).* failed at time 0: ZeroDivisionError"):
        run_dataflow(lambda scope: numbers(scope, records).map(inverse))
    result = run_dataflow(lambda scope: numbers(scope, records).map(inverse, errors="skip").map(str))
    assert sorted(result.records()) == ["(1, 20)", "(3, 100)"]


def test_dead_letters_nobody_takes_are_refused_when_the_dataflow_is_built():
    with pytest.raises(at.GraphError, match=r"operator 'Parse' .* sends the records that fail to dead letters, "
                                            r"but nothing takes them: route scope.dead_letters\(\) to a sink"):
        run_dataflow(lambda scope: at.to_stream(["1", "x"], scope).map(int, errors="dead_letter", name="Parse"))

    def taken_too_early(scope):
        dead = scope.dead_letters()
        return at.to_stream(["1"], scope).map(int, name="Parse").concat(dead)

    with pytest.raises(at.GraphError, match="has no operator that sends records to dead letters"):
        run_dataflow(taken_too_early, errors="dead_letter")

    def built_after_taking(scope):
        first = at.to_stream(["1"], scope).map(int, errors="dead_letter")
        dead = scope.dead_letters()
        return first.map(str, errors="dead_letter", name="Again").concat(dead.map(str))

    with pytest.raises(at.GraphError, match="'Again'.* dead letters were taken already: call scope.dead_letters"):
        run_dataflow(built_after_taking)


def test_a_policy_that_is_not_one_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"operator 'Map' in dataflow .*errors='ignore' is not an error policy; "
                                         r"give 'raise'.*'skip'.*'dead_letter'"):
        run_dataflow(lambda scope: at.to_stream([1], scope).map(str, errors="ignore"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dataflow 'flow': errors='skipping' is not an error policy"):
        at.execute(lambda worker: worker.dataflow(lambda s: None, name="flow", errors="skipping"))  # type: ignore


def test_skipped_records_are_counted_in_statistics_and_logged_at_once_then_at_most_every_interval(caplog):
    caplog.set_level(logging.WARNING, logger="aiotimely")

    async def main() -> Any:
        async with at.Worker() as worker:
            inp: at.InputHandle[str] = at.InputHandle()
            probe = worker.dataflow(lambda scope: inp.to_stream(scope).map(int, errors="skip", name="Parse")
                                    .filter(lambda n: n > 0).probe(), name="parse")
            inp.send_batch(["1", "x", "2", "y", "z"])
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            inp.close()
            await worker.step_until_done()
            return worker.statistics()

    stats = asyncio.run(main())
    parse = stats.operator("Parse")
    assert (parse.skipped, parse.dead_letters, parse.records_out) == (3, 0, 2)
    lines = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(lines) == 1                       # the first failure, with its traceback; the others are counted
    message = lines[0].getMessage()
    assert ("operator 'Parse' (#2, stage 1 of a fused chain) in dataflow 'parse' on worker 0: record 'x' at time 0 "
            "failed (ValueError: invalid literal for int() with base 10: 'x') and is skipped") in message
    assert lines[0].exc_info is not None and lines[0].exc_info[0] is ValueError


def test_a_count_is_logged_once_the_interval_passed(caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="aiotimely")
    monkeypatch.setattr(failures, "LOG_EVERY", 0.0)
    result = run_dataflow(lambda scope: at.to_stream(["x", "1", "y", "z"], scope).map(int, errors="skip"))
    assert result.records() == [1]
    messages = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(messages) == 3
    assert "1 more records failed and were skipped" in messages[1]
    assert "(2 in all; the last: record 'y' at time 0: ValueError" in messages[1]
    assert "(3 in all; the last: record 'z'" in messages[2]


def test_metrics_count_skipped_records_and_dead_letters():
    pytest.importorskip("prometheus_client")
    from aiotimely.observe.metrics import serve_metrics

    from ..observe.test_metrics import scrape, value

    async def main() -> list[Any]:
        async with at.Worker() as worker:
            inp: at.InputHandle[str] = at.InputHandle()

            def build(scope):
                good = inp.to_stream(scope).map(int, errors="skip", name="Parse")
                good.map(lambda n: 1 // n, errors="dead_letter", name="Invert").probe()
                return scope.dead_letters().probe()

            probe = worker.dataflow(build, name="counted")
            inp.send_batch(["1", "x", "0", "0", "y", "z"])
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            served = await serve_metrics([worker._scheduler])
            try:
                return await asyncio.to_thread(scrape, served.url)
            finally:
                await served.close()
                inp.close()

    samples = asyncio.run(main())
    assert value(samples, "aiotimely_operator_records_skipped_total", operator="Parse") == 3
    assert value(samples, "aiotimely_operator_dead_letters_total", operator="Parse") == 2  # the fused chain's stages
    assert value(samples, "aiotimely_operator_records_out_total", operator="Parse") == 3   # 1 result, 2 letters


# -- two processes ---------------------------------------------------------------------------------------------


def two_processes(scope: at.Scope) -> dict[str, at.Stream]:
    """The pipeline on records given as JSON in the processes' arguments (run by run_processes)."""
    records = [tuple(r) for r in json.loads(sys.argv[1])]
    return {"out": pipeline(numbers(scope, records), errors="dead_letter"), "dead": scope.dead_letters()}


def test_dead_letters_on_two_processes_match_the_model():
    rng = random.Random(31)
    records = [(rng.choice([None, 0, 1, 2, 3, 4]), rng.choice([0, 1, 5, 25, 30])) for _ in range(120)]
    result = run_processes(two_processes, processes=2, workers=2, args=[json.dumps(records)])
    out, dead = model(records)
    assert seen(result["out"]) == out
    assert seen_dead(result["dead"]) == dead
    assert {operator for _, (_, operator, _) in dead} == {"Exchange", "Map", "FlatMap"}


# -- a crash and a resume ----------------------------------------------------------------------------------------


def bad(x: int) -> int:
    if x % 13 == 5:
        raise ValueError(f"bad record {x}")
    return x


DEAD = 100


def build_factory(crash_at: int | None, outputs: list):
    """Numbers (their position kept), a map that fails on some of them with dead letters, and running sums
    per key of what passes and of the dead letters (key ``DEAD``), kept by key through snapshots."""

    def crash(x: int) -> int:
        if x == crash_at:
            raise RuntimeError(f"crashed at {x}")
        return x

    def build(worker: at.Worker) -> None:
        def make(scope):
            numbers = at.source(scope, "Numbers", numbers_source(worker, jump=4, pace=0.0 if crash_at is None
                                                                 else 0.02))
            good = numbers.map(crash).map(bad, errors="dead_letter").map(lambda x: (x % 7, x))
            dead = scope.dead_letters().map(lambda letter: (DEAD, letter.record))
            running_sums(good.concat(dead)).inspect(outputs.append)

        worker.dataflow(make, name="sums")

    return build


def test_dead_letters_survive_a_crash_and_a_resume(tmp_path):
    truth: list = []
    at.execute(build_factory(None, truth), loop="asyncio")
    expected = final_sums(truth)
    dead_total = max(total for (_, key), total in expected.items() if key == DEAD)   # (the sums only grow)
    assert dead_total == sum(x for x in range(600) if x % 13 == 5)      # the model: every bad record, once
    good = {key: max(total for (_, k), total in expected.items() if k == key) for key in range(7)}
    assert good == {key: sum(x for x in range(600) if x % 7 == key and x % 13 != 5) for key in range(7)}

    seen_sums: list = []
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        run(build_factory(400, seen_sums), tmp_path)
    crashed = len(seen_sums)
    run(build_factory(None, seen_sums), tmp_path)
    assert min(time for time, _, _ in seen_sums[crashed:]) > 0    # resumed from a snapshot, not from the start
    assert final_sums(seen_sums) == expected
