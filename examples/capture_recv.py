"""The book's capture_recv: replay, live, the streams that ``capture_send.py`` captures.

``SOURCE_PEERS`` is the number of sending workers; receiving worker ``w`` accepts
the senders ``i`` with ``i % peers == w`` on ``127.0.0.1:BASE + i`` and replays them,
records and frontier both.

    AIOTIMELY_SECRET=s python examples/capture_recv.py SOURCE_PEERS -w 2

With ``AIOTIMELY_TLS_CERT``/``_KEY``/``_CA`` set (as for ``capture_send.py``) it accepts
only TLS senders whose certificate that CA signed.
"""

from __future__ import annotations

import asyncio
import functools
import os

import aiotimely as at
from aiotimely.connectors import EventReader
from aiotimely.execution import parse_args

BASE = int(os.environ.get("AIOTIMELY_EVENTS_BASE", "8900"))


async def build(worker: at.Worker, source_peers: int) -> None:
    mine = [i for i in range(source_peers) if i % worker.peers == worker.index]
    streams = await asyncio.gather(*(EventReader.accept(f"127.0.0.1:{BASE + i}") for i in mine))
    probe = worker.dataflow(
        lambda scope: at.replay(streams, scope, shared=False)
        .inspect_time(lambda t, x: print(f"replayed {x} at time {t}", flush=True))
        .probe()
    )
    await worker.step_until_done()
    print(f"worker {worker.index} done: {probe.done()}", flush=True)


def main(argv: list[str] | None = None) -> None:
    _, rest = parse_args(argv)
    source_peers = int(rest[0]) if rest else 1
    at.execute_from_args(functools.partial(build, source_peers=source_peers), argv)


if __name__ == "__main__":
    main()
