"""What every use case needs: the ports, the policy, and who is calling."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from attrs import field, frozen

from ..bounds import AGENT_ID
from ..confusables import reading
from ..episodes import SentenceSplitter
from ..errors import TransientConflict, ValidationError
from ..model import ACTIVE_STATUSES, Principal, Status, Viewer
from ..normalize import bounded_text
from ..policy import ConfidencePolicy
from ..ports import (
    Clock,
    ContradictionJudge,
    Embedder,
    EntityExtractor,
    GasLanguageModel,
    IdentityDirectory,
    QueryProfile,
    Store,
    TextSplitter,
    UnitOfWork,
    WriteBudget,
)
from ..retrieval import RetrievalSettings
from ..retry import OutboxRetry
from ..validation import bounded_float, shown

UNKNOWN_AGENT = "unknown"
#: How many times in all a unit of work runs that the store keeps breaking apart for
#: concurrent ones (:func:`in_unit_of_work`).
UNIT_OF_WORK_ATTEMPTS = 3
T = TypeVar("T")
#: The boost window's default: the decay interval's.
DEFAULT_BOOST_WINDOW = timedelta(hours=1)
INGEST_PARTS = ("entries", "evidence", "expertise", "access_log", "outbox", "graph")


@frozen
class Deps:
    """The ports a use case talks to. Built once by the composition root."""

    store: Store
    embedder: Embedder
    judge: ContradictionJudge
    clock: Clock
    policy: ConfidencePolicy
    extractor: EntityExtractor
    llm: GasLanguageModel | None = None
    #: What splits a text into statements (``store_text``): the language model when one is
    #: configured, else the deterministic split.
    splitter: TextSplitter = field(factory=SentenceSplitter)
    retrieval: RetrievalSettings = field(factory=RetrievalSettings)
    outbox_retry: OutboxRetry = field(factory=OutboxRetry)
    #: A principal earns a retrieval boost on an entry once per window (docs/concepts.md, "The rules
    #: in one page").
    boost_window: timedelta = DEFAULT_BOOST_WINDOW
    #: The embedder a query's text goes through (:func:`embed_query`), the same model as
    #: ``embedder`` behind a cache of its own, so that a bulk ingest does not push the
    #: repeated queries out of it; None: ``embedder``.
    query_embedder: Embedder | None = None
    #: Told how long each stage of a query took; None: nobody asks.
    query_profile: QueryProfile | None = None
    #: Each principal's write rate, charged by the writes that come over an edge
    #: (:mod:`apollo_domain.rates`); None: no limit.
    write_budget: WriteBudget | None = None


@frozen
class Caller:
    """The agent on whose behalf a call runs (attribution) and the principal it acts as
    (access). The agent id comes from the caller's own process; the principal is resolved
    at the edge, never from a payload."""

    agent_id: str
    principal: Principal
    #: The embedding program itself, calling without a principal: it reads any entry by id.
    #: Never set from an edge.
    trusted: bool = False
    #: The transport the call came over (``http``, ``amqp``), None for the embedding
    #: program. An edge's call records its own submission metadata (``submitted_by`` the
    #: principal, ``submitted_from`` the edge); what a payload says about it is ignored.
    edge: str | None = None

    @classmethod
    def of(
        cls,
        agent_id: object,
        principal: Principal | None = None,
        *,
        edge: str | None = None,
        field: str = "agent_id",
    ) -> Caller:
        """The caller credited as ``agent_id`` (stripped; empty: ``unknown``); one longer
        than the ``AGENT_ID`` bound is a :class:`ValidationError` naming ``field``."""
        agent = bounded_text(agent_id, AGENT_ID, field)
        return cls(agent or UNKNOWN_AGENT, principal or Principal(None), edge=edge)

    def acting_as(self, agent_id: str | None) -> Caller:
        """The same principal, over the same edge, credited as ``agent_id`` (``None``:
        unchanged)."""
        if agent_id is None or not agent_id.strip():
            return self
        return Caller.of(agent_id, self.principal, edge=self.edge)


async def embed_readings(deps: Deps, texts: Sequence[str]) -> list[Sequence[float]]:
    """The embeddings of ``texts`` as they read (:func:`~apollo_domain.confusables.reading`:
    look-alike letters that disguise Latin ones folded), one per text, in order. Every
    text Apollo embeds to place or to search goes through here."""
    return await deps.embedder.embed([reading(text) for text in texts])


def as_floats(vector: Sequence[float]) -> tuple[float, ...]:
    """An embedding as plain floats, read through an array's own ``tolist`` when it has
    one (one call instead of a Python step per value)."""
    tolist = getattr(vector, "tolist", None)
    return tuple(map(float, tolist() if callable(tolist) else vector))


def query_reading(text: str) -> str:
    """The text a query is embedded as: as it reads (:func:`embed_readings`), its runs of
    white space one space, none at its ends. Queries that differ only in spacing are one
    query to the model (and to a cache keyed by this text)."""
    return reading(" ".join(text.split()))


async def embed_query(deps: Deps, text: str) -> Sequence[float]:
    """The embedding of a query's text (:func:`query_reading`), through the query
    embedder (``Deps.query_embedder``, else ``Deps.embedder``)."""
    embedder = deps.embedder if deps.query_embedder is None else deps.query_embedder
    (vector,) = await embedder.embed([query_reading(text)])
    return vector


async def in_unit_of_work(store: Store, work: Callable[[UnitOfWork], Awaitable[T]]) -> T:
    """``work``'s result, run in a unit of work of ``store``; run whole again, at most
    :data:`UNIT_OF_WORK_ATTEMPTS` times in all, when the store broke it apart for a
    concurrent one (:class:`TransientConflict`). Its rollback undid all of it, so running
    it again is safe when ``work`` acts only through the unit of work."""
    for attempt in range(1, UNIT_OF_WORK_ATTEMPTS + 1):
        try:
            async with store.unit_of_work() as uow:
                return await work(uow)
        except TransientConflict:
            if attempt == UNIT_OF_WORK_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


async def resolve_viewer(directory: IdentityDirectory, principal: Principal) -> Viewer:
    """The principal's groups (given ∪ directory) and every principal sharing one of them."""
    if principal.id is None:
        return Viewer(None)
    groups = set(principal.groups) | set(await directory.groups_of(principal.id))
    if not groups:
        return Viewer(principal.id)
    owners = set(await directory.members_of(groups))
    owners.add(principal.id)
    return Viewer(principal.id, frozenset(owners))


def scoped_key(principal: Principal, key: str) -> str:
    """``key`` (a message id, a GAS request id) as the key of ``principal``'s commands: one
    principal's key never suppresses another's command (docs/security.md, "Security model"). The
    anonymous principal is one scope. Unambiguous whatever the two contain."""
    return json.dumps([principal.id, key], ensure_ascii=False, separators=(",", ":"))


async def first_application(
    uow: UnitOfWork, kind: str, idempotency_key: str | None, now: datetime
) -> bool:
    """Record ``<kind>:<idempotency_key>`` in ``uow``'s transaction (docs/architecture.md,
    "Units of work and concurrency"); True when the caller goes on to apply its effects (no
    key, or the key is new), False when an earlier unit of work already recorded it.

    The record is a unique insert committed with the effects: of two overlapping deliveries
    one records the key and applies, the other waits for it (PostgreSQL) or runs after it
    (in memory) and sees the key. A use case calls this first in its unit of work and, on
    False, returns its "already applied" result without committing anything."""
    if idempotency_key is None:
        return True
    return await uow.processed.mark(f"{kind}:{idempotency_key}", now)


def unit_float(name: str, value: object) -> float:
    return bounded_float(name, value, 0.0, 1.0)


def bounded_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(name, f"must be an integer, got {shown(value)}")
    if not low <= value <= high:
        raise ValidationError(name, f"must be between {low} and {high}, got {value}")
    return value


def subject_agent(agent_id: object) -> str:
    """An agent named as the subject of a command: a non-empty string within the
    ``AGENT_ID`` bound (stripped), else :class:`ValidationError` naming ``agent_id``."""
    named = bounded_text(agent_id, AGENT_ID) if isinstance(agent_id, str) else None
    if not named:
        raise ValidationError("agent_id", "must be a non-empty string")
    return named


def parse_statuses(values: object, default: Iterable[Status]) -> frozenset[Status]:
    if values is None:
        return frozenset(default)
    if isinstance(values, str | Status):
        values = [values]
    if not isinstance(values, Iterable):
        raise ValidationError("status", "must be a status or a list of statuses")
    parsed: set[Status] = set()
    for value in values:
        try:
            parsed.add(Status(str(value).strip().lower().removeprefix(":")))
        except ValueError:
            allowed = ", ".join(s.value for s in Status)
            raise ValidationError(
                "status", f"unknown status {shown(value)}; expected {allowed}"
            ) from None
    if not parsed:
        raise ValidationError("status", "must name at least one status")
    return frozenset(parsed)


ACTIVE = ACTIVE_STATUSES
