"""The live dataflow page in a real (headless) Chromium: it shows the graph, frontiers move on screen as data is
fed in, and an operator holding a capability is highlighted as what holds time back. Also: the page's files over
plain HTTP, frames sent only when something changed, and the error without the ``[ui]`` extra."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import aiotimely as at

from .flows import named
from aiotimely.observe.frames import LiveFeed
from aiotimely.observe.ui import serve_ui

WAIT = 20.0
"""Seconds any wait for the page may take before the test fails (it takes well under one)."""


def countdown(inp: at.InputHandle[int], scope: at.Scope[at.Stream]) -> at.ProbeHandle:
    """An exchange, a named operator, and an iterative scope counting each number down to zero."""
    numbers = named(inp.to_stream(scope).exchange(lambda x: x), "Numbers")

    def loop(inner: at.Scope[at.Stream]) -> at.Stream:
        handle, again = inner.feedback(1)
        counted = numbers.enter(inner).concat(again).map(lambda x: x - 1)
        counted.filter(lambda x: x > 0).connect_loop(handle)
        return counted.leave()

    result: at.ProbeHandle = scope.iterative(loop, name="Countdown").probe()
    return result


# -- without a browser -------------------------------------------------------------------------


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def test_the_page_and_its_files_are_served_over_plain_http() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            worker.dataflow(lambda s: countdown(inp, s), name="numbers")
            served = await serve_ui([worker._scheduler])
            try:
                assert served.url.startswith("http://127.0.0.1:")
                status, kind, page = await asyncio.to_thread(_get, served.url)
                assert status == 200 and kind.startswith("text/html") and b"static/dagre.min.js" in page
                assert b'="http' not in page and b"//cdn" not in page  # everything from here: it works offline
                status, kind, script = await asyncio.to_thread(_get, served.url + "static/dagre.min.js")
                assert status == 200 and "javascript" in kind and b"graphlib" in script
                status, kind, frame = await asyncio.to_thread(_get, served.url + "frame.json")
                names = {op["name"] for op in json.loads(frame)["graph"]["dataflows"][0]["operators"]}
                assert {"Input", "Numbers", "Feedback"} <= names
                status, _, text = await asyncio.to_thread(_get, served.url + "static/../../etc/passwd")
                assert status == 404 and b"the live page is at /" in text
            finally:
                await served.close()
                inp.close()
            with pytest.raises(OSError):  # closed: nothing listens any more
                await asyncio.to_thread(_get, served.url)

    asyncio.run(main())


def test_a_frame_is_sent_only_when_something_changed_and_the_graph_id_only_when_the_graph_did() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda s: countdown(inp, s), name="numbers")
            feed = LiveFeed([worker._scheduler])
            first = feed.frame()
            assert first is not None and feed.frame() is None  # nothing happened: nothing to send
            inp.send(2)
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            moved = feed.frame()
            assert moved is not None
            assert json.loads(moved)["graph"]["id"] == json.loads(first)["graph"]["id"]
            other: at.InputHandle[int] = at.InputHandle()
            worker.dataflow(lambda s: other.to_stream(s).probe(), name="second")
            grown = feed.frame()
            assert grown is not None
            assert json.loads(grown)["graph"]["id"] != json.loads(first)["graph"]["id"]
            inp.close()
            other.close()

    asyncio.run(main())


def test_rates_are_records_per_second_over_the_last_second() -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda s: countdown(inp, s), name="numbers")
            now = [100.0]
            feed = LiveFeed([worker._scheduler], clock=lambda: now[0])

            def numbers() -> dict[str, Any]:
                (flow,) = frame["workers"][0]["dataflows"]
                ids = {op["name"]: op["id"] for op in frame["graph"]["dataflows"][0]["operators"]}
                result: dict[str, Any] = flow["operators"][ids["Numbers"]]
                return result

            frame = json.loads(feed.frame() or "")
            assert (numbers()["rate_in"], numbers()["rate_out"]) == (0.0, 0.0)
            for x in range(10):
                inp.send(x)
            inp.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            now[0] += 0.5
            frame = json.loads(feed.frame() or "")
            assert (numbers()["rate_in"], numbers()["rate_out"]) == (20.0, 20.0)  # 10 records in half a second
            assert numbers()["inputs"][0]["records"] == 10 and numbers()["sent"] == [10]
            now[0] += 2.0  # nothing more came: the rate falls back to zero once the second has passed
            frame = json.loads(feed.frame() or "")
            assert (numbers()["rate_in"], numbers()["rate_out"]) == (0.0, 0.0)
            now[0] += 0.25
            assert feed.frame() is None  # and stays there: nothing new to send
            inp.close()

    asyncio.run(main())


def test_without_websockets_serve_ui_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "websockets.asyncio.server", None)

    async def main() -> None:
        with pytest.raises(ImportError, match=r"pip install 'aiotimely\[ui\]'"):
            await serve_ui([])

    asyncio.run(main())


# -- in a browser ------------------------------------------------------------------------------

browser_missing = shutil.which("chromium") is None or shutil.which("chromedriver") is None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium driven by selenium, shared by this module's tests."""
    if browser_missing:
        pytest.skip("chromium and chromedriver are not on PATH (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(WAIT)
    driver.set_script_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


async def until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    """Wait (at most :data:`WAIT` seconds, off the event loop so the workers and the server go on) until
    ``condition(driver)`` is true; its value."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return await asyncio.to_thread(WebDriverWait(driver, WAIT, poll_frequency=0.05).until, condition)
    except TimeoutException:
        raise AssertionError(f"the page never showed {what}") from None


def text_of(css: str) -> Callable[[Any], str]:
    """The text of the element ``css`` selects, or ``""`` while there is none."""
    return lambda driver: driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", css)


@pytest.mark.skipif(browser_missing, reason="chromium and chromedriver are not on PATH")
def test_the_page_shows_the_graph_and_a_frontier_moving_as_data_arrives(browser: Any, tmp_path: Path) -> None:
    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda s: countdown(inp, s), name="numbers")
            served = await serve_ui([worker._scheduler])
            try:
                await asyncio.to_thread(browser.get, served.url)
                frontier = 'g.op[data-name="Numbers"] text.in'
                await until(browser, text_of(frontier), "the Numbers operator")
                names = browser.execute_script(
                    "return [...document.querySelectorAll('g.op')].map(g => g.dataset.name)")
                assert {"Input", "Numbers", "Feedback", "Concatenate", "Probe"} <= set(names)
                assert "Countdown (iterative)" in text_of("g.scope.iterative text")(browser)
                assert browser.execute_script("return document.querySelectorAll('g.edge.exchange').length") == 1
                assert browser.execute_script("return document.querySelectorAll('g.edge.loop').length") == 1
                before = text_of(frontier)(browser)
                assert before == "in 0: 0"
                assert "holds 0 @w0" in text_of('g.op[data-name="Input"] text.caps')(browser)
                assert text_of('g.op[data-name="Numbers"] text.rate')(browser) == "0.0 rec/s in · 0.0 out"

                for n in range(3):
                    inp.send(n + 1)
                    inp.advance_to(n + 1)
                    await worker.step_while(lambda: probe.less_than(inp.time))
                after = await until(browser, lambda d: text_of(frontier)(d) == "in 0: 3" and text_of(frontier)(d),
                                    "the Numbers input's frontier move to 3")
                assert after != before
                assert "holds 3 @w0" in text_of('g.op[data-name="Input"] text.caps')(browser)
                state = browser.execute_script("return window.aiotimely")
                assert state["frames"] > 1 and state["layouts"] == 1  # updated in place, laid out once
                browser.save_screenshot(str(tmp_path / "live-page.png"))
                assert (tmp_path / "live-page.png").stat().st_size > 0
            finally:
                await served.close()
                inp.close()

    asyncio.run(main())


@pytest.mark.skipif(browser_missing, reason="chromium and chromedriver are not on PATH")
def test_an_operator_holding_a_capability_is_highlighted_as_what_holds_time_back(browser: Any) -> None:
    kept: list[Any] = []

    async def stuck(input: Any, output: Any, cap: Any) -> None:
        cap.drop()
        async for _ in input.activations():
            for time, batch in input.drain():
                kept.append(time.retain())  # held until the input completes: time cannot pass it
                output.session(time).give_many(batch)
        for held in kept:
            held.drop()

    async def main() -> None:
        async with at.Worker() as worker:
            inp: at.InputHandle[int] = at.InputHandle()
            probe = worker.dataflow(lambda s: inp.to_stream(s).unary_frontier(stuck, name="Stuck").probe(), name="jam")
            served = await serve_ui([worker._scheduler])
            try:
                inp.send(1)
                inp.advance_to(5)
                await worker.step_while(lambda: not kept)
                assert probe.less_than(1)  # jammed at 0 by Stuck, though the input is at 5
                await asyncio.to_thread(browser.get, served.url)
                await until(browser, lambda d: d.execute_script(
                    "return document.querySelector('g.op[data-name=\"Stuck\"].holds-back') !== null"),
                    "Stuck highlighted")
                assert not browser.execute_script(
                    "return document.querySelector('g.op[data-name=\"Input\"]').classList.contains('holds-back')")
                assert text_of('g.op[data-name="Stuck"] text.caps')(browser) == "holds 0 @w0"
                (holding,) = browser.execute_script(
                    "return [...document.querySelectorAll('#holding li.holds')].map(li => li.textContent)")
                assert "Stuck" in holding and "still holds capabilities at time(s) 0" in holding

                inp.close()  # Stuck's input completes: it lets go, and the dataflow completes
                await worker.step_while(lambda: not probe.done())
                await until(browser, text_of("#graphs p.empty"), "the dataflow leave the page")
                assert "No dataflow is running" in text_of("#graphs p.empty")(browser)
            finally:
                await served.close()

    asyncio.run(main())


@pytest.mark.skipif(browser_missing, reason="chromium and chromedriver are not on PATH")
def test_with_two_workers_the_page_says_which_worker_holds_time_back(browser: Any) -> None:
    workers: list[at.Worker] = []
    checked = asyncio.Event()
    both = asyncio.Event()

    async def build(worker: at.Worker) -> None:
        inp: at.InputHandle[int] = at.InputHandle()
        worker.dataflow(lambda s: named(inp.to_stream(s).exchange(lambda x: x), "Numbers").probe(), name="pairs")
        workers.append(worker)
        if len(workers) == 2:
            both.set()
        if worker.index == 1:  # its input stays open at 0 until the page was checked
            await asyncio.wait_for(checked.wait(), timeout=WAIT * 3)
            inp.close()
            return
        inp.send_batch(list(range(10)))
        inp.advance_to(5)
        await asyncio.wait_for(both.wait(), timeout=30)  # worker 1 built its dataflow too
        await worker.step()
        served = await serve_ui([w._scheduler for w in sorted(workers, key=lambda w: w.index)])
        try:
            await asyncio.to_thread(browser.get, served.url)
            caps = 'g.op[data-name="Input"] text.caps'
            await until(browser, lambda d: text_of(caps)(d) == "holds 5 @w0; 0 @w1", "both workers' capabilities")
            (holding,) = browser.execute_script(
                "return [...document.querySelectorAll('#holding li.holds')].map(li => li.dataset.worker)")
            assert holding == "1"  # worker 0's input, at 5, is not what holds time back
            assert "workers 0, 1 of 2" in text_of("#where")(browser)
            rows = browser.execute_script(
                "return [...document.querySelectorAll('#operators tbody tr')].map(r => r.dataset.worker)")
            assert set(rows) == {"0", "1"} and rows.count("0") == rows.count("1")  # each operator on each worker
        finally:
            checked.set()
            await served.close()
            inp.close()

    asyncio.run(at.execute_async(build, workers=2))
