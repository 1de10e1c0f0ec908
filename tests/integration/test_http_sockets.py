"""The HTTP server's connections send each write at once (``TCP_NODELAY``): with Nagle's
algorithm on, a response written as headers then body waits for the client's delayed
acknowledgement of the headers, about 40 ms on every request."""

from __future__ import annotations

import socket

import httpx

from apollo_app import Apollo
from apollo_app.entrypoints.http import HttpServer, create_app, listen


def test_the_listening_socket_is_tcp_so_accepted_connections_get_nodelay() -> None:
    """asyncio turns Nagle off on accepted connections of a socket made for TCP."""
    sock = listen("127.0.0.1", 0)
    try:
        assert socket.IPPROTO_TCP == sock.proto
    finally:
        sock.close()


async def test_a_served_connection_has_nagle_off() -> None:
    async with (
        Apollo.in_memory() as apollo,
        HttpServer(create_app(apollo)) as server,
        httpx.AsyncClient(base_url=server.url) as http,
    ):
        assert 200 == (await http.get("/api/apollo/health")).status_code
        connections = server._server.server_state.connections  # type: ignore[union-attr]
        sockets = [c.transport.get_extra_info("socket") for c in connections]
        assert sockets
        for served in sockets:
            assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
