"""Dataflow pieces the observe tests share."""

from __future__ import annotations

from typing import Any

import aiotimely as at


def named(stream: at.Stream, name: str) -> at.Stream:
    """``stream`` through an operator called ``name`` that passes every record on."""

    async def forward(input: Any, output: Any, cap: Any) -> None:
        cap.drop()
        async for _ in input.activations():
            for time, batch in input.drain():
                output.session(time).give_many(batch)

    result: at.Stream = stream.unary(forward, name=name)
    return result
