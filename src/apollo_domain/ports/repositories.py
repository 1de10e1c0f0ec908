"""The store's other repositories: evidence, expertise, the access log, source
credibility, the outbox, idempotency keys and the identity directory."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from ..episodes import Episode
from ..model import Evidence, SourceRef
from .records import AccessLogRecord, CredibilityRecord, ExpertiseRecord, OutboxItem


class EvidenceRepository(Protocol):
    async def add(self, evidence: Evidence) -> bool:
        """Record a source's evidence on an entry. False (and no change) when that exact
        source (agent_id, provider, channel) is already recorded on the entry."""

    async def add_many(self, evidence: Sequence[Evidence]) -> list[bool]:
        """:meth:`add` for each item, in order (one statement where the adapter can); True
        for each item recorded. Raises :class:`NotFound` when an entry does not exist."""

    async def add_origin(self, evidence: Evidence) -> None:
        """Record the origin evidence of an entry this unit of work has just added, which
        carries no evidence yet. Nothing is reported back, so the adapter may send it with
        its next statement or the commit; an error (a missing entry) fails the unit of work
        there."""

    async def for_entry(self, entry_id: UUID) -> list[Evidence]:
        """Evidence on the entry in insertion order."""

    async def for_entries(self, entry_ids: Collection[UUID]) -> dict[UUID, list[Evidence]]:
        """:meth:`for_entry` for each id, in one statement where the adapter can; an entry
        without evidence (or unknown) is absent from the result."""

    async def forget_agent(self, agent_id: str, redacted: SourceRef) -> int:
        """Erasure: delete the agent's corroboration/deduplication evidence everywhere and
        replace the source of its origin evidence with ``redacted``; returns the rows
        touched."""


class ExpertiseRepository(Protocol):
    async def record_activity(self, agent_id: str, domain: str, now: datetime) -> None:
        """entry_count + 1 and last_active_at = now for (agent, domain), creating the row."""

    async def record_activities(self, activities: Sequence[tuple[str, str, datetime]]) -> None:
        """:meth:`record_activity` for each ``(agent_id, domain, now)``, in order (one
        statement where the adapter can)."""

    async def replace_all(self, records: Sequence[ExpertiseRecord]) -> None:
        """Replace proficiency and counts with the aggregator's recomputation."""

    async def for_domain(self, domain: str, min_proficiency: float) -> list[ExpertiseRecord]:
        """Agents with proficiency ≥ min in the domain, highest proficiency first."""

    async def all(self) -> list[ExpertiseRecord]:
        """Every record, by agent, then domain."""

    async def for_agent(self, agent_id: str) -> list[ExpertiseRecord]:
        """The agent's records, by domain."""

    async def forget_agent(self, agent_id: str) -> int:
        """Erasure: delete the agent's rows; returns how many there were."""


class AccessLog(Protocol):
    async def record(self, records: Sequence[AccessLogRecord]) -> None:
        """Append the rows, in order (one statement where the adapter can)."""

    async def count(self, action: str | None = None) -> int:
        """How many rows there are (of that ``action`` only, when given)."""

    async def for_agent(self, agent_id: str) -> list[AccessLogRecord]:
        """The agent's rows, oldest first."""

    async def redact_agent(self, agent_id: str, replacement: str) -> int:
        """Erasure: the agent's rows keep their action, entry and time but name
        ``replacement`` instead; returns the number of rows rewritten."""

    async def trim(self, cutoff: datetime, limit: int) -> int:
        """Retention: delete the oldest rows created before ``cutoff``, at most ``limit`` of
        them (one set-based statement where the adapter can); returns how many went. A
        caller empties a large backlog in several bounded calls, each committed alone."""


class CredibilityRegistry(Protocol):
    async def get(self, agent_id: str) -> CredibilityRecord:
        """The agent's record; a new agent gets Beta(1, 1) with no label."""

    async def get_many(self, agent_ids: Collection[str]) -> dict[str, CredibilityRecord]:
        """:meth:`get` for each agent (every one given is in the result), in one statement
        where the adapter can."""

    async def save(self, record: CredibilityRecord) -> None:
        """Replace the agent's whole record (administration and tests)."""

    async def add(self, agent_id: str, alpha_delta: float, beta_delta: float) -> CredibilityRecord:
        """Atomically ``α += alpha_delta`` and ``β += beta_delta`` (a new agent starts from
        Beta(1, 1)), counting one validated item when ``alpha_delta > 0`` and one refuted
        item when ``beta_delta > 0``; the label is kept. Returns the new record. Concurrent
        additions are never lost (no read-modify-write)."""

    async def set_label(self, agent_id: str, label: str | None) -> CredibilityRecord:
        """Set (or with None clear) the agent's label, keeping α, β and the counts; returns
        the new record."""

    async def forget(self, agent_id: str) -> bool:
        """Erasure: delete the agent's record (it is new again); True when there was one."""


class Outbox(Protocol):
    """Work queued in the same transaction as the change that caused it.

    An item is *due* when it is pending, its next attempt time (none until it fails) is
    not after ``now`` and it is not under an unexpired lease. Claiming leases items: the
    lease is written with the claim (PostgreSQL: one ``UPDATE … FOR UPDATE SKIP LOCKED``
    statement) and commits with the claiming unit of work, so the claimer can commit at
    once and work on the items outside any transaction while no other claimer, in this
    process or another, sees them until the lease ends or they are completed or failed.
    """

    async def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime) -> None:
        """Queue an item of ``kind``, enqueued at ``now`` (due at once, no attempt yet);
        it commits, or not, with the unit of work."""

    async def enqueue_many(self, items: Sequence[tuple[str, Mapping[str, Any], datetime]]) -> None:
        """:meth:`enqueue` for each ``(kind, payload, now)``, in order (one statement where
        the adapter can)."""

    async def claim(self, limit: int, now: datetime, *, lease_until: datetime) -> list[OutboxItem]:
        """Up to ``limit`` items due at ``now``, oldest first: in the order they were
        enqueued (by id; the time an item was enqueued at does not reorder them), each
        leased until ``lease_until``. Items locked by a concurrent claimer that has not
        committed are skipped, never waited for."""

    async def complete(self, item_id: int) -> None:
        """The item is done (never claimed again); an unknown or finished id is a no-op."""

    async def fail(self, item_id: int, error: str, *, retry_at: datetime | None) -> None:
        """Count a failed attempt, keep ``error`` and end the lease: the item is due again
        at ``retry_at``, or dead (kept, never claimed again) when ``retry_at`` is None. An
        unknown or no longer pending id is a no-op."""

    async def pending(self) -> int:
        """Items neither done nor dead, due or waiting for their next attempt."""


class ProcessedKeys(Protocol):
    """Idempotency keys (GAS request ids, message ids), recorded in the transaction of the
    effects they guard. The keys arrive whole: the command layer has already scoped each
    by the principal that sent it (:func:`~apollo_domain.services.context.scoped_key`)."""

    async def mark(self, key: str, now: datetime) -> bool:
        """Record ``key``; True when it was new, False when already recorded.

        A unique insert in this unit of work: it is undone when the unit of work does not
        commit, and while another open unit of work has recorded the same key this call
        waits for that one to end (PostgreSQL; the in-memory store runs units of work one
        at a time), then answers False if it committed. So of two units of work marking
        one key, exactly one gets True."""

    async def mark_many(self, keys: Sequence[str], now: datetime) -> list[bool]:
        """:meth:`mark` for each of ``keys`` (distinct), in one statement where the adapter
        can: for each, True when it was new. Keys are recorded in sorted order, so two units
        of work marking overlapping sets wait for each other instead of deadlocking."""

    async def forget_many(self, keys: Sequence[str]) -> None:
        """Remove ``keys`` recorded by this unit of work (an application that wrote nothing
        keeps no key, as a unit of work that does not commit keeps none); undone with
        the unit of work."""

    async def seen(self, key: str) -> bool:
        """Whether ``key`` is recorded (committed, or marked by this unit of work)."""


class EpisodeRepository(Protocol):
    """Episodes (``store_text``): each text as it was given (docs/texts.md)."""

    async def add(self, episode: Episode) -> bool:
        """Record ``episode``; False (and no change) when an episode with its id exists.

        A unique insert in this unit of work, like :meth:`ProcessedKeys.mark`: while another
        open unit of work has recorded the same id this call waits for it to end
        (PostgreSQL; the in-memory store runs units of work one at a time), so of two units
        of work storing one text exactly one gets True."""

    async def get(self, episode_id: UUID) -> Episode | None:
        """The episode, whoever may see it (the caller checks visibility)."""

    async def forget_agent(self, agent_id: str) -> int:
        """Delete the agent's episodes, their text with them; how many there were."""


class IdentityDirectory(Protocol):
    """Group membership of principals; identity itself is resolved at the edge."""

    async def add_membership(self, principal_id: str, group: str) -> None:
        """Make the principal a member of ``group`` (idempotent). Each directory call
        stands alone: it takes effect at once, in no unit of work."""

    async def remove_membership(self, principal_id: str, group: str) -> None:
        """End the membership (idempotent: an unknown one is a no-op)."""

    async def groups_of(self, principal_id: str) -> frozenset[str]:
        """The principal's groups (empty for an unknown principal)."""

    async def members_of(self, groups: Collection[str]) -> frozenset[str]:
        """Every principal id belonging to at least one of ``groups``."""


__all__ = [
    "AccessLog",
    "CredibilityRegistry",
    "EpisodeRepository",
    "EvidenceRepository",
    "ExpertiseRepository",
    "IdentityDirectory",
    "Outbox",
    "ProcessedKeys",
]
