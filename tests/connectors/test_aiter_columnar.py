"""Async-iterator sources decoding to columns: JSON or msgpack per batch, event time from a column as a watermark,
windows closing while the source goes on, late rows, and a crash and resume."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pl = pytest.importorskip("polars")
msgpack = pytest.importorskip("msgpack")

import aiotimely as at  # noqa: E402
from aiotimely.connectors import EveryBatch, from_aiter  # noqa: E402
from aiotimely.connectors.aiter import ColumnTime  # noqa: E402
from aiotimely.recovery import Recovery  # noqa: E402
from aiotimely.testing import run_dataflow  # noqa: E402

SCHEMA = {"id": pl.Int64, "page": pl.String, "ts": pl.Int64}


def event(i: int, ts: int, encode: str) -> bytes:
    record = {"id": i, "page": ["home", "cart"][i % 2], "ts": ts}
    return json.dumps(record).encode() if encode == "json" else msgpack.packb(record)


async def bursts(encode: str, files: int, per: int = 10, pause: float = 0.01):
    for f in range(files):
        for i in range(per):
            yield event(f * per + i, f * 10 + i, encode)
        await asyncio.sleep(pause)


@pytest.mark.parametrize("encode", ["json", "msgpack"])
def test_each_batch_read_is_decoded_into_one_arrow_batch(run: Any, encode: str) -> None:
    def build(worker: Any) -> Any:
        got: list[Any] = []
        worker.dataflow(lambda s: from_aiter(s, bursts(encode, 3), time=EveryBatch(), decode=encode, columnar=SCHEMA)
                        .stream.inspect_batch(lambda t, b: got.append((t, b))))
        return got

    got = run(build)[0]
    assert all(type(b).__name__ == "ArrowBatch" for _, b in got)
    assert [(t, len(b)) for t, b in got] == [(0, 10), (1, 10), (2, 10)]
    assert list(got[1][1])[0] == (10, "home", 10)


def test_rows_as_tuples_without_decoding(run: Any) -> None:
    async def rows():
        for i in range(5):
            yield (i, "home", i)

    def build(worker: Any) -> Any:
        got: list[Any] = []
        worker.dataflow(lambda s: from_aiter(s, rows(), columnar=SCHEMA).records().inspect(got.append))
        return got

    assert run(build)[0] == [(i, "home", i) for i in range(5)]


def test_windows_on_a_time_column_close_while_the_iterator_goes_on() -> None:
    closed: list[tuple[int, list[Any]]] = []

    async def gated():
        # burst f (event times 10 f .. 10 f + 9; watermark 10 f + 9 - 2) closes window [10 (f - 1), 10 f): the
        # iterator waits for it before the next burst, so a window that only closed at the end would hang here
        for f in range(4):
            for i in range(10):
                yield event(f * 10 + i, f * 10 + i, "msgpack")
            if f == 2:
                yield event(99, 3, "msgpack")      # at watermark 27, [0, 10) is complete: late
            deadline = asyncio.get_running_loop().time() + 5
            while len(closed) < 2 * f:
                assert asyncio.get_running_loop().time() < deadline, f"burst {f}: windows {closed}"
                await asyncio.sleep(0.005)

    def build(worker: Any) -> None:
        def dataflow(scope: Any) -> None:
            columns = from_aiter(scope, gated(), time=ColumnTime("ts", lateness=2), decode="msgpack",
                                 columnar=SCHEMA)
            results, late = columns.window(at.Tumbling(10), pl.len().alias("n"), key="page", time="ts",
                                           late="count")
            results.inspect_batch(lambda t, f: closed.extend((t, r) for r in f.rows()))
            late.inspect_batch(lambda t, f: closed_late.extend(f.rows()))

        worker.dataflow(dataflow)

    closed_late: list[Any] = []
    at.execute(build, workers=2, loop="asyncio")
    assert sorted(closed) == sorted([(10 * (w + 1), (p, 10 * w, 10 * (w + 1), 5)) for w in range(4)
                                     for p in ("home", "cart")])
    assert closed_late == [(1,)]


def test_a_time_column_must_be_an_integer_one() -> None:
    with pytest.raises(TypeError, match="not an integer type"):
        at.execute(lambda w: w.dataflow(lambda s: from_aiter(s, bursts("json", 1), time=ColumnTime("page"),
                                                             decode="json", columnar=SCHEMA)))
    with pytest.raises(ValueError, match="decode must be one of"):
        at.execute(lambda w: w.dataflow(lambda s: from_aiter(s, bursts("json", 1), decode="xml", columnar=SCHEMA)))
    with pytest.raises(ValueError, match="give columnar=schema"):
        at.execute(lambda w: w.dataflow(lambda s: from_aiter(s, bursts("json", 1), decode="json")))


def test_a_crash_and_a_resume_give_the_crash_free_windows(tmp_path: Any) -> None:
    crash = {"armed": True}

    async def events():
        for i in range(400):
            if i % 10 == 0:
                await asyncio.sleep(0.002)
            yield event(i, i, "json")

    def explode(frame: Any) -> Any:
        if crash["armed"] and 250 in frame.get_column("id").to_list():
            raise RuntimeError("crashed at 250")
        return frame

    def build(into: list[Any]) -> Any:
        def make(worker: Any) -> None:
            worker.dataflow(lambda s: from_aiter(s, events(), time=ColumnTime("ts", lateness=5), decode="json",
                                                 columnar=SCHEMA, resume="skip")
                            .map_batches(explode, schema=SCHEMA)
                            .window(at.Tumbling(25), pl.len().alias("n"), pl.col("id").sum().alias("ids"),
                                    key="page", time="ts")
                            .records().inspect(into.append), name="windows")
        return make

    truth: list[Any] = []
    crash["armed"] = False
    at.execute(build(truth), loop="asyncio")
    seen: list[Any] = []
    crash["armed"] = True
    with pytest.raises(at.DataflowError, match="crashed at 250"):
        at.execute(build(seen), recovery=Recovery(tmp_path / "state", every=20), loop="asyncio")
    assert len(seen) < len(truth)                     # it crashed part of the way
    crash["armed"] = False
    at.execute(build(seen), recovery=Recovery(tmp_path / "state", every=20), loop="asyncio")
    assert {r[:2]: r for r in seen} == {r[:2]: r for r in truth}
    assert len(truth) == 2 * 16


def test_what_a_snapshot_kept_is_sent_again_as_one_batch_per_time() -> None:
    """A columnar source resuming sends the records its snapshot kept (``(time, record)``) again, decoded: one Arrow
    batch per time, earliest first."""
    from aiotimely.columnar import ArrowBatch
    from aiotimely.columnar.decode import BatchMaker
    from aiotimely.connectors.sources import send_again

    kept = [(3, (2, "b", 3)), (1, (0, "a", 1)), (3, (3, "a", 3)), (1, (1, "b", 1))]

    def build(scope: Any) -> Any:
        async def logic(output: Any, cap: Any) -> None:
            send_again(output, cap, kept, BatchMaker(None, pl.Schema(SCHEMA)))
            cap.drop()

        return at.source(scope, "Again", logic).inspect_batch(lambda t, b: seen.append((t, type(b), list(b))))

    seen: list[Any] = []
    run_dataflow(build)
    assert seen == [(1, ArrowBatch, [(0, "a", 1), (1, "b", 1)]), (3, ArrowBatch, [(2, "b", 3), (3, "a", 3)])]
