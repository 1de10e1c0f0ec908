"""The version of the installed ``apollo-knowledge`` distribution."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "apollo-knowledge"
UNINSTALLED = "0+unknown"


def installed_version() -> str:
    """The distribution's version, or ``0+unknown`` for a source tree that was never
    installed (PEP 440 local version, so it still compares and parses)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNINSTALLED


__version__ = installed_version()
