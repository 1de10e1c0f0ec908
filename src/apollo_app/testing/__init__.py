"""Test suites Apollo ships for the adapters others write: :class:`StoreContract`, the
Store port's contract, which Apollo's own stores pass and a store of yours can run in its
own test session (:mod:`apollo_app.testing.store_contract`).

Needs pytest and pytest-asyncio (``pip install "apollo-knowledge[testing]"``); nothing
else in :mod:`apollo_app` imports this package.
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401
    import pytest_asyncio  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without pytest
    raise ImportError(
        "apollo_app.testing needs pytest and pytest-asyncio:"
        ' pip install "apollo-knowledge[testing]"'
    ) from exc

from .store_contract import StoreContract

__all__ = ["StoreContract"]
