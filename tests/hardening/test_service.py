"""The guide's service pattern with a real uvicorn serving a real Starlette app (tests/hardening/service_app.py):
a record that fails the dataflow is logged when it happens, the handlers answer 503 from then on, the health
endpoint says why, and ``on_error`` stops the server gracefully."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from aiotimely.launch import free_ports

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parent.parent.parent


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_failing_record_fails_requests_says_why_and_stops_the_server():
    [port] = free_ports(1)
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "tests.hardening.service_app:app", "--port", str(port)],
                            cwd=ROOT, env={**os.environ, "STOP_DELAY": "3"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert get(f"{base}/health") == (200, '{"failure":null}')
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
                time.sleep(0.1)
        assert get(f"{base}/send/5") == (200, "ok")
        assert get(f"{base}/send/0") == (200, "ok")      # accepted: the map fails on it a moment later
        while (status := get(f"{base}/health"))[0] == 200:
            time.sleep(0.01)
        assert status[0] == 503 and "operator 'Map' (#2) in dataflow 'ratios'" in status[1]
        code, text = get(f"{base}/send/1")
        assert code == 503
        assert text.startswith("cannot send through the InputHandle of operator 'Input' (#1) in dataflow 'ratios' "
                               "on worker 0: the computation failed: operator 'Map' (#2)")
        _, err = proc.communicate(timeout=30)          # on_error stops the server: it ends by itself
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "the computation failed, so every worker stopped: operator 'Map' (#2) in dataflow 'ratios'" in err
    assert "ZeroDivisionError" in err and "Shutting down" in err
    assert "Application shutdown failed" in err        # leaving the worker's block raised the failure, as it should
    assert proc.returncode == -signal.SIGTERM, err[-3000:]   # uvicorn ends by the signal it was stopped with
