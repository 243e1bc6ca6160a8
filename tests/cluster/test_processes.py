"""Real processes on loopback: the same results on any cluster shape, and faults that end cleanly."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from .harness import PROGRAMS, ROOT, Cluster, launch, lines_after_prefix
from .programs import TEXT


def program(name: str) -> str:
    return f"{PROGRAMS}:{name}"


@pytest.mark.parametrize("processes, workers", [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2)])
def test_wordcount_is_the_same_on_every_cluster_shape(processes, workers):
    code, out, err = launch(program("wordcounts"), processes, workers)
    assert code == 0, err
    counts = {}
    for line in lines_after_prefix(out):
        _, word, n = line.split()
        assert word not in counts, f"{word} counted on two workers"
        counts[word] = int(n)
    assert counts == dict(Counter(TEXT.split()))


@pytest.mark.parametrize("processes, workers", [(2, 1), (3, 2)])
def test_hello_across_processes(processes, workers):
    code, out, err = launch("examples/hello.py", processes, workers)
    assert code == 0, err
    peers = processes * workers
    assert sorted(lines_after_prefix(out)) == sorted(f"worker {x % peers}:\thello {x}" for x in range(10))
    # each line comes from the process that hosts its worker
    for line in out.splitlines():
        process, worker = re.match(r"\[process (\d+)\] worker (\d+):", line).groups()
        assert int(worker) // workers == int(process)


def test_an_iterative_dataflow_across_processes():
    code, out, err = launch(program("collatz_steps"), 3, 1)
    assert code == 0, err
    steps = {int(n): int(s) for _, n, s in (line.split() for line in lines_after_prefix(out))}
    assert len(steps) == 60 and steps[27] == 111 and steps[1] == 3 and steps[60] == 19


def test_a_registered_type_crosses_processes():
    code, out, err = launch(program("points"), 2, 2)
    assert code == 0, err
    seen = sorted(lines_after_prefix(out))
    assert seen == sorted(f"point {i} {i * i} on {i % 3} of Point" for i in range(40))


def test_an_unregistered_type_is_a_clear_error():
    code, out, err = launch(program("unregistered"), 2, 1)
    assert code != 0
    assert "cannot send a tests.cluster.programs.Unregistered between processes" in err or \
        "Unregistered between processes" in err
    assert "register_type" in err


def test_an_operator_failure_ends_every_process_naming_it(tmp_path):
    results = Cluster(program("failing"), 2, 1, tmp_path=tmp_path).wait()
    codes = [code for code, _, _ in results]
    assert codes[0] != 0 and codes[1] != 0
    failed_here = "operator 'Map'" in results[1][2] and "ZeroDivisionError" in results[1][2]
    assert failed_here                                  # 5 % 2 == 1: worker 1, process 1 met the bad record
    assert "process 1 failed: operator 'Map'" in results[0][2]


def test_a_wrong_secret_is_refused(tmp_path):
    start = time.monotonic()
    results = Cluster(program("collatz_steps"), 2, 1, secrets=["right", "wrong"], tmp_path=tmp_path,
                      timeout=3).wait(timeout=30)
    assert all(code != 0 for code, _, _ in results)
    assert "does not know the shared secret" in results[0][2] + results[1][2]
    assert "could not reach" in results[0][2] + results[1][2]
    assert time.monotonic() - start < 20


def test_a_killed_peer_ends_the_others_with_a_clear_error(tmp_path):
    cluster = Cluster(program("slow_ticks"), 3, 1, tmp_path=tmp_path)
    victim = cluster.procs[1]
    assert victim.stdout.readline().startswith("started")
    time.sleep(0.3)
    killed_at = time.monotonic()
    victim.send_signal(signal.SIGKILL)
    for p in (0, 2):
        out, err = cluster.procs[p].communicate(timeout=15)
        assert cluster.procs[p].returncode != 0
        assert "process 1" in err and ("closed its connection" in err or "failed" in err), err
    assert time.monotonic() - killed_at < 10
    victim.wait()


def test_garbage_from_a_raw_socket_is_refused_while_the_cluster_computes(tmp_path):
    from aiotimely.comm.framing import Kind, encode_frame

    cluster = Cluster(program("slow_ticks"), 2, 1, env={"TICKS": "300"}, tmp_path=tmp_path)
    assert cluster.procs[0].stdout.readline().startswith("started")
    garbage = [
        b"GET / HTTP/1.1\r\nHost: example\r\n\r\n",                     # not our protocol at all
        encode_frame(Kind.DATA, b"\x93\x01\x02\x03", target=0),          # data before any handshake
        encode_frame(Kind.HELLO, b"\xc1"),                                 # a HELLO that is not msgpack
        bytes(range(256)) * 4,                                             # noise
    ]
    for payload in garbage:
        with socket.create_connection(("127.0.0.1", cluster.ports[0])) as raw:
            raw.sendall(payload)
            raw.settimeout(5)
            try:
                assert raw.recv(100) == b""        # closed on us at once
            except ConnectionResetError:
                pass
    results = cluster.wait()
    assert [code for code, _, _ in results] == [0, 0], results
    assert "finished 0 at" in results[0][1] and "finished 1 at" in results[1][1]
    assert results[0][2].count("refused a connection") == len(garbage), results[0][2]


def test_a_registered_named_tuple_keeps_its_type_across_processes():
    code, out, err = launch(program("named_tuples"), 2, 1)
    assert code == 0, err
    lines = sorted(line for line in lines_after_prefix(out) if line.startswith("reading"))
    assert lines == sorted(f"reading Reading s{i} {i / 2}" for i in range(20))


def test_a_batch_bigger_than_a_frame_is_split_across_frames():
    code, out, err = launch(program("big_batch"), 2, 1)          # 1,000 records of 270 kB: 270 MB
    assert code == 0, err
    assert "received 1000 records of {270000} characters" in out


def test_a_record_bigger_than_a_frame_is_a_clear_error():
    import os

    env = {**os.environ, "RECORD_KB": "270000", "RECORDS": "1"}   # one record of 270 MB
    done = subprocess.run([sys.executable, "-m", "aiotimely", "run", program("big_batch"), "-w", "1", "-n", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0
    for process in (0, 1):                           # the launcher's last words are its summary: skip them
        last = [line for line in done.stderr.splitlines() if line.startswith(f"[process {process}] ")][-1]
        assert "operator 'ToStream'" in last and "dataflow 'big'" in last, done.stderr[-2000:]
        assert "cannot cross processes: a frame carries at most 268,435,439 bytes" in last, last
