"""The pytest plugin, as a project that only installs aiotimely uses it: pytest loads it from the ``pytest11``
entry point (in a subprocess, as a user's pytest would), its fixtures run each test on 1 and 2 workers, and a wrong
``assert outputs == expected`` shows the outputs time by time."""

from __future__ import annotations

import textwrap

pytest_plugins = ["pytester"]

FLOWS = '''
import aiotimely as at
from aiotimely.testing import schedule, script_source

EVENTS = schedule([(t % 4, ("k", t)) for t in range(12)], shuffle=5)


def sums(scope):
    """Per time, the sum of the values of key "k"."""
    return script_source(scope, EVENTS).reduce(lambda a, b: a + b)
'''

TESTS = '''
import pytest
from hypothesis import given, settings

import aiotimely as at
from aiotimely.testing import Script, Advance, run_dataflow, script_source
from aiotimely.testing.strategies import event_streams

import flows

EXPECTED = {t: [("k", sum(v for v in range(12) if v % 4 == t))] for t in range(4)}


def test_on_each_worker_count(aiotimely_run, workers):
    out = aiotimely_run(flows.sums)
    assert out == EXPECTED and sorted(out.workers) == list(range(workers))


@settings(max_examples=5, deadline=None)
@given(event_streams())
def test_with_hypothesis(aiotimely_run, script):
    assert aiotimely_run(lambda scope: script_source(scope, script)) == script.by_time()


def test_on_processes(aiotimely_run):
    assert aiotimely_run.processes("flows:sums", processes=2) == EXPECTED


@pytest.mark.asyncio
async def test_under_pytest_asyncio(aiotimely_run):
    assert await aiotimely_run.run_async(flows.sums) == EXPECTED


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_under_anyio(aiotimely_run):
    assert await aiotimely_run.run_async(flows.sums) == EXPECTED


@pytest.mark.aiotimely_workers(3)
def test_worker_counts_of_its_own(aiotimely_run):
    assert aiotimely_run.workers == 3 and aiotimely_run(flows.sums) == EXPECTED


@pytest.mark.parametrize("workers", [4], scope="module")
def test_parametrized_by_hand(aiotimely_run):
    assert aiotimely_run.workers == 4


def test_deliberately_wrong():
    script = Script([(1, "late"), (0, "a"), Advance(1), (2, "b")])
    assert run_dataflow(lambda scope: script_source(scope, script)) == {0: ["a"], 1: ["late", "extra"], 2: ["c"]}
'''


def test_a_test_project_uses_the_fixtures_strategies_and_readable_failures(pytester):
    pytester.makepyfile(flows=FLOWS, test_project=TESTS)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-vv", timeout=120)   # -vv: untruncated
    # each test that takes the fixtures ran on 1 and on 2 workers, unless it asked for its own counts
    result.assert_outcomes(passed=12, failed=1)
    result.stdout.fnmatch_lines(["*test_on_each_worker_count?1-worker? PASSED*",
                                 "*test_on_each_worker_count?2-workers? PASSED*",
                                 "*test_worker_counts_of_its_own?3-workers? PASSED*"])
    text = result.stdout.str()
    assert textwrap.dedent("""\
        E         outputs differ at 2 times:
        E           time 1:
        E             got:      ['late']
        E             expected: ['extra', 'late']
        E             missing:  ['extra']
        E           time 2:
        E             got:      ['b']
        E             expected: ['c']
        E             missing:  ['c']
        E             extra:    ['b']
        E         all outputs, by time:
        E           0: ['a']
        E           1: ['late']
        E           2: ['b']
        E           frontier: [] (complete)""") in text, text


def test_the_worker_counts_come_from_the_ini_file(pytester):
    pytester.makeini("[pytest]\naiotimely_workers = 1 3\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_counts="""
        def test_counts(workers):
            assert workers in (1, 3)
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-v")  # the plugin: loaded here already
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_counts?1-worker? PASSED*", "*test_counts?3-workers? PASSED*"])
