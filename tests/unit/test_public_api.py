"""The curated public surfaces: every package's ``__all__`` matches what it defines.

Checked from the package's side, not from ``__all__``'s: a public name bound in a
package ``__init__`` (submodules aside) that ``__all__`` leaves out is as much a defect as
a name ``__all__`` lists that the package does not have.
"""

import __future__

import importlib
import inspect
import pkgutil
import re
import types

import pytest

import apollo_adapters
import apollo_app
import apollo_domain
from apollo_app import Client
from apollo_domain import errors
from tests.docs_pages import page


def packages_with_all() -> list[str]:
    """``apollo_app``, ``apollo_domain`` and every package below the three roots that
    declares ``__all__`` (each ``apollo_adapters.*`` adapter package among them)."""
    names = []
    for root in (apollo_app, apollo_domain, apollo_adapters):
        found = [root.__name__]
        found += [
            info.name
            for info in pkgutil.walk_packages(root.__path__, f"{root.__name__}.")
            if info.ispkg
        ]
        names += [n for n in found if hasattr(importlib.import_module(n), "__all__")]
    return names


PACKAGES = packages_with_all()


def public_names(package: types.ModuleType) -> set[str]:
    """The names the package binds without a leading underscore, its submodules and
    ``from __future__`` features aside."""
    return {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType | __future__._Feature)
    }


def test_the_packages_that_matter_are_checked() -> None:
    adapters = {f"apollo_adapters.{n}" for n in ("memory", "postgres", "embedders", "rabbitmq")}
    assert {"apollo_app", "apollo_domain", *adapters} <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_is_exported_and_every_export_exists(name: str) -> None:
    package = importlib.import_module(name)
    exported = list(package.__all__)
    assert len(set(exported)) == len(exported), "a name is listed twice"
    assert sorted(public_names(package)) == sorted(exported)


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
def test_the_domain_exports_its_model_policy_and_errors(name: str) -> None:
    assert name in apollo_domain.__all__


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


def test_the_readme_gives_the_query_defaults_the_client_has() -> None:
    """The library section of docs/index.md states each filter default of ``query_knowledge`` (a
    default left out, ``min_confidence`` of 0.3, hid new low entries from a first query)."""
    text = " ".join(page("index").split())
    section = text.split("## Use it as a library", 1)[1].split(" ## ", 1)[0]
    parameters = inspect.signature(Client.query_knowledge).parameters
    for name in ("min_similarity", "min_confidence"):
        stated = re.search(rf"`{name}`, default ([0-9.]+)", section)
        assert stated is not None, f"docs/index.md does not state the default of {name}"
        assert parameters[name].default == float(stated.group(1)), name
