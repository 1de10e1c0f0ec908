"""Broker node lists: ``APOLLO_AMQP_URL`` names one RabbitMQ node or several, comma-separated.

Every node of a list is a full ``amqp://`` or ``amqps://`` URL with the same login (the bus's
identity). Nothing here repeats a password: :func:`address` is a node's URL without its user
information, for logs, errors and metrics.
"""

from __future__ import annotations

from yarl import URL

from apollo_domain.errors import ValidationError

SCHEMES = ("amqp", "amqps")


def node_urls(url: str) -> tuple[str, ...]:
    """The node URLs of ``url``, a comma-separated list of one or more AMQP URLs that all log
    in as the same user; else :class:`ValidationError` naming ``url`` (never its text)."""
    nodes = tuple(part.strip() for part in url.split(","))
    logins = set()
    for number, node in enumerate(nodes, start=1):
        which = f"node {number} of {len(nodes)}"
        if not node:
            raise ValidationError("url", f"{which} is empty")
        try:
            parsed = URL(node)
        except ValueError:
            raise ValidationError("url", f"{which} is not a URL") from None
        if parsed.scheme not in SCHEMES or not parsed.host:
            raise ValidationError("url", f"{which} is not an amqp:// or amqps:// URL with a host")
        logins.add(parsed.user or "guest")
    if len(logins) > 1:
        raise ValidationError("url", "every node must log in as the same user")
    return nodes


def address(node: str) -> str:
    """``node``'s URL without user information or password."""
    return str(URL(node).with_user(None))


__all__ = ["SCHEMES", "address", "node_urls"]
