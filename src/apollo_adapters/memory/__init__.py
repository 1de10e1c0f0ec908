"""In-memory adapters of every store port: exact, transactional, fast enough to simulate."""

from .store import PARTS, InMemoryIdentityDirectory, InMemoryStore, InMemoryUnitOfWork

__all__ = ["PARTS", "InMemoryIdentityDirectory", "InMemoryStore", "InMemoryUnitOfWork"]
