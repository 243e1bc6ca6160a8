"""The book's capture_send: capture a stream and send it, live, to another computation over TCP.

Each worker captures its part of the stream into an ``EventWriter`` connected to
``127.0.0.1:BASE + worker index``, where ``capture_recv.py`` listens. Start both
(in either order) with the same ``AIOTIMELY_SECRET``:

    AIOTIMELY_SECRET=s python examples/capture_recv.py 2 -w 2 &
    AIOTIMELY_SECRET=s python examples/capture_send.py -w 2

Over TLS, give both the same certificates (docs/security.md): ``AIOTIMELY_TLS_CERT``,
``AIOTIMELY_TLS_KEY`` and ``AIOTIMELY_TLS_CA``, which ``EventWriter.connect`` and
``EventReader.accept`` read when not given ``tls=``.
"""

from __future__ import annotations

import os

import aiotimely as at
from aiotimely.connectors import EventWriter

BASE = int(os.environ.get("AIOTIMELY_EVENTS_BASE", "8900"))


async def build(worker: at.Worker) -> None:
    writer = await EventWriter.connect(f"127.0.0.1:{BASE + worker.index}")
    inp = at.InputHandle()
    worker.dataflow(lambda scope: inp.to_stream(scope).map(lambda x: x * x).capture_into(writer))
    for round in range(5):
        inp.send(worker.index * 100 + round)
        inp.advance_to(round + 1)


if __name__ == "__main__":
    at.execute_from_args(build)
