"""Windows over event time, closed by the frontier: ``window(stream, Tumbling(10), Agg.count(), key=...)``.

A window ``[start, end)`` is complete once no record that belongs in it can still come: the input frontier has
passed ``end + lateness``. That is exact, not a watermark guess, and it works for partially ordered times.

* **Event time.** By default a record's event time is its dataflow time (inside an iterative scope, the
  outermost ``int`` coordinate of its ``Product`` time; windows are then per round). With ``time=fn`` it is
  ``fn(record)``, an ``int``; with ``timed=True`` the records are timed pairs ``(t, record)`` (see
  ``Stream.timed``), whose ``t`` is never earlier than their batch's time. With ``time="processing"`` it is the
  wall clock (ms) when the operator applies the record; such windows close by the wall clock (a timer task of
  the operator wakes it), and their results go at the dataflow time the input frontier has reached then.
* **Lateness.** A record at dataflow time ``d`` whose window has ``end + lateness <= d`` is *late*: its window
  is (or may already have been) closed. Late records are dropped, counted or sent on a second stream. The rule
  depends on the record and ``d`` only, so results do not depend on how records and frontiers happen to arrive.
* **Output.** A window's result is sent at time ``end + lateness`` (inside an iterative scope: at the record's
  time with its outer coordinate moved there), the first time it is complete: one capability per distinct
  such time, held only while a window waits for it (frontier interest ``IF_CAPABILITY``). With ``early=True``
  each time applied also sends the partial result of every window it changed, at that time; with ``early=N``
  (an int), only at the first time applied in each period of ``N`` units of dataflow time, for every window
  changed since.
* **State.** Open windows are kept with ``keyed_state`` (by the key the input is exchanged by) and applied by
  complete times in order (``time_order``), so snapshots hold them and a resume, on any number of workers,
  gives the crash-free result.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time as _time
from typing import Any, Callable, Sequence

from ...progress import FrontierInterest, Product
from ..builder import OperatorBuilder, check_function
from ..capability import Capability
from ..operator import Logic
from ..ports import OperatorOutput
from ..stream import S
from ..windowing import Aggregation, Sessions, Tumbling, WindowSpec, combine
from .maplike import batch_operator

__all__ = ["window", "LATE_POLICIES"]

IF_CAPABILITY = FrontierInterest.IF_CAPABILITY

LATE_POLICIES = ("drop", "count", "stream")
"""What ``window(late=...)`` does with late records: drop them, send their count per time, or send them."""

PROCESSING = "processing"
"""``window(time=PROCESSING)``: event time is the wall clock (ms) when the operator applies the record."""


def _outermost(time: Any) -> Any:
    while type(time) is Product:
        time = time.outer
    return time


def _with_outer(time: Any, value: int) -> Any:
    if type(time) is Product:
        return Product(_with_outer(time.outer, value), time.inner)
    return value


def _check(spec: Any, aggregation: Any, lateness: Any, late: Any, time: Any, name: str) -> Aggregation:
    if not isinstance(spec, WindowSpec):
        raise TypeError(f"{name}: the windows must be Tumbling(...), Sliding(...) or Sessions(...), not {spec!r}")
    agg = combine(aggregation, name)
    if spec.merging and agg.merge is None:
        raise ValueError(f"{name}: {agg!r} cannot merge two accumulators, and session windows merge: give "
                         "Agg.fold(init, fn, merge=...)")
    if type(lateness) is not int or lateness < 0:
        raise ValueError(f"{name}: lateness must be a non-negative int, not {lateness!r}")
    if late not in LATE_POLICIES:
        raise ValueError(f"{name}: late must be one of {', '.join(map(repr, LATE_POLICIES))}, not {late!r}")
    if not (time is None or callable(time) or time == PROCESSING):
        raise TypeError(f"{name}: time must be a function of the record, {PROCESSING!r} or None, not {time!r}")
    return agg


def _check_functions(scope: Any, key: Any, time: Any, name: str) -> None:
    """The key and event-time functions, as the operator calls them: plain functions of the record."""
    check_function(key, scope, name, "the key", "window(..., key=lambda r: r[0])", optional=True)
    if callable(time):
        check_function(time, scope, name, "the event time", "window(..., time=lambda r: r['ts'])")


def window(stream: S, spec: WindowSpec, aggregation: Aggregation | Sequence[Aggregation], *,
           key: Callable[[Any], Any] | None = None, time: Callable[[Any], int] | str | None = None,
           timed: bool = False, lateness: int = 0, late: str = "drop", early: bool | int = False,
           combine: bool | None = None, name: str = "Window") -> S | tuple[S, S]:
    """Records aggregated per key and window; see the module docstring. Results are ``(key, (start, end),
    value)`` (without ``key=``: ``((start, end), value)``, all on one worker); with ``late="count"`` or
    ``"stream"``, also a stream of late-record counts or of the late records, at their dataflow times. With
    ``early=True``, also each window's partial result whenever a time changes it, at that time (before
    ``end + lateness``: the result at ``end + lateness`` is the final one). ``combine``: see :func:`_combining`."""
    agg = _check(spec, aggregation, lateness, late, time, name)
    _check_functions(stream.scope, key, time, name)
    if type(early) is not bool and (type(early) is not int or early < 1):
        raise ValueError(f"{name}: early must be True, False or a period (a positive int), not {early!r}")
    period = 1 if early is True else int(early)   # early results at most once per period of dataflow time
    last_period: list[Any] = [None]
    processing = time == PROCESSING
    if processing and (timed or lateness):
        raise ValueError(f"{name}: processing-time windows take neither timed=True nor lateness (no record is "
                         "ever late by the wall clock)")
    if timed and time is not None:
        raise ValueError(f"{name}: timed records carry their event time: give timed=True or time=..., not both")
    ttype = stream.scope.ttype
    total = ttype.totally_ordered and type(ttype.minimum) is int
    if type(_outermost(ttype.minimum)) is not int:
        raise ValueError(f"{name}: windows need int dataflow times (or Product times whose outer coordinate is "
                         f"an int), not {ttype.name}")
    if processing and not total:
        raise ValueError(f"{name}: processing-time windows need int dataflow times, not {ttype.name}")
    combining = _combining(combine, stream, spec, agg, key, processing, total, late, name)
    if combining:
        stream = batch_operator(stream, f"{name}.combine", _partials(spec, agg, key, time if callable(time) else None,
                                                                     timed, lateness))
    builder = OperatorBuilder(stream.scope, name)
    if combining:
        route_by: Callable[[Any], Any] = _first
    elif key is None:
        route_by = _zero
    elif timed:
        route_by = lambda pair: key(pair[1])  # noqa: E731
    else:
        route_by = key
    inp = builder.new_input(stream, exchange=route_by, interest=IF_CAPABILITY)
    port, results = builder.new_output()
    late_stream: Any = None
    out = OperatorOutput(port)
    late_out: OperatorOutput | None = None
    if late != "drop":
        late_port, late_stream = builder.new_output()
        late_out = OperatorOutput(late_port)
    op = builder.op
    init, add, merge, result, step = agg.init, agg.add, agg.merge, agg.result, agg.step
    key_of = key
    time_of = None if processing or not callable(time) else time
    L = lateness
    heap_push, heap_pop = heapq.heappush, heapq.heappop

    def constructor(capabilities: list[Capability]) -> Logic:
        initial = capabilities[0]
        for extra in capabilities[1:]:
            extra.drop()
        # key -> {window id: [end, accumulator]}; a window id is its start, and inside an iterative scope
        # (start, the time's other coordinates). Saved in snapshots, moved by key between numbers of workers.
        # Without key=, every record has key 0 (routed to worker 0, as the input is).
        windows: dict[Any, dict[Any, list[Any]]] = inp.keyed_state("windows", dict)
        index: list[tuple[Any, int, Any, Any]] = []     # sessions: (end, n, key, window id), by end
        flat: dict[tuple[Any, Any], list[Any]] = {}     # tumbling, sliding: (key, window id) -> [end, acc]
        members: dict[Any, list[Any]] = {}              # ... window id -> the keys with that window open
        ends: list[tuple[Any, Any]] = []                # ... (end, window id) of every open window id, by end
        caps: dict[Any, list[Any]] = {}                 # output time -> [capability, windows waiting for it]
        seq = itertools.count()
        late_seen: list[Any] = []                       # late records (or their count) of the time applied
        touched: dict[tuple[Any, Any], list[Any]] = {}  # early=True: the windows the time applied changed

        if processing:
            def out_time(wid: Any, end: int) -> Any:
                return end              # a window's capability is found by its end (on the wall clock)
        elif total:
            def out_time(wid: Any, end: int) -> Any:
                return end + L
        else:
            def out_time(wid: Any, end: int) -> Any:
                return _with_outer(wid[1], end + L)

        if total:
            def start_of(wid: Any) -> Any:
                return wid
        else:
            def start_of(wid: Any) -> Any:
                return wid[0]

        def hold(time: Any, cap: Capability) -> None:
            entry = caps.get(time)
            if entry is None:
                caps[time] = [cap.delayed(cap.time if processing else time), 1]
            else:
                entry[1] += 1

        def release(time: Any) -> None:
            entry = caps[time]
            entry[1] -= 1
            if not entry[1]:
                del caps[time]
                entry[0].drop()

        def new_window(k: Any, wid: Any, end: int, cap: Capability) -> list[Any]:
            """Open ``wid`` for key ``k`` (tumbling, sliding): the window id holds a capability while any key
            has it open."""
            w = [end, init()]
            per_key = windows.get(k)
            if per_key is None:
                windows[k] = {wid: w}
            else:
                per_key[wid] = w
            flat[(k, wid)] = w
            keys = members.get(wid)
            if keys is None:
                members[wid] = [k]
                heap_push(ends, (end, wid))
                hold(out_time(wid, end), cap)
            else:
                keys.append(k)
            return w

        resume = op.resume_time()
        for k, per_key in list(windows.items()):        # resumed: wait again for the restored windows
            for wid, w in list(per_key.items()):
                end = w[0]
                t = out_time(wid, end)
                if total and not processing and t < resume:
                    del per_key[wid]                    # sent, and delivered, before the snapshot was complete
                elif spec.merging:
                    heap_push(index, (end, next(seq), k, wid))
                    hold(t, initial)
                else:
                    flat[(k, wid)] = w
                    keys = members.get(wid)
                    if keys is None:
                        members[wid] = [k]
                        heap_push(ends, (end, wid))
                        hold(t, initial)
                    else:
                        keys.append(k)
            if not per_key:
                del windows[k]
        initial.drop()

        def bad_time(records: list[Any], at: Any) -> TypeError:
            for r in records:
                t = r[0] if timed else time_of(r) if time_of is not None else None
                if type(t) is not int:
                    return TypeError(f"the event time of record {r!r:.200} is {t!r}: event times must be ints")
            return TypeError(f"an event time at dataflow time {at!r} is not an int")

        def apply_fixed(cap: Capability, records: list[Any]) -> None:
            """Tumbling and sliding windows: group the batch by (key, window), then one add per group."""
            d = cap.time
            now = _outermost(d)
            rest = None if total else _with_outer(d, 0)
            groups: dict[Any, list[Any]] = {}
            get = groups.get
            if time_of is None and not timed and not processing:   # event time = dataflow time
                starts = spec.starts(now)                            # type: ignore[attr-defined]
                if key_of is None:
                    groups = {(0, s): records for s in starts}
                else:
                    by_key: dict[Any, list[Any]] = {}
                    kget = by_key.get
                    for r in records:
                        k = key_of(r)
                        g = kget(k)
                        if g is None:
                            by_key[k] = [r]
                        else:
                            g.append(r)
                    groups = {(k, s): g for k, g in by_key.items() for s in starts}
            elif processing:
                starts = spec.starts(_time.time_ns() // 1_000_000)  # type: ignore[attr-defined]
                by_key = {}
                for r in records:
                    k = 0 if key_of is None else key_of(r)
                    g = by_key.get(k)
                    if g is None:
                        by_key[k] = [r]
                    else:
                        g.append(r)
                groups = {(k, s): g for k, g in by_key.items() for s in starts}
            elif type(spec) is Tumbling:
                size, offset = spec.size, spec.offset
                if timed:
                    for t, r in records:
                        gk = (0 if key_of is None else key_of(r), t - (t - offset) % size)
                        g = get(gk)
                        if g is None:
                            groups[gk] = [r]
                        else:
                            g.append(r)
                elif key_of is None:
                    assert time_of is not None
                    for r in records:
                        t = time_of(r)
                        gk = (0, t - (t - offset) % size)
                        g = get(gk)
                        if g is None:
                            groups[gk] = [r]
                        else:
                            g.append(r)
                elif step is not None and total and not early:
                    # the fast path (count, sum): a record of a window already open adds itself; the others
                    # (new windows, late records, bad times) are grouped and dealt with below
                    assert time_of is not None
                    flat_get, horizon = flat.get, now - L
                    for r in records:
                        t = time_of(r)
                        gk = (key_of(r), t - (t - offset) % size)
                        w = flat_get(gk)
                        if w is not None and w[0] > horizon:
                            w[1] = step(w[1], r)
                        else:
                            g = get(gk)
                            if g is None:
                                groups[gk] = [r]
                            else:
                                g.append(r)
                else:
                    assert time_of is not None
                    for r in records:
                        t = time_of(r)
                        gk = (key_of(r), t - (t - offset) % size)
                        g = get(gk)
                        if g is None:
                            groups[gk] = [r]
                        else:
                            g.append(r)
            else:
                starts_of, size, limit = spec.starts, spec.size, now - L  # type: ignore[attr-defined]
                for item in records:
                    if timed:
                        t, r = item
                    else:
                        r = item
                        t = time_of(r)  # type: ignore[misc]
                    if type(t) is not int:
                        raise bad_time(records, d)
                    k = 0 if key_of is None else key_of(r)
                    missed = False
                    for s in starts_of(t):
                        if s + size <= limit:     # a window of its that is complete at d: the record is late
                            missed = True         # (once, however many it missed); it joins the others
                            continue
                        gk = (k, s)
                        g = get(gk)
                        if g is None:
                            groups[gk] = [r]
                        else:
                            g.append(r)
                    if missed:
                        late_seen.append(r)
            size = spec.size  # type: ignore[attr-defined]
            horizon = now - L        # windows ending at or before it are complete at d: their records are late
            flat_get = flat.get
            for gk, recs in groups.items():
                s = gk[1]
                if type(s) is not int:
                    raise bad_time(records, d)
                end = s + size
                if end <= horizon:
                    late_seen.extend(recs)
                    continue
                if total:
                    w = flat_get(gk)
                    if w is None:
                        w = new_window(gk[0], s, end, cap)
                else:
                    w = flat_get((gk[0], (s, rest)))
                    if w is None:
                        w = new_window(gk[0], (s, rest), end, cap)
                w[1] = add(w[1], recs)
                if early:
                    touched[(gk[0], s if total else (s, rest))] = w

        def apply_sessions(cap: Capability, records: list[Any]) -> None:
            """Session windows: per key, the batch's records in runs (sorted by time), each merged with the open
            sessions it overlaps."""
            assert isinstance(spec, Sessions)
            d = cap.time
            now = _outermost(d)
            rest = None if total else _with_outer(d, 0)
            gap = spec.gap
            by_key: dict[Any, list[tuple[int, Any]]] = {}
            stamp = _time.time_ns() // 1_000_000 if processing else None
            for item in records:
                if timed:
                    t, r = item
                elif time_of is not None:
                    r = item
                    t = time_of(r)
                else:
                    r, t = item, stamp if processing else now
                if type(t) is not int:
                    raise bad_time(records, d)
                k = 0 if key_of is None else key_of(r)
                pairs = by_key.get(k)
                if pairs is None:
                    by_key[k] = [(t, r)]
                else:
                    pairs.append((t, r))
            horizon = now - L
            for k, pairs in by_key.items():
                pairs.sort(key=_first)
                runs: list[list[Any]] = []
                for t, r in pairs:
                    if t + gap <= horizon:           # its own session [t, t + gap) is complete at d: late
                        late_seen.append(r)
                    elif runs and t < runs[-1][1]:
                        run = runs[-1]
                        run[1] = max(run[1], t + gap)
                        run[2].append(r)
                    else:
                        runs.append([t, t + gap, [r]])
                if not runs:
                    continue
                per_key = windows.get(k)
                if per_key is None:
                    per_key = windows[k] = {}
                for s, e, recs in runs:
                    olds = sorted((start_of(wid), wid) for wid, w in per_key.items()
                                  if (total or wid[1] == rest) and start_of(wid) < e and s < w[0]
                                  and w[0] > horizon)
                    acc: Any = None
                    for ws, wid in olds:                   # the open sessions it overlaps, earliest first
                        we, wacc = per_key.pop(wid)
                        s, e = min(s, ws), max(e, we)
                        acc = wacc if acc is None else merge(acc, wacc)  # type: ignore[misc]
                        release(out_time(wid, we))
                    acc = add(init() if acc is None else acc, recs)
                    wid = s if total else (s, rest)
                    per_key[wid] = [e, acc]
                    if early:
                        touched[(k, wid)] = per_key[wid]
                    heap_push(index, (e, next(seq), k, wid))
                    hold(out_time(wid, e), cap)

        def apply_partials(cap: Capability, partials: list[Any]) -> None:
            """Combined windows: each ``(key, start, accumulator)`` merged into its window (the combiner sends
            none of a window complete at this time: it drops late records, as ``late="drop"`` says)."""
            size = spec.size  # type: ignore[attr-defined]
            flat_get = flat.get
            for k, s, acc in partials:
                w = flat_get((k, s))
                if w is None:
                    w = new_window(k, s, s + size, cap)
                w[1] = merge(w[1], acc)  # type: ignore[misc]
                if early:
                    touched[(k, s)] = w

        apply = apply_partials if combining else apply_sessions if spec.merging else apply_fixed

        def complete(entries: list[Any], frontier: list[Any], end_at: int) -> list[Any]:
            """Take the entries (heaps by end) of the windows the frontier has passed, earliest first."""
            if total:
                h = (_time.time_ns() // 1_000_000 if processing else frontier[0]) if frontier else None
                due = []
                while entries and (h is None or entries[0][0] + L <= h):
                    due.append(heap_pop(entries))
                return due
            due, kept = [], []
            for entry in entries:
                end, wid = entry[0], entry[end_at]
                if frontier and inp.less_equal(_with_outer(wid[1], end + L - 1)):
                    kept.append(entry)
                else:
                    due.append(entry)
            if due:
                entries[:] = kept
                heapq.heapify(entries)
                due.sort()
            return due

        def send(sending: dict[Any, list[Any]], counts: dict[Any, int]) -> None:
            for t in sorted(sending):
                out.session(caps[t][0]).give_many(sending[t])
                for _ in range(counts[t]):
                    release(t)

        def close_fixed(frontier: list[Any]) -> None:
            """Send and forget every window the frontier has passed (all of them once the input is done)."""
            sending: dict[Any, list[Any]] = {}
            counts: dict[Any, int] = {}
            for end, wid in complete(ends, frontier, 1):
                t = out_time(wid, end)
                span = (start_of(wid), end)
                batch = sending.setdefault(t, [])
                counts[t] = counts.get(t, 0) + 1
                for k in members.pop(wid):
                    per_key = windows[k]
                    w = per_key.pop(wid)
                    if not per_key:
                        del windows[k]
                    del flat[(k, wid)]
                    batch.append((span, result(w[1])) if key_of is None else (k, span, result(w[1])))
            send(sending, counts)

        def close_sessions(frontier: list[Any]) -> None:
            sending: dict[Any, list[Any]] = {}
            counts: dict[Any, int] = {}
            for end, _, k, wid in complete(index, frontier, 3):
                per_key = windows.get(k)
                w = per_key.get(wid) if per_key is not None else None
                if w is None or w[0] != end:
                    continue                              # merged into another session, or grown
                del per_key[wid]                          # type: ignore[union-attr]
                if not per_key:
                    del windows[k]
                t = out_time(wid, end)
                span = (start_of(wid), end)
                sending.setdefault(t, []).append((span, result(w[1])) if key_of is None
                                                 else (k, span, result(w[1])))
                counts[t] = counts.get(t, 0) + 1
            send(sending, counts)

        close = close_sessions if spec.merging else close_fixed

        order = inp.time_order()
        activator = op.activator() if processing else None
        timer: list[Any] = [None, None]      # the wall-clock deadline (ms) the operator will be woken at, its task

        def wake_at(deadline: int) -> None:
            """Be activated when the wall clock reaches ``deadline`` (ms), the end of the first open window."""
            if timer[0] is not None and timer[0] <= deadline and not timer[1].done():
                return
            if timer[1] is not None:
                timer[1].cancel()
            timer[0] = deadline
            timer[1] = op.start_soon(_wake(deadline, activator), name="the window timer")

        def run() -> None:
            for cap, records in order.ready():
                op.current_time = cap.time          # (an error names the time being applied)
                apply(cap, records)
                if touched and (period == 1 or _outermost(cap.time) // period != last_period[0]):
                    # early results: each window changed since the last ones, as it stands, at this time
                    last_period[0] = _outermost(cap.time) // period
                    partial = [(k, wid, w) for (k, wid), w in touched.items()
                               if windows.get(k, {}).get(wid) is w]   # (not merged into another session since)
                    out.session(cap).give_many([((start_of(wid), w[0]), result(w[1])) if key_of is None
                                                else (k, (start_of(wid), w[0]), result(w[1]))
                                                for k, wid, w in partial])
                    touched.clear()
                if late_seen and late_out is not None:
                    with cap.delayed(cap.time, 1) as late_cap:
                        late_out.session(late_cap).give_many(late_seen if late == "stream" else [len(late_seen)])
                late_seen.clear()
            frontier = list(inp.frontier)
            close(frontier)
            if processing and (index or ends):
                if frontier:    # results go at the latest time they can: the input frontier, when they close
                    for entry in caps.values():
                        if entry[0].time < frontier[0]:
                            entry[0].downgrade(frontier[0])
                wake_at((index or ends)[0][0])

        return run

    builder.build(constructor)
    if late_out is not None:
        return results, late_stream
    return results  # type: ignore[no-any-return]


def _combining(combine: bool | None, stream: Any, spec: WindowSpec, agg: Aggregation, key: Any, processing: bool,
               total: bool, late: str, name: str) -> bool:
    """Whether each worker folds its records into one accumulator per key and window of each batch before the
    exchange (a combiner, as a map-side aggregation: fewer, smaller messages, and without ``key=`` the work is no
    longer all on one worker). It needs fixed windows (not sessions), int times, event times that are not the wall
    clock, late records dropped (a combined record cannot be reported late), and an aggregation that merges.
    ``combine=None`` (the default) does it where it can without ``key=`` and with a built-in aggregation other
    than ``fold`` (whose accumulators are the user's, and may not cross processes); ``True`` asks for it with any
    key and aggregation that merges (an error where it cannot be done); ``False`` never. One worker never does."""
    if combine is not None and type(combine) is not bool:
        raise TypeError(f"{name}: combine must be True, False or None, not {combine!r}")
    why = ("session windows merge as records come" if spec.merging else
           "processing-time windows take the wall clock where the window is" if processing else
           "it needs int dataflow times" if not total else
           f"a combined record cannot be reported late (late={late!r})" if late != "drop" else
           f"{agg!r} cannot merge two accumulators (give Agg.fold(..., merge=...))" if agg.merge is None else None)
    if combine is True and why is not None:
        raise ValueError(f"{name}: cannot combine before the exchange: {why}")
    if why is not None or combine is False or stream.scope.worker.peers == 1:
        return False
    return combine is True or (key is None and agg.portable)


def _partials(spec: WindowSpec, agg: Aggregation, key: Callable[[Any], Any] | None,
              time_of: Callable[[Any], Any] | None, timed: bool, lateness: int) -> Callable[[Any, list[Any]], Any]:
    """The combiner: a batch at dataflow time ``d`` as ``(key, window start, accumulator)`` per key and window,
    leaving out windows complete at ``d`` (their records are late, and dropped)."""
    starts_of, size = spec.starts, spec.size  # type: ignore[attr-defined]
    init, add = agg.init, agg.add

    def partials(d: int, records: list[Any]) -> list[Any]:
        horizon = d - lateness
        groups: dict[tuple[Any, int], list[Any]] = {}
        get = groups.get
        for item in records:
            if timed:
                t, r = item
            else:
                r = item
                t = d if time_of is None else time_of(r)
            if type(t) is not int:
                raise TypeError(f"the event time of record {r!r:.200} is {t!r}: event times must be ints")
            k = 0 if key is None else key(r)
            for s in starts_of(t):
                if s + size > horizon:
                    g = get((k, s))
                    if g is None:
                        groups[(k, s)] = [r]
                    else:
                        g.append(r)
        return [(k, s, add(init(), recs)) for (k, s), recs in groups.items()]

    return partials


async def _wake(deadline: int, activator: Any) -> None:
    await asyncio.sleep(max(0.0, deadline / 1000 - _time.time()) + 0.001)
    activator.activate()


def _zero(record: Any) -> int:
    return 0


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]

