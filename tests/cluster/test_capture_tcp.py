"""The book's capture_send / capture_recv: a stream captured in one computation, replayed live in another."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys

from .harness import ROOT


def consecutive_free_ports(n: int) -> int:
    for _ in range(100):
        base = random.randrange(20000, 60000)
        sockets = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free ports")


def test_capture_send_and_recv_across_computations():
    env = {**os.environ, "AIOTIMELY_SECRET": "events-secret", "AIOTIMELY_EVENTS_BASE": str(consecutive_free_ports(3))}
    recv = subprocess.Popen([sys.executable, "examples/capture_recv.py", "3", "-w", "2"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    send = subprocess.run([sys.executable, "examples/capture_send.py", "-w", "3"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    out, err = recv.communicate(timeout=60)
    assert send.returncode == 0, send.stderr
    assert recv.returncode == 0, err
    replayed = sorted(line for line in out.splitlines() if line.startswith("replayed"))
    expected = sorted(f"replayed {(w * 100 + r) ** 2} at time {r}" for w in range(3) for r in range(5))
    assert replayed == expected
    assert "worker 0 done: True" in out and "worker 1 done: True" in out


def test_a_sender_with_the_wrong_secret_is_refused():
    base = consecutive_free_ports(1)
    env = {**os.environ, "AIOTIMELY_EVENTS_BASE": str(base)}
    recv = subprocess.Popen([sys.executable, "examples/capture_recv.py", "1", "-w", "1"], cwd=ROOT,
                            env={**env, "AIOTIMELY_SECRET": "right"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        code = """
import asyncio, aiotimely as at
from aiotimely.connectors import EventReader, EventWriter
async def main():
    try:
        await EventWriter.connect("127.0.0.1:%d", secret="wrong", timeout=2)
    except at.ClusterError as e:
        print("refused:", e)
asyncio.run(main())
""" % base
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert "refused:" in done.stdout and "shared secret" in done.stdout, done.stdout + done.stderr
    finally:
        recv.kill()
        _, err = recv.communicate()
    assert "event stream refused a connection" in err and "shared secret" in err


def test_a_live_captured_stream_outlives_the_handshake_time_limit(monkeypatch):
    """The handshake's time limit is for the handshake: a stream still sending after it goes on."""
    import asyncio

    import aiotimely as at
    from aiotimely.comm import link
    from aiotimely.connectors import EventReader, EventWriter

    monkeypatch.setattr(link, "HANDSHAKE_TIMEOUT", 0.2)
    port = consecutive_free_ports(1)

    async def main():
        address = f"127.0.0.1:{port}"
        accepting = asyncio.ensure_future(EventReader.accept(address, secret="s"))
        writer = await EventWriter.connect(address, secret="s")
        captured = await accepting
        async with at.Worker() as worker:
            inp = at.InputHandle()
            worker.dataflow(lambda s: inp.to_stream(s).capture_into(writer))
            for t in range(6):
                inp.send(t)
                inp.advance_to(t + 1)
                await worker.step()
                await asyncio.sleep(0.1)                # 0.6 s in all: three time limits
        for _ in range(100):
            if captured.closed:
                break
            await asyncio.sleep(0.02)
        return captured

    captured = asyncio.run(main())
    assert captured.error is None
    assert captured.closed
    assert [records for _, records in captured.extract()] == [[t] for t in range(6)]
