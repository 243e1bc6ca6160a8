"""TLS between the processes of a cluster: real processes, real TCP, certificates made by openssl at test time."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
from collections import Counter

import pytest

from aiotimely.launch import free_ports
from aiotimely.comm.tls import TLSConfig, TLSError

from .harness import PROGRAMS, ROOT, Cluster
from .programs import TEXT
from .tls_certs import make_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def word_counts(out: str) -> dict[str, int]:
    return {word: int(n) for _, word, n in (line.split() for line in out.splitlines() if line.startswith("count "))}


def test_a_two_process_cluster_over_tls_gives_the_right_output(tmp_path, certs):
    results = Cluster(f"{PROGRAMS}:wordcounts", 2, 2, env=certs.env(), tmp_path=tmp_path).wait(60)
    counts: dict[str, int] = {}
    for code, out, err in results:
        assert code == 0, err[-2000:]
        assert "refused" not in err, err[-2000:]
        counts.update(word_counts(out))
    assert counts == dict(Counter(TEXT.split()))


def test_back_pressure_holds_over_tls(tmp_path, certs):
    # ~200 MB of records to a slow consumer, as in test_backpressure: TLS buffers must not undo the bound
    results = Cluster(f"{PROGRAMS}:flood", 2, 1, env=certs.env(), tmp_path=tmp_path).wait(timeout=120)
    peaks = {}
    for code, out, err in results:
        assert code == 0, err[-2000:]
        _, worker, mib = out.split()[-3:]
        peaks[int(worker)] = int(mib)
    assert peaks[0] < 120 and peaks[1] < 100, peaks


def test_a_plaintext_peer_and_an_untrusted_one_are_refused_while_the_tls_cluster_computes(tmp_path, certs):
    from aiotimely.comm.handshake import Dialer

    cluster = Cluster(f"{PROGRAMS}:slow_ticks", 2, 1, env={**certs.env(), "TICKS": "150"}, tmp_path=tmp_path)
    try:
        assert cluster.procs[0].stdout.readline().startswith("started")
        port = cluster.ports[0]
        # a plaintext aiotimely peer, with the right secret: says HELLO in the clear
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(Dialer(b"cluster-test-secret", 2, 1, expect=0).start())
            try:
                assert raw.recv(100) == b""                  # closed on us
            except ConnectionResetError:
                pass
        # a TLS peer whose certificate another CA signed
        context = certs.stranger().client_context()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            try:
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    tls.sendall(Dialer(b"cluster-test-secret", 2, 1, expect=0).start())
                    assert tls.recv(100) == b""
            except (ssl.SSLError, ConnectionResetError):
                pass
        results = cluster.wait(60)
    finally:
        for proc in cluster.procs:
            proc.kill()
    assert [code for code, _, _ in results] == [0, 0], results
    assert "finished 0 at" in results[0][1] and "finished 1 at" in results[1][1]
    err = results[0][2]
    assert "refused a connection from 127.0.0.1:" in err, err
    assert "a plaintext connection to a TLS listener" in err, err
    assert "certificate not trusted" in err, err


def start(target: str, index: int, hostfile, env: dict[str, str]) -> subprocess.Popen:
    """Process ``index`` of 2, with ``env`` over the usual test environment."""
    return subprocess.Popen(
        [sys.executable, "-m", "aiotimely", "worker", target, "-w", "1", "-n", "2", "-p", str(index),
         "--hostfile", str(hostfile)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "AIOTIMELY_SECRET": "cluster-test-secret", "AIOTIMELY_CONNECT_TIMEOUT": "30", **env})


def test_a_tls_process_dialing_a_plaintext_listener_fails_at_once_saying_so(tmp_path, certs):
    ports = free_ports(2)
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text(f"127.0.0.1:{ports[0]}\n127.0.0.1:{ports[1]}\n")
    plaintext = {"AIOTIMELY_TLS_CERT": "", "AIOTIMELY_TLS_KEY": "", "AIOTIMELY_TLS_CA": ""}
    listener = start(f"{PROGRAMS}:slow_ticks", 0, hostfile, plaintext)
    dialer = start(f"{PROGRAMS}:slow_ticks", 1, hostfile, certs.env())
    try:
        _, err = dialer.communicate(timeout=25)                 # it does not wait for its 30 s connect timeout
        listener.kill()
        _, listener_err = listener.communicate(timeout=20)
    finally:
        dialer.kill()
        listener.kill()
    assert dialer.returncode != 0
    last = err.strip().splitlines()[-1]
    assert f"process 1 cannot connect to process 0 at 127.0.0.1:{ports[0]}" in last, err[-2000:]
    assert "TLSError" in last and "plaintext listener" in last, last
    assert "a TLS connection to a plaintext listener" in listener_err, listener_err[-2000:]


def test_a_tls_peer_that_dies_ends_the_computation_naming_it(tmp_path, certs):
    cluster = Cluster(f"{PROGRAMS}:slow_ticks", 2, 1, env={**certs.env(), "TICKS": "3000"}, tmp_path=tmp_path)
    try:
        assert cluster.procs[0].stdout.readline().startswith("started")
        cluster.procs[1].kill()
        _, err = cluster.procs[0].communicate(timeout=20)
    finally:
        for proc in cluster.procs:
            proc.kill()
            proc.communicate()
    assert cluster.procs[0].returncode != 0
    last = err.strip().splitlines()[-1]
    assert "process 1" in last and ("closed its connection" in last or "has sent nothing" in last), err[-2000:]


def test_the_environment_configures_tls_and_bad_files_are_named(tmp_path, certs):
    assert TLSConfig.from_env({}) is None
    config = TLSConfig.from_env(certs.env())
    assert config == certs.node() and config.mutual and not config.hostname_checked
    assert TLSConfig(cert=certs.path("node.pem"), key=certs.path("node.key")).hostname_checked
    with pytest.raises(TLSError, match="missing.pem"):
        TLSConfig(cert=str(tmp_path / "missing.pem")).server_context()
    with pytest.raises(TLSError, match="needs this process's certificate"):
        TLSConfig(ca=certs.path("ca.pem")).server_context()
    with pytest.raises(TLSError, match="without a certificate"):
        TLSConfig(key=certs.path("node.key"))


def test_a_captured_stream_crosses_computations_over_tls(certs):
    from .test_capture_tcp import consecutive_free_ports

    env = {**os.environ, **certs.env(), "AIOTIMELY_SECRET": "events-secret",
           "AIOTIMELY_EVENTS_BASE": str(consecutive_free_ports(2))}
    recv = subprocess.Popen([sys.executable, "examples/capture_recv.py", "2", "-w", "1"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        send = subprocess.run([sys.executable, "examples/capture_send.py", "-w", "2"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        out, err = recv.communicate(timeout=60)
    finally:
        recv.kill()
    assert send.returncode == 0, send.stderr[-2000:]
    assert recv.returncode == 0, err[-2000:]
    replayed = sorted(line for line in out.splitlines() if line.startswith("replayed"))
    assert replayed == sorted(f"replayed {(w * 100 + r) ** 2} at time {r}" for w in range(2) for r in range(5))
    assert "refused" not in err, err


def test_a_plaintext_event_writer_is_refused_by_a_tls_reader_which_then_takes_a_tls_one(certs, caplog):
    import asyncio

    from aiotimely.connectors import EventReader, EventWriter
    from aiotimely.errors import ClusterError

    port = free_ports(1)[0]
    address = f"127.0.0.1:{port}"

    async def main():
        accepting = asyncio.ensure_future(EventReader.accept(address, secret="s", tls=certs.node()))
        with pytest.raises(ClusterError, match="could not deliver a captured stream"):
            await EventWriter.connect(address, secret="s", tls=False, timeout=1)
        with pytest.raises(TLSError, match="does not trust this process's certificate"):
            await EventWriter.connect(address, secret="s", tls=certs.stranger(), timeout=5)
        writer = await EventWriter.connect(address, secret="s", tls=certs.node(), timeout=5)
        captured = await asyncio.wait_for(accepting, 10)
        writer.close()
        for _ in range(200):
            if captured.closed:
                break
            await asyncio.sleep(0.02)
        return captured

    captured = asyncio.run(asyncio.wait_for(main(), 30))
    assert captured.closed and captured.error is None
    refusals = [r.getMessage() for r in caplog.records if "refused a connection" in r.getMessage()]
    assert any("a plaintext connection to a TLS listener" in m for m in refusals), refusals
    assert any("certificate not trusted" in m for m in refusals), refusals
