"""The windows benchmark's workload, made here: the events, the plain-Python tables, and their checksum.

Event ``i`` of ``n`` (``random.Random(42)``, drawn in this order) is ``(key, event_time_ms, value)`` with
``key = "k%03d" % randrange(1000)``, ``event_time_ms = i + randint(0, 50)`` (bounded disorder) and
``value = randint(1, 100)``: the anchors' workload (``win_plain.py``), the same events on every machine.
The result is a table ``(key, window_start) -> (count, sum of value)`` over tumbling 10 s windows of
event time; equal checksums mean equal tables.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

SEED = 42
N_EVENTS = 2_000_000
N_KEYS = 1000
MAX_DISORDER_MS = 50
WINDOW_MS = 10_000
LATENESS_MS = 100

Event = tuple[str, int, int]
Table = dict[tuple[str, int], tuple[int, int]]


def gen_events(n: int = N_EVENTS, nkeys: int = N_KEYS, seed: int = SEED) -> list[Event]:
    rng = random.Random(seed)
    keys = ["k%03d" % j for j in range(nkeys)]
    rr, ri = rng.randrange, rng.randint
    return [(keys[rr(nkeys)], i + ri(0, MAX_DISORDER_MS), ri(1, 100)) for i in range(n)]


def table_checksum(table: Table) -> dict[str, Any]:
    """Rows, total count, total sum and a sha256 prefix of the sorted ``key,start,count,sum`` lines."""
    h = hashlib.sha256()
    total_count = total_sum = 0
    for (k, w), (c, s) in sorted(table.items()):
        h.update(f"{k},{w},{c},{s}\n".encode())
        total_count += c
        total_sum += s
    return {"rows": len(table), "count": total_count, "sum": total_sum, "sha256": h.hexdigest()[:16]}


def agg_dict(events: list[Event]) -> tuple[Table, int]:
    """The floor: one loop into one dict, no window ever closed on the way (and nothing late)."""
    d: dict[tuple[str, int], list[int]] = {}
    get = d.get
    for k, t, v in events:
        kw = (k, t - t % WINDOW_MS)
        acc = get(kw)
        if acc is None:
            d[kw] = [1, v]
        else:
            acc[0] += 1
            acc[1] += v
    return {kw: (a[0], a[1]) for kw, a in d.items()}, 0


def agg_stream(events: list[Event]) -> tuple[Table, int]:
    """The same loop closing each window once the watermark (the latest event time - 100 ms) passes its end,
    as an engine must; events of a closed window are counted late (returned with the table)."""
    out: Table = {}
    open_windows: dict[int, dict[str, list[int]]] = {}
    oldest: int | None = None            # the smallest open window start
    closed_below = -1                    # every window start <= this is closed
    max_t = -1
    late = 0
    for k, t, v in events:
        w = t - t % WINDOW_MS
        if w <= closed_below:
            late += 1
            continue
        keys = open_windows.get(w)
        if keys is None:
            keys = open_windows[w] = {}
            if oldest is None or w < oldest:
                oldest = w
        acc = keys.get(k)
        if acc is None:
            keys[k] = [1, v]
        else:
            acc[0] += 1
            acc[1] += v
        if t > max_t:
            max_t = t
            watermark = t - LATENESS_MS
            while oldest is not None and oldest + WINDOW_MS <= watermark:
                for key, a in open_windows.pop(oldest).items():
                    out[(key, oldest)] = (a[0], a[1])
                closed_below = oldest
                oldest = min(open_windows) if open_windows else None
    for w in sorted(open_windows):       # the end of the input closes the rest
        for key, a in open_windows[w].items():
            out[(key, w)] = (a[0], a[1])
    return out, late
