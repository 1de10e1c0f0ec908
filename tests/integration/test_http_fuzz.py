"""Schema-driven fuzzing of the live HTTP API: bodies, path and query parameters generated
from the server's own OpenAPI document (valid and deliberately invalid ones).

Whatever arrives, the server never answers with a 5xx (the in-memory store cannot fail to
persist), answers only with status codes the document declares, and every body matches
the declared schema — the error shape included.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from apollo_app import Apollo
from apollo_app.entrypoints.http import HttpServer, create_app, openapi_document
from apollo_app.metrics import Metrics
from apollo_domain.limits import MAX_QUERY_CHARS

TOKENS = {"tok-fuzz": "fuzzer"}
EXAMPLES_PER_OPERATION = 40
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


class _ServerThread(threading.Thread):
    """The API with an in-memory Apollo on its own event loop, so the synchronous fuzzing
    client can call it without blocking the test's loop."""

    def __init__(self) -> None:
        super().__init__(name="apollo-http-fuzz", daemon=True)
        self.url = ""
        self.started = threading.Event()
        self.failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shutdown: asyncio.Event | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self.failure = exc
            self.started.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._shutdown = asyncio.Event()
        async with Apollo.in_memory() as apollo:
            client = apollo.client("seed-agent")
            seeded = await client.store_knowledge(content="Seed entry for traversal", tags=["ops"])
            assert seeded.entry_id is not None
            app = create_app(apollo, tokens=TOKENS, metrics=Metrics())
            async with HttpServer(app, "127.0.0.1", 0) as server:
                self.url = server.url
                self.started.set()
                await self._shutdown.wait()

    def stop(self) -> None:
        if self._loop is not None and self._shutdown is not None:
            self._loop.call_soon_threadsafe(self._shutdown.set)
        self.join(timeout=30)


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    thread = _ServerThread()
    thread.start()
    assert thread.started.wait(timeout=30), "the HTTP server did not start"
    if thread.failure is not None:
        raise thread.failure
    try:
        yield thread.url
    finally:
        thread.stop()


@pytest.fixture(scope="module")
def served_url(live_url: str) -> str:
    """The live server's URL, once checked that it serves the document the cases come from."""
    served = httpx.get(f"{live_url}/openapi.json").json()
    assert openapi_document() == served
    return live_url


# Loaded eagerly from the same function the server serves it from (the fixture above checks
# they agree): schemathesis' lazy fixture loader does not support this pytest version.
schema = schemathesis.openapi.from_dict(openapi_document())
# The wire removes NUL characters from every string before a command sees it (text no store
# can hold), so a string padded past its limit with NULs is within it once received and is
# rightly accepted, while schemathesis, counting the NULs, expects a refusal. What NULs
# become is shown by test_nul_characters_are_removed_before_the_limits_apply below.
schema.config.generation.update(allow_x00=False)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_generated_request_breaks_the_api(case: schemathesis.Case, served_url: str) -> None:
    """Generated requests, valid and invalid, get a declared status and a body matching the
    declared schema; nothing is a server error."""
    case.call_and_validate(
        base_url=served_url,
        headers={"Authorization": "Bearer tok-fuzz"},
        checks=CHECKS,
    )


def test_nul_characters_are_removed_before_the_limits_apply(served_url: str) -> None:
    """A NUL character counts for nothing: the query's limit applies to the text without it
    (one character over with a NUL is accepted, one over without is refused)."""
    headers = {"Authorization": "Bearer tok-fuzz"}
    at_limit = "q" * MAX_QUERY_CHARS
    padded = httpx.post(
        f"{served_url}/api/apollo/retrieve", json={"query": at_limit + "\x00"}, headers=headers
    )
    over = httpx.post(
        f"{served_url}/api/apollo/retrieve", json={"query": at_limit + "q"}, headers=headers
    )
    assert (200, 400) == (padded.status_code, over.status_code)
    assert "query" in over.text
