"""Keyed operators over streams of ``(key, value)`` pairs: per-key state, and per-key results per time.

Each operator routes its input by key itself (an exchange by the pair's key, with the stable
:func:`~aiotimely.comm.routing.route`), so a key's records meet on one worker, wherever they came from.

* ``stateful_map``, ``state_machine`` and ``distinct`` keep state per key across times: they keep it with
  ``keyed_state`` (saved in snapshots, moved by key on a resume with another number of workers) and apply
  complete times in order (``time_order``), so results do not depend on how records or frontiers arrive.
* ``aggregate``, ``fold`` and ``reduce`` keep a partial result per key for each time not yet complete, and
  emit once the time is complete; like ``accumulate``, they keep nothing across times (a resumed run
  computes those partial results again).

Times complete by the input frontier's partial order, so every operator here works inside an iterative
scope (``Product`` times); times are applied in the total order that extends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from ...errors import RecoveryError
from ...progress import FrontierInterest
from ..builder import OperatorBuilder, check_function
from ..capability import Capability
from ..operator import Logic
from ..stream import S, StreamCore

if TYPE_CHECKING:
    from ..ports import InputPort

__all__ = ["pair", "pair_key", "keyed_input", "stateful_map", "state_machine", "distinct", "aggregate", "fold",
           "reduce"]

IF_CAPABILITY = FrontierInterest.IF_CAPABILITY

_ABSENT = object()
"""No partial result yet (``reduce``: the key's first value starts it)."""


def pair(record: Any, method: str) -> tuple[Any, Any]:
    """``record`` as ``(key, value)``; anything but a pair is refused, naming ``method``."""
    if isinstance(record, (tuple, list)) and len(record) == 2:
        return record[0], record[1]
    raise TypeError(f"{method} takes a keyed stream, of (key, value) pairs; got {record!r:.200}")


def pair_key(method: str) -> Callable[[Any], Any]:
    """The exchange key of a keyed stream: the key of each ``(key, value)`` pair."""

    def key(record: Any) -> Any:
        if type(record) is tuple and len(record) == 2:
            return record[0]
        return pair(record, method)[0]

    return key


def keyed_input(builder: OperatorBuilder, stream: StreamCore, method: str,
                interest: FrontierInterest = IF_CAPABILITY) -> InputPort:
    """An input of ``builder`` fed by ``stream``, a keyed stream, exchanged by key."""
    return builder.new_input(stream, exchange=pair_key(method), interest=interest)


Step = Callable[[dict[Any, Any], Any, Any, list[Any]], None]
"""Applies one record: ``step(states, key, value, sent)`` changes ``states`` and appends what to emit."""


def _per_key(stream: S, name: str, method: str, step: Step) -> S:
    """An operator that keeps a value per key (``keyed_state``) and applies complete times in order, record by
    record, emitting what ``step`` appends at the record's time."""
    scope = stream.scope
    if scope.dataflow.snapshotter is not None and not scope.ttype.totally_ordered:
        raise RecoveryError(f"{method} keeps state by key, and {scope.describe()} has {scope.ttype.name} times: in a "
                            "recoverable dataflow, kept state is cut at the root's int times, so keep it outside "
                            "iterative scopes (a region is fine)")
    builder = OperatorBuilder(scope, name)
    inp = keyed_input(builder, stream, method)
    out, result = builder.new_output()
    op = builder.op

    def constructor(capabilities: list[Capability]) -> Logic:
        capabilities[0].drop()
        states: dict[Any, Any] = inp.keyed_state("states", dict)
        order = inp.time_order()

        def run() -> None:
            for cap, records in order.ready():
                time = op.current_time = cap.time   # errors name the time being applied
                sent: list[Any] = []
                for record in records:
                    if type(record) is not tuple or len(record) != 2:
                        record = pair(record, method)
                    step(states, record[0], record[1], sent)
                if sent:
                    out.push(time, sent)

        return run

    builder.build(constructor)
    return result  # type: ignore[no-any-return]


def _two(returned: Any, method: str, what: str, key: Any) -> tuple[Any, Any]:
    """A user function's ``(a, b)`` result, or an error saying what it should have returned."""
    if isinstance(returned, (tuple, list)) and len(returned) == 2:
        return returned[0], returned[1]
    raise TypeError(f"{method}: the function must return {what}; it returned {returned!r:.200} for key {key!r:.100}")


def stateful_map(stream: S, fn: Callable[[Any, Any], tuple[Any, Any]]) -> S:
    method = "stateful_map"
    check_function(fn, stream.scope, "StatefulMap", "the function",
                   "stateful_map(lambda total, v: ((total or 0) + v, (total or 0) + v))")

    def step(states: dict[Any, Any], key: Any, value: Any, sent: list[Any]) -> None:
        state, output = _two(fn(states.get(key), value), method, "(new state or None, output)", key)
        if state is None:
            states.pop(key, None)
        else:
            states[key] = state
        sent.append((key, output))

    return _per_key(stream, "StatefulMap", method, step)


def state_machine(stream: S, fn: Callable[[Any, Any, Any], tuple[Any, Iterable[Any]]],
                  init: Callable[[], Any] | None = None) -> S:
    method = "state_machine"
    check_function(fn, stream.scope, "StateMachine", "the function",
                   "state_machine(lambda k, v, s: ((s or 0) + v, [(k, (s or 0) + v)]))")
    check_function(init, stream.scope, "StateMachine", "init", "init=dict", optional=True)

    def step(states: dict[Any, Any], key: Any, value: Any, sent: list[Any]) -> None:
        state = states.get(key, _ABSENT)
        if state is _ABSENT:
            state = init() if init is not None else None
        state, outputs = _two(fn(key, value, state), method, "(new state or None, outputs)", key)
        if state is None:
            states.pop(key, None)
        else:
            states[key] = state
        sent.extend(outputs)

    return _per_key(stream, "StateMachine", method, step)


def distinct(stream: S, by: Callable[[Any], Any] | None = None) -> S:
    method = "distinct"
    check_function(by, stream.scope, "Distinct", "by", "distinct(by=lambda v: v['id'])", optional=True)

    def step(states: dict[Any, Any], key: Any, value: Any, sent: list[Any]) -> None:
        seen = states.get(key)
        what = value if by is None else by(value)
        if seen is None:
            states[key] = {what}
        elif what in seen:
            return
        else:
            seen.add(what)
        sent.append((key, value))

    return _per_key(stream, "Distinct", method, step)


def aggregate(stream: S, fold: Callable[[Any, Any, Any], Any], emit: Callable[[Any, Any], Any],
              init: Callable[[], Any] | None = None, *, name: str = "Aggregate", method: str = "aggregate") -> S:
    """Per key and time: ``agg = fold(key, value, agg)`` from ``init()`` (or ``None``) as records arrive;
    ``emit(key, agg)`` once the time is complete (timely's ``Aggregate``)."""
    scope = stream.scope
    if method == "aggregate":   # (fold and reduce check their own functions, and give their own here)
        check_function(fold, scope, name, "fold",
                       "aggregate(lambda k, v, agg: (agg or 0) + v, lambda k, agg: (k, agg))")
        check_function(emit, scope, name, "emit", "lambda k, agg: (k, agg)")
        check_function(init, scope, name, "init", "init=list", optional=True)
    builder = OperatorBuilder(stream.scope, name)
    inp = keyed_input(builder, stream, method)
    out, result = builder.new_output()
    op = builder.op
    pending: dict[Any, tuple[Capability, dict[Any, Any]]] = {}   # time -> (capability, key -> partial result)

    def run() -> None:
        for ref, batch in inp.drain():
            entry = pending.get(ref.time)
            if entry is None:
                entry = pending[ref.time] = (ref.retain(), {})
            aggs = entry[1]
            for record in batch:
                if type(record) is not tuple or len(record) != 2:
                    record = pair(record, method)
                key, value = record
                agg = aggs.get(key, _ABSENT)
                if agg is _ABSENT:
                    agg = init() if init is not None else None
                aggs[key] = fold(key, value, agg)
        if pending:
            for time in sorted(t for t in pending if not inp.less_equal(t)):
                cap, aggs = pending.pop(time)
                op.current_time = time
                sent = [emit(key, agg) for key, agg in aggs.items()]
                if sent:
                    out.push(time, sent)
                cap.drop()

    builder.build_function(run)
    return result  # type: ignore[no-any-return]


def fold(stream: S, init: Callable[[], Any], fn: Callable[[Any, Any], Any]) -> S:
    check_function(init, stream.scope, "Fold", "init (it makes a new accumulator)", "list or (lambda: 0)")
    check_function(fn, stream.scope, "Fold", "the function", "fold(list, lambda acc, v: acc + [v])")
    return aggregate(stream, lambda _key, value, acc: fn(acc, value), _keyed, init, name="Fold", method="fold")


def reduce(stream: S, fn: Callable[[Any, Any], Any]) -> S:
    check_function(fn, stream.scope, "Reduce", "the function", "reduce(operator.add)")

    def step(_key: Any, value: Any, acc: Any) -> Any:
        return value if acc is _ABSENT else fn(acc, value)

    return aggregate(stream, step, _keyed, _absent, name="Reduce", method="reduce")


def _keyed(key: Any, agg: Any) -> tuple[Any, Any]:
    return key, agg


def _absent() -> Any:
    return _ABSENT
