"""--metrics-port and --ui: each process serves its workers' metrics and live view (process p on PORT + p),
says where in one line on stderr, and stops serving when the computation ends (real processes, real HTTP)."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import urllib.request

import pytest

import aiotimely as at

from .test_stopping import PROGRAMS, run, signalled, start

pytest.importorskip("prometheus_client")
pytest.importorskip("websockets")


def two_free_ports() -> int:
    """A port P such that P and P + 1 are free (now)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return int(port)
    raise AssertionError("no two consecutive free ports")


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def test_run_serves_metrics_and_the_live_view_of_every_process_until_it_stops():
    port = two_free_ports()
    proc = start(run(f"{PROGRAMS}:ticking", "-n", "2", "--metrics-port", "0", "--ui", str(port)))
    assert proc.stdout is not None and proc.stderr is not None
    assert "ready" in proc.stdout.readline()
    said = [proc.stderr.readline().rstrip("\n") for _ in range(4)]  # (printed before the workers build)
    urls = {}
    for line in said:
        match = re.fullmatch(r"\[process (\d)\] aiotimely: (metrics|live dataflow view) at (\S+) \(process (\d)\)",
                             line)
        assert match is not None and match[1] == match[4], said
        urls[match[2], int(match[1])] = match[3]
    assert urls["live dataflow view", 0] == f"http://127.0.0.1:{port}/"
    assert urls["live dataflow view", 1] == f"http://127.0.0.1:{port + 1}/"
    for p in (0, 1):
        assert 'aiotimely_worker_rounds_total{process="%d"' % p in fetch(urls["metrics", p])
        assert "<html" in fetch(urls["live dataflow view", p])
    code, out, err = signalled(proc, signal.SIGINT, wait=False)
    assert (code, err.splitlines()) == (130, ["aiotimely: stopped by SIGINT after the dataflows drained (2 processes)"])
    with pytest.raises(OSError):
        fetch(urls["metrics", 0])                                       # closed with the computation


def test_an_application_worker_serves_its_live_view_and_metrics_until_its_block_ends():
    async def main() -> tuple[str, str, str]:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            worker.dataflow(lambda scope: inp.to_stream(scope).map(lambda x: x + 1).probe())
            view, metrics = await worker.serve_ui(), await worker.serve_metrics()
            page = await asyncio.to_thread(fetch, view.url)
            scraped = await asyncio.to_thread(fetch, metrics.url)
            await view.close()                                           # closing early, then at the end: harmless
        return view.url, page, scraped

    url, page, scraped = asyncio.run(main())
    assert "<html" in page and "aiotimely_worker_rounds_total" in scraped
    with pytest.raises(OSError):
        fetch(url)


def test_execute_serves_on_port_zero_and_says_where(capfd):
    def build(worker: at.Worker) -> None:
        worker.dataflow(lambda scope: at.to_stream(range(10), scope).probe())

    at.execute(build, workers=2, metrics_port=0, ui_port=0)
    lines = capfd.readouterr().err.splitlines()
    assert [re.sub(r":\d+/", ":PORT/", line) for line in lines] == [
        "aiotimely: metrics at http://127.0.0.1:PORT/metrics (process 0)",
        "aiotimely: live dataflow view at http://127.0.0.1:PORT/ (process 0)"]
