"""Failures under load: the real cause reaches every process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from aiotimely.launch import free_ports

from .harness import PROGRAMS, ROOT, Cluster


@pytest.mark.parametrize("fail_on, cause", [(0, "the source broke"), (1, "the sink broke")])
def test_every_process_reports_the_failing_operator_not_a_reset_connection(tmp_path, fail_on, cause):
    for attempt in range(3):
        results = Cluster(f"{PROGRAMS}:fail_under_load", 2, 1, tmp_path=tmp_path,
                          env={"FAIL_ON": str(fail_on)}).wait(timeout=60)
        for index, (code, _out, err) in enumerate(results):
            assert code != 0
            assert cause in err.splitlines()[-1], f"attempt {attempt}, process {index}:\n{err[-3000:]}"


def _impostor(port: int, secret: bytes, frame: bytes | None) -> None:
    """Process 1 of 2, authenticated with the real secret, that sends ``frame`` and then waits to be closed
    (or, without a frame, leaves at once)."""
    from aiotimely.comm.framing import FrameDecoder
    from aiotimely.comm.handshake import Dialer

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        dialer = Dialer(secret, 2, 1, expect=0)
        sock.sendall(dialer.start())
        decoder = FrameDecoder()
        while not dialer.done:
            frames = decoder.feed(sock.recv(65536))
            for answer in frames:
                if dialer.done:                 # what follows WELCOME in the same read is the cluster's, not ours
                    break
                reply = dialer.receive(answer)
                if reply:
                    sock.sendall(reply)
                    if frame is None:           # AUTH, then FIN at once: gone before it is welcomed
                        return
        sock.sendall(frame)
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass


def with_impostor(tmp_path, frame: bytes | None) -> str:
    """Run process 0 of 2 for real and play process 1 with the right secret (see ``_impostor``); return
    process 0's stderr once it has ended (it must end: the test fails after 20 s)."""
    ports = free_ports(2)
    hostfile = tmp_path / "hosts2.txt"
    hostfile.write_text(f"127.0.0.1:{ports[0]}\n127.0.0.1:{ports[1]}\n")
    real = subprocess.Popen(
        [sys.executable, "-m", "aiotimely", "worker", f"{PROGRAMS}:slow_ticks", "-w", "1", "-n", "2", "-p", "0",
         "--hostfile", str(hostfile)], cwd=ROOT, env={**os.environ, "AIOTIMELY_SECRET": "s3cret", "TICKS": "300"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                _impostor(ports[0], b"s3cret", frame)
                break
            except OSError:  # process 0 is not listening yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        _, err = real.communicate(timeout=20)
    finally:
        real.kill()
    assert real.returncode != 0
    return err


@pytest.mark.parametrize("payload", [b"\xc1 not msgpack", b"\x94\x91\x07\x01\x00\x90"])  # garbage; a wrong path
def test_a_malformed_progress_frame_from_an_authenticated_peer_is_refused_naming_it(tmp_path, payload):
    from aiotimely.comm.framing import ALL, Kind, encode_frame

    err = with_impostor(tmp_path, encode_frame(Kind.PROGRESS, payload, source=1, target=ALL, dataflow=0, channel=0))
    assert "process 1 sent a bad PROGRESS frame" in err.splitlines()[-1], err
    assert "Fatal error" not in err and "Traceback" in err


def test_a_stopped_peer_is_named_within_the_peer_timeout(tmp_path):
    cluster = Cluster(f"{PROGRAMS}:slow_ticks", 2, 1, env={"TICKS": "3000", "AIOTIMELY_PEER_TIMEOUT": "2"},
                      tmp_path=tmp_path)
    assert cluster.procs[0].stdout.readline().startswith("started")
    victim = cluster.procs[1]
    victim.send_signal(signal.SIGSTOP)                 # alive, but silent: as a hung host or a cut network
    stopped_at = time.monotonic()
    try:
        _, err = cluster.procs[0].communicate(timeout=20)
        detected_after = time.monotonic() - stopped_at
    finally:
        victim.kill()
        victim.communicate()
    assert cluster.procs[0].returncode != 0
    last = err.strip().splitlines()[-1]
    assert "process 1" in last and "has sent nothing for 2 s" in last, err[-2000:]
    assert detected_after < 2 + 3                        # the timeout, one beat, and start-up slack


def test_a_busy_peer_under_load_is_not_taken_for_dead(tmp_path):
    results = Cluster(f"{PROGRAMS}:busy", 2, 1, env={"AIOTIMELY_PEER_TIMEOUT": "2"}, tmp_path=tmp_path).wait(60)
    for code, out, err in results:
        assert code == 0, err[-2000:]
        assert "done" in out


def test_a_peer_that_leaves_right_after_its_handshake_ends_the_computation(tmp_path):
    err = with_impostor(tmp_path, None)                  # AUTH, then FIN
    assert "process 1" in err.strip().splitlines()[-1], err[-2000:]
