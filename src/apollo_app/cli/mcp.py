"""``apollo mcp``: serve MCP over stdio for one local agent (Claude Desktop, Claude Code, an
IDE or an agent framework that starts the server as a subprocess)."""

from __future__ import annotations

import argparse
import getpass
import logging
from typing import Any

from apollo_domain import commands as c
from apollo_domain.handlers import handle
from apollo_domain.model import Principal
from apollo_domain.services import Caller
from apollo_domain.services.context import UNKNOWN_AGENT
from apollo_domain.services.write_rate import charge_write

from .. import bootstrap
from ..facade import Apollo
from ..logs import configure_logging
from .common import EXIT_OK, UsageError, load_settings, open_apollo, run_async

#: The principal of ``apollo mcp`` when neither ``--principal`` nor the login name says one.
LOCAL_PRINCIPAL = "local"


def local_principal(args: argparse.Namespace) -> Principal:
    """The local identity: ``--principal`` (default: the login name of the user running
    the server), ``--role`` (default writer), acting as ``--agent`` (default: the
    principal)."""
    principal = args.principal or _login() or LOCAL_PRINCIPAL
    return Principal(principal, role=args.role, agent=args.agent)


def _login() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment
        return None


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve MCP on stdin/stdout until the client closes them. Logs go to stderr. With
    ``APOLLO_AMQP_URL`` the server is in client mode: no database, the tools whose commands
    travel on the bus, carried out by the Apollo service as the broker login."""
    from ..entrypoints.mcp import ApolloMcp, local_caller, serve, stdio_streams
    from ..entrypoints.mcp.http import EDGE
    from ..entrypoints.mcp.tools import bus_actions, mcp_actions, tools_of

    settings = load_settings(args)
    configure_logging(settings.secrets, level=logging.WARNING)
    if settings.amqp_url is not None and args.principal is not None:
        raise UsageError(
            "--principal: in client mode (APOLLO_AMQP_URL) the broker login is the principal"
        )

    async def main() -> None:
        async with stdio_streams() as streams:
            if settings.amqp_url is not None:
                await _client_mode(settings.amqp_url, streams)
                return
            principal = local_principal(args)
            caller = Caller.of(principal.agent or principal.id, principal, edge=EDGE)
            async with open_apollo(settings) as apollo:

                async def run(who: Caller, command: c.Command[Any], key: str | None) -> Any:
                    return await handle(apollo.deps, who, command, idempotency_key=key)

                async def charge(who: Caller, cost: int) -> None:
                    await charge_write(apollo.deps, who, cost)

                tools = tools_of(mcp_actions())
                edge = ApolloMcp(tools, run, local_caller(caller), charge=charge)
                await serve(edge, streams)

    async def _client_mode(url: str, streams: Any) -> None:
        async with Apollo.client_mode(
            url,
            agent_id=args.agent or UNKNOWN_AGENT,
            topology=bootstrap.topology_of(settings),
            rpc_timeout=settings.rpc_timeout,
            queue_type=settings.queue_type,
        ) as remote:
            # The service decides what the login may do; --role says which tools to list.
            principal = Principal(remote.principal.id, role=args.role)
            caller = Caller.of(remote.agent_id, principal, edge=EDGE)

            async def run(who: Caller, command: c.Command[Any], key: str | None) -> Any:
                return await remote.run(command)  # the bus applies each message id once

            tools = tools_of(bus_actions(), published=True)
            edge = ApolloMcp(tools, run, local_caller(caller), resources=False)
            await serve(edge, streams)

    try:
        run_async(main())
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


__all__ = ["LOCAL_PRINCIPAL", "cmd_mcp", "local_principal"]
