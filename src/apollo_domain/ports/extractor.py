"""The entity extractor port: the entities a text mentions and the relations it states."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..entities import Extraction


@runtime_checkable
class EntityExtractor(Protocol):
    """Finds the entities a text mentions and the typed relations it states between them.

    ``extract`` returns an :class:`~apollo_domain.entities.Extraction`: entity mentions in
    order of appearance (names as written; kinds optional) and typed edges
    ``(src, relation, dst)`` named by those mentions. Raises only :class:`ApolloError`
    types; ingest treats a failure as "no entities", never as a failed ingest.
    """

    async def extract(self, text: str) -> Extraction: ...


__all__ = ["EntityExtractor"]
