"""aiotimely processes as the tasks of a Spark barrier stage (``run_on_spark``), with real PySpark in local mode.

The tests on Spark are slow: they share one ``local[4]`` session (~20 s to start); the example starts its own.
Every run has a ``timeout``, so a hang fails the test instead of hanging the test run.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
from pyspark import cloudpickle  # noqa: E402

import aiotimely as at  # noqa: E402
from aiotimely.connectors import spark_cluster  # noqa: E402
from aiotimely.connectors.spark import local_session  # noqa: E402
from aiotimely.connectors.spark_cluster import run_on_spark  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120  # seconds for any one run_on_spark: a hang fails the test

# Spark's Python workers get this module's functions by value: they need not import the tests
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    # as tests/connectors/test_spark.py does: whichever module starts Spark's JVM first fixes its workers' path
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    session = local_session("local[4]", workdir=str(tmp_path_factory.mktemp("spark")), app="aiotimely-cluster-tests")
    yield session
    session.stop()


# -- the dataflows the Spark tasks run -----------------------------------------------------------

rng = random.Random(5)
VOCABULARY = [f"w{i}" for i in range(40)]
LINES = [" ".join(rng.choice(VOCABULARY) for _ in range(12)) for _ in range(60)]
ROUNDS = 3


def count_words(counts: dict[str, int], pairs: list[tuple[str, int]]) -> dict[str, int]:
    counts = dict(counts)
    for word, n in pairs:
        counts[word] = counts.get(word, 0) + n
    return counts


async def wordcount(worker):
    """Per round, each worker's share of the lines in; words exchanged by word; each worker counts what it
    receives (``accumulate`` does not route by itself, so a wrong exchange shows as split counts)."""
    inp = at.InputHandle()
    out = []
    probe = worker.dataflow(
        lambda scope: inp.to_stream(scope)
        .flat_map(lambda line: [(word, 1) for word in line.split()])
        .exchange(lambda pair: pair[0])
        .accumulate({}, count_words)
        .inspect_time(lambda t, counts: out.append((t, sorted(counts.items()))))
        .probe()
    )
    for i, line in enumerate(LINES):
        if i % worker.peers == worker.index:
            inp.send(line)
        if (i + 1) % (len(LINES) // ROUNDS) == 0:
            inp.advance_to(inp.time + 1)
            await worker.step_while(lambda: probe.less_than(inp.time))
    return worker.index, sorted(out)


def divide_by_zero_at_7(worker):
    inp = at.InputHandle()
    worker.dataflow(lambda scope: inp.to_stream(scope).exchange(lambda x: x).map(lambda x: 1 // (x - 7)))
    if worker.index == 0:
        inp.send_batch(list(range(10)))
    inp.close()


def _exit_at_7(x):
    if x == 7:
        os._exit(3)
    return x


def _hang_at_7(x):
    if x == 7:
        time.sleep(600)  # blocks the event loop: no heartbeats from this process
    return x


def ticks_through(fn):
    def build(worker):
        inp = at.InputHandle()
        worker.dataflow(lambda scope: inp.to_stream(scope).exchange(lambda x: x).map(fn))
        if worker.index == 0:
            inp.send_batch(list(range(10)))
        inp.close()

    return build


class Refused(Exception):
    """An exception class of the user's (this module's, which Spark ships by value)."""


def refuse_on_process_2(worker):
    if worker.index == 2:
        raise Refused(f"worker {worker.index} will not build")
    worker.dataflow(lambda scope: at.to_stream([1, 2, 3], scope).exchange(lambda x: x))


def block_everywhere(worker):
    time.sleep(600)


# -- tests -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_three_processes_on_spark_give_the_one_process_result(spark):
    processes, workers = 3, 2
    results = run_on_spark(spark, wordcount, processes=processes, workers=workers, timeout=TIMEOUT)

    # one list per process, in process order, of its workers' results, in worker order
    assert [[index for index, _ in process] for process in results] == [[0, 1], [2, 3], [4, 5]]
    # exactly what one process with as many workers computes: the same words on the same workers
    alone = at.execute(wordcount, workers=processes * workers)
    assert [result for process in results for result in process] == alone
    # and right: each word counted once per round, on one worker, by every line of the rounds so far
    per_round = len(LINES) // ROUNDS
    for t in range(ROUNDS):
        merged: Counter[str] = Counter()
        for _, out in alone:
            for time_, counts in out:
                if time_ == t:
                    assert not merged.keys() & dict(counts).keys()  # a word on two workers: a wrong exchange
                    merged.update(dict(counts))
        assert merged == Counter(" ".join(LINES[t * per_round:(t + 1) * per_round]).split())


@pytest.mark.slow
def test_a_failing_operator_fails_the_stage_with_its_error(spark):
    started = time.monotonic()
    with pytest.raises(at.DataflowError,
                       match=r"^operator 'Map' .* on worker 1 failed at time 0: ZeroDivisionError") as caught:
        run_on_spark(spark, divide_by_zero_at_7, processes=3, timeout=TIMEOUT)
    assert caught.value.operator == "Map" and caught.value.worker == 1 and caught.value.time == 0
    assert "Spark barrier task" in " ".join(caught.value.__notes__)
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_an_error_of_the_users_own_class_reaches_the_driver_as_itself(spark):
    with pytest.raises(Refused, match=r"^worker 2 will not build\n"):
        run_on_spark(spark, refuse_on_process_2, processes=3, timeout=TIMEOUT)


@pytest.mark.slow
def test_a_process_that_hangs_fails_the_others_after_the_peer_timeout(spark):
    started = time.monotonic()
    with pytest.raises(at.ClusterError, match=r"process 1 \(.*\) has sent nothing for 3 s"):
        run_on_spark(spark, ticks_through(_hang_at_7), processes=3, peer_timeout=3, timeout=TIMEOUT)
    assert time.monotonic() - started < 60          # not the hung operator's 600 s: Spark kills its task


@pytest.mark.slow
def test_a_process_that_dies_fails_the_stage(spark):
    started = time.monotonic()
    with pytest.raises(Exception, match=r"Python worker exited unexpectedly|probably died"):
        run_on_spark(spark, ticks_through(_exit_at_7), processes=3, timeout=TIMEOUT)
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_computation_over_its_timeout_is_cancelled(spark):
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not end within 5 s"):
        run_on_spark(spark, block_everywhere, processes=2, timeout=5)
    assert time.monotonic() - started < 30
    # the cancelled tasks free their slots: the next computation runs (listening where host= says, this time)
    again = run_on_spark(spark, wordcount, processes=2, host=lambda: "127.0.0.1", timeout=TIMEOUT)
    assert [[index for index, _ in process] for process in again] == [[0], [1]]


@pytest.mark.slow
def test_more_processes_than_task_slots_is_refused_at_once(spark):
    with pytest.raises(ValueError, match=r"5 processes need 5 task slots at once, but .* has 4"):
        run_on_spark(spark, wordcount, processes=5)


def test_local_masters_task_slots():
    assert spark_cluster._local_slots("local", 1) == 1
    assert spark_cluster._local_slots("local[4]", 1) == 4
    assert spark_cluster._local_slots("local[4,3]", 2) == 2
    assert spark_cluster._local_slots("local[*]", 1) == os.cpu_count()
    assert spark_cluster._local_slots("spark://host:7077", 1) is None


def test_the_held_port_is_nobody_elses_but_the_cluster_can_listen_on_it():
    held = spark_cluster._hold_port("127.0.0.1")
    port = held.getsockname()[1]
    try:
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))               # another program picking a port cannot have it

        async def listen_and_connect() -> bytes:
            async def greet(reader, writer):
                writer.write(b"hello")
                await writer.drain()
                writer.close()

            server = await asyncio.start_server(greet, "127.0.0.1", port, reuse_address=True)  # as Cluster does
            async with server:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                data = await reader.read()
                writer.close()
                return data

        assert asyncio.run(listen_and_connect()) == b"hello"
    finally:
        held.close()


class _Planted:
    """Unpickling one runs code on the driver: what a forged blob in an error's text would do."""
    ran = False

    def __reduce__(self):
        return (_Planted._run, ())

    @staticmethod
    def _run():
        _Planted.ran = True
        return ValueError("forged")


def test_only_an_error_signed_with_the_runs_key_is_unpickled_on_the_driver():
    import base64
    import pickle

    key, other = os.urandom(32), os.urandom(32)
    forged = base64.b64encode(pickle.dumps(_Planted())).decode()
    real = spark_cluster._carry(at.DataflowError("operator 'Map' failed"), 1, 3, key)
    # a user's error whose text (a record, say) looks like a carried error, before the real one in Spark's text
    text = (f"ValueError: bad record 'aiotimely-error:{'0' * 64}:{forged}'\n"
            f"{spark_cluster._carry(ValueError('x'), 2, 3, other)}\n{real}")
    recovered = spark_cluster._recover(RuntimeError(text), key)
    assert isinstance(recovered, at.DataflowError) and str(recovered) == "operator 'Map' failed"
    assert not _Planted.ran
    assert spark_cluster._recover(RuntimeError(text), os.urandom(32)) is None   # nothing signed with this key
    assert not _Planted.ran


def test_without_pyspark_run_on_spark_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(ImportError, match=r"pip install 'aiotimely\[spark\]'"):
        run_on_spark(object(), wordcount)


@pytest.mark.slow
def test_the_example_prints_every_count_and_where_it_was_counted():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "spark_cluster.py")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    counts = dict(line.split("\t") for line in lines if "\t" in line)
    assert counts == {"the": "4", "dog": "3", "fox": "3", "a": "2", "brown": "2", "jumps": "2", "lazy": "2",
                      "over": "2", "quick": "2", "and": "1", "barks": "1", "runs": "1"}
    placed = [line for line in lines if line.startswith("process ")]
    assert [line.split(":")[0] for line in placed] == [f"process {w // 2}, worker {w}" for w in range(6)]
    owned = [word for line in placed for word in line.split(":")[1].split() if word != "-"]
    assert sorted(owned) == sorted(counts)                # each word counted on exactly one worker
