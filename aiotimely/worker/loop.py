"""Which event loop runs the workers: uvloop when it is installed, asyncio otherwise."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine

__all__ = ["loop_factory", "run"]


def loop_factory(loop: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for ``loop``: ``"auto"`` (uvloop if installed), ``"uvloop"`` or ``"asyncio"``."""
    if loop not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"loop must be 'auto', 'uvloop' or 'asyncio', not {loop!r}")
    if loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if loop == "uvloop":
            raise RuntimeError(
                "loop='uvloop' was asked for, but uvloop is not installed (pip install uvloop)"
            ) from None
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, Any], loop: str = "auto") -> Any:
    """Run ``main`` to completion on a new event loop of the chosen kind."""
    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        return runner.run(main)
