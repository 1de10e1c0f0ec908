"""What every ``apollo`` subcommand shares: exit codes, errors, settings, identity."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from apollo_domain.errors import ApolloError, ConfigurationError
from apollo_domain.model import Principal

from ..settings import Settings, check_database_url

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


def principal_of(args: argparse.Namespace) -> Principal | None:
    value = getattr(args, "principal", None)
    return Principal(value) if value else None


def one_line(text: str, width: int | None = None) -> str:
    flat = " ".join(text.split())
    if width is not None and len(flat) > width:
        return flat[: width - 3] + "..."
    return flat
