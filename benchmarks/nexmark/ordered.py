"""A frontier-aware operator that applies its inputs time by time, in order, and closes state as time passes:
what winning bids (Q4, Q6) need and neither API has as one operator (docs/nexmark.md, "Library gaps").

:func:`time_ordered` builds it from the record API's ``unary_frontier``/``binary_frontier`` on any stream, of
records or of Arrow batches: the batches of each complete time go to ``logic.apply(time, per_input)`` (times in
order; each input's batches of that time as a list), then ``logic.close(reached)`` gets the least time the
inputs can still bring (``None``: they are done) and closes what that completes. Both return what to send, as
``[(time, batch)]``; a batch is a list of records or a container (an ``ArrowBatch``), sent as it is.
``logic.hold()`` says the earliest time it may still send at (``None``: nothing held); the operator keeps one
capability there, so downstream frontiers wait exactly for what is still open. Sending at a time earlier than
what was applied or held is a ``CapabilityError``.

The state is the logic's own: it is not snapshotted (a recoverable dataflow would need ``keyed_state``).
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence


class OrderedLogic(Protocol):
    def apply(self, time: int, inputs: list[list[Any]]) -> list[tuple[int, Any]]: ...

    def close(self, reached: int | None) -> list[tuple[int, Any]]: ...

    def hold(self) -> int | None: ...


def time_ordered(streams: Sequence[Any], logic: OrderedLogic, *, exchange: Any = None, name: str) -> Any:
    """The output stream of ``logic`` over ``streams`` (one or two ``Stream`` s; ``exchange``: one key function
    per input, or ``None`` for none)."""
    count = len(streams)

    async def run(*ports: Any) -> None:
        inputs, output, cap = ports[:count], ports[count], ports[count + 1]
        pending: dict[int, tuple[Any, list[list[Any]]]] = {}
        held: Any = cap        # one capability at least as early as logic.hold()

        def send(sends: list[tuple[int, Any]]) -> None:
            for time, batch in sends:
                with held.delayed(time) as at:
                    output.session(at).give_container(batch)

        async for _ in inputs[0].activations():
            for i, port in enumerate(inputs):
                for ref, batch in port.drain():
                    entry = pending.get(ref.time)
                    if entry is None:
                        entry = pending[ref.time] = (ref.retain(), [[] for _ in inputs])
                        if held is None or held.time > ref.time:
                            if held is not None:
                                held.drop()
                            held = ref.retain()
                    entry[1][i].append(batch)
            lows = [min(port.frontier) for port in inputs if list(port.frontier)]
            reached = min(lows) if lows else None
            for time in sorted(t for t in pending if reached is None or t < reached):
                at_time, batches = pending.pop(time)
                try:
                    sends = logic.apply(time, batches)
                    for out_time, batch in sends:
                        with at_time.delayed(out_time) as at:
                            output.session(at).give_container(batch)
                    hold = logic.hold()
                    if hold is not None and (held is None or held.time > hold):
                        if held is not None:
                            held.drop()
                        held = at_time.delayed(hold)
                finally:
                    at_time.drop()
            if held is not None:
                send(logic.close(reached))
                hold = min([t for t in (logic.hold(), *pending) if t is not None], default=None)
                if hold is None:
                    held.drop()
                    held = None
                elif hold > held.time:
                    held.downgrade(hold)

    first = streams[0]
    if count == 1:
        return first.unary_frontier(run, exchange=exchange, name=name)
    return first.binary_frontier(streams[1], run, exchange=exchange, name=name)
