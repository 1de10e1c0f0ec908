"""The curated public surface of the domain package."""

from __future__ import annotations

import pytest

import apollo_domain
from apollo_domain import errors

REQUIRED = [
    "Entry",
    "ContentType",
    "Status",
    "AccessScope",
    "RelationType",
    "Principal",
    "ConfidencePolicy",
    "meets_write_gate",
    *errors.__all__,
]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_names_are_exported(name: str) -> None:
    """The model, the policy, the write gate and every error are part of __all__."""
    assert name in apollo_domain.__all__


@pytest.mark.parametrize("name", apollo_domain.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    """Each name in __all__ is an attribute of the package."""
    assert hasattr(apollo_domain, name)


def test_exports_are_listed_once() -> None:
    """__all__ has no duplicates."""
    assert len(set(apollo_domain.__all__)) == len(apollo_domain.__all__)


def test_star_import_gives_exactly_the_exports() -> None:
    """`from apollo_domain import *` binds every name of __all__ and nothing else."""
    namespace: dict[str, object] = {}
    exec("from apollo_domain import *", namespace)
    del namespace["__builtins__"]
    assert sorted(apollo_domain.__all__) == sorted(namespace)


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_an_apollo_error(name: str) -> None:
    """One hierarchy: every exported error derives from ApolloError."""
    assert issubclass(getattr(apollo_domain, name), apollo_domain.ApolloError)


def test_the_exported_write_gate_is_the_policy_gate() -> None:
    """The package-level meets_write_gate agrees with the default policy."""
    policy = apollo_domain.ConfidencePolicy()
    cases = [(0.61, 0.31), (0.6, 0.9), (0.9, 0.3)]
    expected = [policy.meets_write_gate(c, n) for c, n in cases]
    assert expected == [apollo_domain.meets_write_gate(c, n) for c, n in cases]
