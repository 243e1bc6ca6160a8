"""run_processes: a dataflow on real processes over loopback TCP gives the outputs one process gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiotimely.testing import ProcessesFailed, run_dataflow, run_processes

from . import flows

HERE = Path(__file__).resolve().parent


def test_processes_give_what_one_worker_gives_by_time():
    expected = run_dataflow(flows.word_counts)
    assert expected == {t: sorted((f"w{w}", sum(1 for i in range(30) if i % 7 == t and i % 3 == w))
                                  for w in range(3) if any(i % 7 == t and i % 3 == w for i in range(30)))
                        for t in range(7)}
    got = run_processes("tests.testing.flows:word_counts", processes=2, workers=2)
    assert got == expected and got.complete()
    assert sorted(got.workers) == [0, 1, 2, 3]                  # every worker of every process reported


def test_named_outputs_from_a_file_path_and_records_as_the_dataflow_left_them():
    got = run_processes(f"{HERE / 'flows.py'}:text_and_counts", processes=2)
    assert got["words"] == {0: ["a", "a", "b", "b", "c", "c", "c", "d"]}
    assert got["counts"] == {0: [("a", 2), ("b", 2), ("c", 3), ("d", 1)]}
    lists = run_processes(flows.lists_stay_lists, processes=2)  # a top-level function names itself
    assert lists == {0: [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]}
    assert {type(r) for r in lists[0]} == {list}                 # the records themselves, not tuples from msgpack


def test_a_failing_process_fails_the_run_naming_the_error_and_the_process():
    with pytest.raises(ProcessesFailed) as info:
        run_processes(flows.fails, processes=2)
    message = str(info.value)
    assert "a process of the run of tests.testing.flows:fails on 2 processes failed" in message
    assert "process 1: exit status 1: aiotimely.errors.DataflowError: operator 'Map'" in message
    assert "ZeroDivisionError" in message


def test_a_run_that_does_not_end_is_stopped_and_fails():
    with pytest.raises(ProcessesFailed) as info:
        run_processes(flows.never_ends, processes=2, timeout=2)
    message = str(info.value)
    assert "the run of tests.testing.flows:never_ends on 2 processes did not end within 2 s" in message
    assert "process 0: killed" in message and "process 1: killed" in message


def test_targets_that_processes_cannot_import_are_refused_up_front():
    with pytest.raises(ValueError, match="top level of a module"):
        run_processes(lambda scope: scope, processes=2)
    with pytest.raises(ValueError, match="is not 'module:function'"):
        run_processes("flows", processes=2)
