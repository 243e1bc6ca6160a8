"""Benchmark ``exchange``: records per second from one process to another, against raw asyncio TCP.

aiotimely: 2 processes x 1 worker; worker 0 sends 2,000,000 ``(str, int)`` records
(1,000-record batches: the words of the corpus's first line, each with a number; a
worker round every 50 batches), exchanged to worker 1, which counts them; timed on
worker 0 from the first record to the dataflow's completion (which needs worker 1's
acknowledgement). Peer, in the same run: :mod:`benchmarks.peers.tcp_raw` — 2,000
frames of the same 1,000 records, msgpack-packed and unpacked over asyncio streams
between two processes. Both on uvloop (when installed) and on asyncio.

    python -m benchmarks.exchange [--quick] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import aiotimely as at

from .common import ROOT, command_line, have, run_peer, save, stats, table
from .peers.tcp_raw import records as frame_records

RECORDS = 2_000_000


async def build(worker: at.Worker) -> None:
    """Worker 0 sends; worker 1 receives. Prints one JSON line from worker 0."""
    n = int(os.environ.get("EXCHANGE_RECORDS", RECORDS))
    batch = frame_records()
    inp = at.InputHandle()
    received = [0]
    worker.dataflow(lambda s: inp.to_stream(s).exchange(lambda r: 1)
                    .inspect_batch(lambda _t, xs: received.__setitem__(0, received[0] + len(xs))))
    await worker.step()
    start = time.perf_counter()
    cpu0 = time.process_time()
    if worker.index == 0:
        for i in range(n // 1000):
            inp.send_batch(batch)
            if i % 50 == 49:          # a round per 50,000 records, as a busy source would
                await worker.step()
    inp.close()
    await worker.step_until_done()
    elapsed = time.perf_counter() - start
    if worker.index == 0:
        print(json.dumps({"seconds": elapsed, "records": n, "cpu": time.process_time() - cpu0}), flush=True)
    else:
        assert received[0] == n, received


def aiotimely_exchange(n: int, loop: str) -> tuple[float, int]:
    from aiotimely.launch import free_ports

    ports = free_ports(2)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as hosts:
        hosts.write("".join(f"127.0.0.1:{p}\n" for p in ports))
    env = {**os.environ, "AIOTIMELY_SECRET": "bench", "EXCHANGE_RECORDS": str(n), "AIOTIMELY_LOOP": loop}
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.exchange", "--worker", "-n", "2", "-p", str(p),
                               "--hostfile", hosts.name], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    os.unlink(hosts.name)
    for p, (_out, err) in zip(procs, outs, strict=True):
        if p.returncode != 0:
            raise RuntimeError(err[-2000:])
    result = json.loads(outs[0][0].splitlines()[-1])
    return result["seconds"], result["records"]


def tcp_raw(loop: str, frames: int, rounds: int) -> dict[str, Any]:
    """The peer: raw asyncio TCP + msgpack, ``rounds`` rounds of ``frames`` frames of 1,000 records."""
    report: dict[str, Any] = run_peer(["-m", "benchmarks.peers.tcp_raw", "--loop", loop, "--frames", str(frames),
                                       "--rounds", str(rounds)])[-1]
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = command_line(__doc__, "100,000 records, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.worker:
        at.execute_from_args(build, rest, loop=os.environ.get("AIOTIMELY_LOOP", "auto"))
        return {}
    n = 100_000 if args.quick else RECORDS
    repeats = 1 if args.quick else args.repeats
    loops = ["uvloop", "asyncio"] if have("uvloop") else ["asyncio"]
    rows, results = [], {"records": n, "runs": {}}
    for loop in loops:
        ours = [aiotimely_exchange(n, loop)[0] for _ in range(repeats)]
        s = stats(ours)
        rows.append((f"aiotimely 2 processes ({loop})", s, "exchange to the other process, to completion"))
        results["runs"][f"aiotimely ({loop})"] = s
        peer = tcp_raw(loop, n // 1000, repeats)
        ps = stats(peer["round_s"])
        rows.append((f"raw asyncio TCP + msgpack ({loop})", ps, "benchmarks.peers.tcp_raw"))
        results["runs"][f"raw ({loop})"] = ps
    baseline = f"raw asyncio TCP + msgpack ({loops[0]})"
    print(table(f"exchange: {n:,} (str, int) records between 2 processes; median of {repeats}", rows, n,
                "records/s", baseline if any(r[0] == baseline for r in rows) else rows[0][0]))
    for loop in loops:
        if f"raw ({loop})" in results["runs"]:
            share = results["runs"][f"raw ({loop})"]["median"] / results["runs"][f"aiotimely ({loop})"]["median"]
            results[f"share_of_raw_{loop}"] = share
            print(f"aiotimely reaches {share:.0%} of raw TCP + msgpack on {loop}")
    if not args.quick:
        print(f"wrote {save('exchange', results)}")
    return results


if __name__ == "__main__":
    main()
