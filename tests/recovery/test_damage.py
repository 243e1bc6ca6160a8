"""Recovery directories that runs left half-written, or that lost or changed a file, in real runs: a rescaled run
killed before its first snapshot drained leaves a directory that resumes; a lost or emptied worker file, and a
changed stored value, are refused instead of starting afresh or resuming a wrong state; and processes of a run
killed with SIGKILL at random moments (during the start-up of a new generation too) never leave a directory
that is refused, and end with a crash-free run's sums.

Run as a program, this module is the computation the process tests kill::

    python -m tests.recovery.test_damage OUT STATE [aiotimely options]
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import aiotimely as at
from aiotimely.connectors import to_async
from aiotimely.recovery import Recovery

from .common import RECORDS, final_sums, numbers_source, partitions_source, run, running_sums
from .test_resume import build_factory, windows_factory

ROOT = Path(__file__).resolve().parent.parent.parent


def deliveries_factory(delivered: list | None, *, crash_at: int | None = None, fail_first: bool = False,
                       block: bool = False, out: str | None = None):
    """Numbers from a source keeping its position (on worker 0; the other workers' part ends at once), delivered by
    a slow async call into ``delivered`` (or appended to the file ``out`` of the worker). A delivery of
    ``crash_at`` fails, or the first delivery does with ``fail_first``, or waits forever with ``block``: nothing
    such a run sends is delivered, so no snapshot it writes drains."""

    def build(worker: at.Worker) -> None:
        async def deliver(time, records):
            await asyncio.sleep(0.005)
            if block:
                await asyncio.Event().wait()
            if fail_first or (crash_at is not None and crash_at in records):
                raise RuntimeError("crashed delivering")
            if delivered is not None:
                delivered.extend(records)
            else:
                with open(f"{out}.{worker.index}", "a") as f:
                    f.write("".join(f"{x}\n" for x in records))

        def make(scope):
            to_async(at.source(scope, "Numbers", numbers_source(worker)), deliver, max_in_flight=1)

        worker.dataflow(make, name="deliveries")

    return build


def test_a_rescaled_run_killed_before_its_first_snapshot_drained_resumes(tmp_path):
    first: list = []
    with pytest.raises(at.DataflowError, match="crashed delivering"):
        run(deliveries_factory(first, crash_at=300), tmp_path, workers=2)            # g1-w2: some snapshots
    assert sorted(first) == list(range(300))
    for _ in range(2):                                   # g2-w3: written on every worker, drained nowhere
        with pytest.raises(at.DataflowError, match="crashed delivering"):
            run(deliveries_factory([], fail_first=True), tmp_path, workers=3)
    again: list = []
    run(deliveries_factory(again), tmp_path, workers=3)   # the latest generation's workers, from g1's snapshot
    assert 0 < min(again) <= 300                          # resumed from g1, not afresh
    assert set(first) | set(again) == set(range(RECORDS))
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["g1-w2", "g1-w2.committed", "g2-w3",
                                                                      "g2-w3.committed"]


def crashed_run(tmp_path, workers: int = 2) -> None:
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        run(build_factory(400, [], pace=0.02), tmp_path, workers=workers)


@pytest.mark.parametrize("damage", ["missing", "emptied"])
def test_a_lost_worker_file_is_refused_not_started_afresh(tmp_path, damage):
    crashed_run(tmp_path)
    lost = tmp_path / "state" / "g1-w2" / "worker-1.sqlite3"
    if damage == "missing":
        lost.unlink()
    else:
        lost.write_bytes(b"")
    with pytest.raises(at.RecoveryError) as refused:
        run(build_factory(None, []), tmp_path, workers=2)
    message = str(refused.value)
    assert f"generation {lost.parent} holds snapshots, and its file worker-1.sqlite3 is " in message
    assert f"restore the file, or move the recovery directory {tmp_path / 'state'} away to start afresh" in message


def test_a_lost_worker_file_of_the_newest_generation_is_refused_on_any_number_of_workers(tmp_path):
    crashed_run(tmp_path, workers=2)
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 500"):
        run(build_factory(500, seen, pace=0.02), tmp_path, workers=3)
    (tmp_path / "state" / "g2-w3" / "worker-0.sqlite3").unlink()
    for workers in (1, 2, 3):
        with pytest.raises(at.RecoveryError, match=r"g2-w3 holds snapshots, and its file worker-0.sqlite3 is missing"):
            run(build_factory(None, []), tmp_path, workers=workers)


def test_a_changed_stored_count_is_refused_not_resumed(tmp_path):
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        run(windows_factory(400, [], pace=0.002), tmp_path, every=8)
    restored = Recovery(tmp_path / "state", every=8).restore("windows", 0, 1)
    assert restored is not None
    [path] = (tmp_path / "state").glob("g*/worker-0.sqlite3")
    db = sqlite3.connect(path)
    try:
        with db:
            rowid, lo, hi, state = db.execute(
                "SELECT rowid, lo, hi, state FROM snapshots WHERE dataflow = 'windows' AND lo <= ? AND "
                "(hi IS NULL OR hi >= ?)", (restored.snapshot, restored.snapshot)).fetchone()
            pieces = pickle.loads(state)
            [key] = [key for key, piece in pieces.items() if "counts" in pickle.loads(piece)]
            values = pickle.loads(pieces[key])
            counts = values["counts"][1]
            window = min(counts)
            counts[window] += 1                                    # one window's count raised by one
            pieces[key] = pickle.dumps(values)
            db.execute("UPDATE snapshots SET state = ? WHERE rowid = ?", (pickle.dumps(pieces), rowid))
    finally:
        db.close()
    with pytest.raises(at.RecoveryError) as refused:                 # (unchecked, window 'window' counted 81)
        run(windows_factory(None, []), tmp_path, every=8)
    assert f"{path}: the record of snapshots {lo}..{'' if hi is None else hi} of dataflow 'windows' does not match " \
           "its checksum" in str(refused.value)


# -- real processes, killed ---------------------------------------------------------------------------------

PARTITIONS = 3
NUMBERS = 2000         # per partition
PER_TIME = 5           # numbers of a partition per unit of time
PACE = 0.02            # seconds a partition waits after each unit of time: a whole run takes about 8 s
EVERY = 2


def program(out: str | None, outputs: list | None = None):
    """Three partitions of numbers, each partition's position kept by its key (so it moves with the workers),
    summed per key (kept by key); each sum appended to ``out`` (a file per worker) or to ``outputs``."""

    def build(worker: at.Worker) -> None:
        numbers = partitions_source(worker, PARTITIONS, NUMBERS, PER_TIME, lambda p, m: (p, p * NUMBERS + m),
                                    None if outputs is not None else PACE)

        def write(record) -> None:
            if outputs is not None:
                outputs.append(record)
            else:
                with open(f"{out}.{worker.index}", "a") as f:
                    f.write(json.dumps(record) + "\n")

        def make(scope):
            numbers_ = at.source(scope, "Numbers", numbers)
            running_sums(numbers_.map(lambda px: (px[1] % 5, px[1]))).inspect(write)

        worker.dataflow(make, name="sums")

    return build


def written(out: Path) -> list:
    records = []
    for path in out.parent.glob(f"{out.name}.*"):
        for line in path.read_text().splitlines():
            try:
                records.append(tuple(json.loads(line)))
            except ValueError:
                pass          # the last line of a killed process, cut short
    return records


def start(tmp_path: Path, out: Path, processes: int, workers: int, *args: str,
          program: str = "sums") -> list[subprocess.Popen]:
    from aiotimely.launch import free_ports

    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"127.0.0.1:{port}\n" for port in free_ports(processes)))
    env = {**os.environ, "AIOTIMELY_SECRET": "damage-test", "AIOTIMELY_CONNECT_TIMEOUT": "5",
           "AIOTIMELY_PEER_TIMEOUT": "5"}
    return [subprocess.Popen([sys.executable, "-m", "tests.recovery.test_damage", program, str(out),
                              str(tmp_path / "state"), *args,
                              "-w", str(workers), "-n", str(processes), "-p", str(p), "--hostfile", str(hosts)],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for p in range(processes)]


def ended(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int | None, str]]:
    results = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        results.append((proc.returncode, err))
    return results


@pytest.mark.slow
def test_processes_killed_at_random_moments_even_starting_a_generation_leave_a_resumable_directory(tmp_path):
    truth: list = []
    at.execute(program(None, truth), workers=2, loop="asyncio")
    expected = final_sums(truth)
    out = tmp_path / "out"
    rng = random.Random(1)
    shapes = [(2, 1), (3, 1), (3, 1), (1, 2), (2, 1), (3, 1), (1, 3), (2, 1), (3, 1), (2, 1), (1, 1), (3, 1)]
    for processes, workers in shapes:                     # a new generation at almost every start
        procs = start(tmp_path, out, processes, workers)
        # half the kills early: while the processes start (about 0.5 s) and make the generation's files, or
        # before the run's first snapshot drained
        time.sleep(rng.uniform(0.3, 1.2 if rng.random() < 0.5 else 2.5))
        victims = procs if rng.random() < 0.5 else [rng.choice(procs)]
        for victim in victims:
            if victim.poll() is None:
                victim.send_signal(signal.SIGKILL)
        for code, err in ended(procs, timeout=15):           # the others end on their own: their peer is gone
            assert "RecoveryError" not in err, err[-3000:]
            assert code != 0 or "Traceback" not in err, err[-3000:]
    for code, err in ended(start(tmp_path, out, 2, 1), timeout=120):
        assert code == 0, err[-3000:]
    assert final_sums(written(out)) == expected


def records_in(path: Path) -> int:
    """How many snapshot records a worker file holds (0 if it is not there yet)."""
    if not path.exists():
        return 0
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM snapshots").fetchone()[0]
    except sqlite3.OperationalError:
        return 0        # no tables yet
    finally:
        db.close()


def test_a_rescaled_computation_sigkilled_before_its_first_snapshot_drained_resumes(tmp_path):
    out = tmp_path / "delivered"
    for code, err in ended(start(tmp_path, out, 2, 1, "--crash-at", "300", program="deliveries"), timeout=60):
        assert code == 1 and "crashed delivering" in err, err[-3000:]      # g1-w2: some snapshots complete
    blocked = start(tmp_path, out, 3, 1, "--block", program="deliveries")
    files = [tmp_path / "state" / "g2-w3" / f"worker-{w}.sqlite3" for w in range(3)]
    deadline = time.monotonic() + 30
    while not all(records_in(file) for file in files):                      # g2-w3: written on every worker,
        assert time.monotonic() < deadline, "the blocked run wrote no snapshot on some worker"   # drained nowhere
        time.sleep(0.05)
    for proc in blocked:
        proc.send_signal(signal.SIGKILL)
    ended(blocked, timeout=10)
    for shape in ((3, 1), (1, 2)):                      # the latest generation's workers, then another number
        for code, err in ended(start(tmp_path, out, *shape, "--crash-at", "450", program="deliveries"),
                               timeout=60):
            assert code == 1 and "crashed delivering" in err, err[-3000:]         # (not a RecoveryError)
    for code, err in ended(start(tmp_path, out, 2, 1, program="deliveries"), timeout=60):
        assert code == 0, err[-3000:]
    delivered = [int(line) for path in tmp_path.glob("delivered.*") for line in path.read_text().split()]
    assert set(delivered) == set(range(RECORDS))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("program", choices=["sums", "deliveries"])
    parser.add_argument("out")
    parser.add_argument("state")
    parser.add_argument("--crash-at", type=int)
    parser.add_argument("--block", action="store_true")
    options, rest = parser.parse_known_args(sys.argv[1:])
    build = (program(options.out) if options.program == "sums" else
             deliveries_factory(None, crash_at=options.crash_at, block=options.block, out=options.out))
    at.execute_from_args(build, rest, recovery=Recovery(options.state, every=3 if options.program != "sums" else EVERY))
