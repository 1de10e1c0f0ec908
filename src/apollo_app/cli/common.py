"""What every ``apollo`` subcommand shares: exit codes, errors, settings, identity."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from apollo_domain.errors import ApolloError, ConfigurationError
from apollo_domain.model import Principal

from .. import bootstrap
from ..settings import Settings, check_database_url

if TYPE_CHECKING:
    from ..facade import Apollo

PROG = "apollo"
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 128 + 13  # as if ended by SIGPIPE, like other programs in a pipeline
DEFAULT_AGENT = "cli"

T = TypeVar("T")


class UsageError(Exception):
    """A bad argument or input that the user must fix (exit 2)."""


class ServiceMissing(ApolloError):
    """``apollo serve`` without the service module (exit 1)."""


def error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def load_settings(args: argparse.Namespace) -> Settings:
    """``Settings.from_env()`` with the command-line overrides applied."""
    settings = Settings.from_env()
    changes: dict[str, Any] = {}
    if getattr(args, "data_dir", None) is not None:
        changes["data_dir"] = Path(args.data_dir)
    database_url = getattr(args, "database_url", None)
    if database_url is not None:
        if not database_url.strip():
            raise ConfigurationError("--database-url", "must not be empty")
        changes["database_url"] = check_database_url("--database-url", database_url.strip())
    return settings.replace(**changes) if changes else settings


#: The command-line flags that stand for a setting: an error about the setting names the
#: flag when the user typed the flag.
FLAGS = {"APOLLO_DATA_DIR": "data_dir", "APOLLO_DATABASE_URL": "database_url"}


def as_typed(exc: ConfigurationError, args: argparse.Namespace) -> ConfigurationError:
    """``exc`` naming ``--data-dir`` / ``--database-url`` instead of the variable when the
    command line gave that setting."""
    attribute = FLAGS.get(exc.variable)
    if attribute is None or getattr(args, attribute, None) is None:
        return exc
    return ConfigurationError("--" + attribute.replace("_", "-"), exc.message)


@asynccontextmanager
async def open_apollo(settings: Settings, *, migrate: bool = True) -> AsyncIterator[Apollo]:
    """Apollo over the configured store. A read command passes ``migrate=False``: it never
    changes the schema of a server given by URL. When this creates a new, empty embedded
    store, one line on stderr says so (an empty answer then is not lost data)."""
    from ..facade import Apollo

    new = settings.database_url is None and not bootstrap.embedded_store_exists(settings)
    async with Apollo.open(settings, migrate=migrate) as apollo:
        if new:
            print(
                f"{PROG}: note: no store in {settings.data_dir}: created a new, empty one"
                " (--data-dir, APOLLO_DATA_DIR or APOLLO_DATABASE_URL choose another)",
                file=sys.stderr,
            )
        yield apollo


def principal_of(args: argparse.Namespace) -> Principal | None:
    value = getattr(args, "principal", None)
    return Principal(value) if value else None


def one_line(text: str, width: int | None = None) -> str:
    flat = " ".join(text.split())
    if width is not None and len(flat) > width:
        return flat[: width - 3] + "..."
    return flat
