"""The library surface: ``Apollo`` and its clients (in process, blocking, over the bus)."""

from typing import TYPE_CHECKING

from .apollo import Apollo, Health
from .blocking import BlockingApollo, BlockingClient
from .client import Client, KnowledgeClient
from .remote import RemoteClient, open_client_mode

if TYPE_CHECKING:  # mypy proves both clients keep the one protocol's signatures

    def _conforms(client: Client, remote: RemoteClient) -> tuple[KnowledgeClient, ...]:
        return client, remote


__all__ = [
    "Apollo",
    "BlockingApollo",
    "BlockingClient",
    "Client",
    "Health",
    "KnowledgeClient",
    "RemoteClient",
    "open_client_mode",
]
