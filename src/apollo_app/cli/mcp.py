"""``apollo mcp``: serve MCP over stdio for one local agent (Claude Desktop, Claude Code, an
IDE or an agent framework that starts the server as a subprocess)."""

from __future__ import annotations

import argparse
import getpass
import logging

from apollo_domain.handlers import handle
from apollo_domain.model import Principal
from apollo_domain.services import Caller

from ..logs import configure_logging
from .common import EXIT_OK, load_settings, open_apollo, run_async

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
    """Serve MCP on stdin/stdout until the client closes them. Logs go to stderr."""
    from ..entrypoints.mcp import ApolloMcp, local_caller, serve, stdio_streams
    from ..entrypoints.mcp.http import EDGE
    from ..entrypoints.mcp.tools import mcp_actions, tools_of

    settings = load_settings(args)
    configure_logging(settings.secrets, level=logging.WARNING)
    principal = local_principal(args)
    caller = Caller.of(principal.agent or principal.id, principal, edge=EDGE)

    async def main() -> None:
        async with stdio_streams() as streams, open_apollo(settings) as apollo:

            async def run(who: Caller, command: object) -> object:
                return await handle(apollo.deps, who, command)  # type: ignore[arg-type]

            edge = ApolloMcp(tools_of(mcp_actions()), run, local_caller(caller))
            await serve(edge, streams)

    try:
        run_async(main())
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


__all__ = ["LOCAL_PRINCIPAL", "cmd_mcp", "local_principal"]
