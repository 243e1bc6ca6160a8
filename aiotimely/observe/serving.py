"""What a server for looking inside a process gives back: where it listens and how to stop it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

__all__ = ["Served"]


@dataclass(frozen=True, slots=True)
class Served:
    """A running server of this process (the metrics endpoint, the live page): ``url`` is what to open;
    ``await served.close()`` stops it."""

    url: str
    _close: Callable[[], Awaitable[None]]

    async def close(self) -> None:
        """Stop serving and wait until the listening socket is closed."""
        await self._close()
