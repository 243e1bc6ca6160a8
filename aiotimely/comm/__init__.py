"""Layer 4: how workers reach each other. In-process mailboxes now; the TCP cluster next."""

from .local import LocalFabric as LocalFabric
from .local import Mailbox as Mailbox
from .routing import route as route

__all__ = ["LocalFabric", "Mailbox", "route"]
