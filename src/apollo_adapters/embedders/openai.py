"""Embeddings from an OpenAI-compatible HTTP API (``POST {base_url}/embeddings``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from apollo_domain.errors import EmbeddingError

from ..http_credentials import split_credentials
from .floors import model_relevance_floor, model_relevance_rule


class OpenAIEmbedder:
    """Calls ``/embeddings`` in batches of ``batch_size`` texts.

    Every failure — transport error, timeout, non-2xx status, malformed JSON, a missing
    or misordered vector, a vector of the wrong dimension — raises :class:`EmbeddingError`.
    ``relevance_floor`` is the model's (``APOLLO_RELEVANCE_FLOOR``); a model Apollo has
    calibrated has its own by default. Pass ``client`` to share an ``httpx.AsyncClient``;
    one created here is closed by :meth:`aclose`. Credentials in ``base_url``
    (``user:password@``) are sent as basic auth and, like ``api_key``, never appear in a
    URL httpx logs nor in an error message.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dimension: int,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
        batch_size: int = 256,
        send_dimensions: bool = False,
        relevance_floor: float | None = None,
    ) -> None:
        if dimension < 1:
            raise ValueError("dimension must be positive")
        self._credentials = split_credentials(base_url, api_key)
        self.base_url = self._credentials.url
        self.model = model
        self.model_id = model
        self.dimension = dimension
        #: The cosine under which a query's match says nothing: as given, else the
        #: calibrated floor of a model Apollo knows, else None (no floor).
        self.relevance_floor = (
            model_relevance_floor(model) if relevance_floor is None else relevance_floor
        )
        #: The rest of the model's calibrated relevance rule; none with a floor given.
        self.relevance_rule: Mapping[str, float] | None = (
            model_relevance_rule(model) if relevance_floor is None else None
        )
        self.batch_size = batch_size
        self.send_dimensions = send_dimensions
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._owns_client = client is None
        self._client = client

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.base_url!r}, {self.model!r}, dimension={self.dimension})"

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        vectors: list[Sequence[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        return self._client

    async def _embed_batch(self, texts: list[str]) -> list[Sequence[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.send_dimensions:
            body["dimensions"] = self.dimension
        url = f"{self.base_url}/embeddings"
        try:
            response = await self._http().post(
                url,
                json=body,
                headers=self._headers,
                timeout=self._timeout,
                auth=self._credentials.request_auth,
            )
            response.raise_for_status()
            payload = response.json()
        except httpx.HTTPStatusError as exc:
            raise EmbeddingError(
                self._credentials.clean(
                    f"{url} answered {exc.response.status_code}: {exc.response.text[:200]}"
                )
            ) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(self._credentials.clean(f"{url} failed: {exc!r}")) from exc
        except ValueError as exc:
            raise EmbeddingError(f"{url} returned malformed JSON") from exc
        return self._vectors(payload, len(texts))

    def _vectors(self, payload: Any, expected: int) -> list[Sequence[float]]:
        try:
            items = payload["data"]
            if not isinstance(items, list) or len(items) != expected:
                raise EmbeddingError(
                    f"{self.model}: expected {expected} embeddings, got "
                    f"{len(items) if isinstance(items, list) else type(items).__name__}"
                )
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            if [int(item.get("index", i)) for i, item in enumerate(ordered)] != list(
                range(expected)
            ):
                raise EmbeddingError(f"{self.model}: embedding indices are not 0..{expected - 1}")
            vectors = [[float(x) for x in item["embedding"]] for item in ordered]
        except EmbeddingError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EmbeddingError(f"{self.model}: malformed embeddings response") from exc
        for vector in vectors:
            if len(vector) != self.dimension:
                raise EmbeddingError(
                    f"{self.model}: expected dimension {self.dimension}, got {len(vector)}"
                )
            if not all(math.isfinite(x) for x in vector):
                raise EmbeddingError(f"{self.model}: embedding contains non-finite values")
        return list(vectors)


__all__ = ["OpenAIEmbedder"]
