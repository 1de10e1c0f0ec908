"""Random sequences of store/query/corroborate/decay/deprecate/resolve from several agents
and principals; the invariants hold after every step, on every store adapter."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from apollo_adapters.clock import ManualClock
from apollo_adapters.embedders import HashingEmbedder
from apollo_app import Apollo, Forbidden, NotFound, Principal, Status
from apollo_domain.rules import is_visible
from apollo_domain.services import resolve_viewer
from tests.contract.stores import open_store

AGENTS = ["claude-a", "openai-b", "gemini-c", "human-d", "mystery-e"]
PRINCIPALS = [Principal("alice"), Principal("bob"), Principal("carol"), Principal(None)]
WORDS = [
    "bgp",
    "route",
    "reflector",
    "kafka",
    "partition",
    "redis",
    "cache",
    "latency",
    "is",
    "not",
    "enabled",
    "disabled",
    "fast",
    "slow",
    "default",
    "port",
    "179",
    "180",
]
texts = st.lists(st.sampled_from(WORDS), min_size=3, max_size=7).map(" ".join)
MAX_EXAMPLES = {"memory": 60, "postgres": 8}


def run_machine(kind: str, request: pytest.FixtureRequest) -> None:
    class KnowledgeMachine(RuleBasedStateMachine):
        entries = Bundle("entries")

        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
            embedder = HashingEmbedder(64)
            self.store = self.run(
                open_store(kind, request, dimension=embedder.dimension, model_id=embedder.model_id)
            )
            self.apollo = Apollo.with_store(self.store, embedder=embedder, clock=self.clock)
            self.run(self.apollo.directory.add_membership("alice", "ops"))
            self.run(self.apollo.directory.add_membership("bob", "ops"))

        def run(self, coro):
            return self.loop.run_until_complete(coro)

        def teardown(self) -> None:
            self.run(self.store.close())
            self.loop.close()

        @rule(
            target=entries,
            agent=st.sampled_from(AGENTS),
            who=st.sampled_from(PRINCIPALS),
            text=texts,
            scope=st.sampled_from(["global", "team", "private"]),
        )
        def store_knowledge(self, agent, who, text, scope):
            if who.id is None:
                scope = "global"
            result = self.run(
                self.apollo.client(agent, who).store_knowledge(content=text, access_scope=scope)
            )
            self.clock.advance(minutes=7)
            return result.entry_id

        @rule(who=st.sampled_from(PRINCIPALS), text=texts)
        def query(self, who, text):
            result = self.run(
                self.apollo.client("reader", who).query_knowledge(query=text, min_confidence=0.0)
            )
            viewer = self.run(resolve_viewer(self.apollo.directory, who))
            for view in result.entries:
                entry = self.run(self.apollo.get_entry(view.id))
                assert is_visible(entry, viewer), "query leaked an invisible entry"
                assert entry.status is not Status.ARCHIVED, "query returned an archived entry"

        @rule()
        def corroborate(self):
            self.run(self.apollo.check_corroboration(limit=20))

        @rule()
        def scan(self):
            self.run(self.apollo.process_outbox())

        @rule(hours=st.integers(min_value=1, max_value=2000))
        def decay(self, hours):
            self.clock.advance(hours=hours)
            self.run(self.apollo.run_decay_cycle())

        @rule(entry=entries, who=st.sampled_from(PRINCIPALS))
        def deprecate(self, entry, who):
            if entry is None:
                return
            try:
                self.run(
                    self.apollo.client("curator", who).deprecate_entry(
                        entry_id=entry, reason="stale"
                    )
                )
            except NotFound:  # invisible to ``who``, or erased
                pass
            except Forbidden:  # only the owner (or an admin) deprecates an entry; an
                # anonymous client owns only the unowned entries of its own agent
                owner = self.run(self.apollo.get_entry(entry)).owner_id
                assert who.id is None or who.id != owner

        @rule(entry=entries, resolution=st.sampled_from(["accept", "keep", "reject"]))
        def resolve(self, entry, resolution):
            if entry is None:
                return
            try:
                current = self.run(self.apollo.get_entry(entry))
            except NotFound:  # erased
                return
            if current.status is Status.DISPUTED:
                owner = Principal(current.owner_id, role="admin")
                self.run(
                    self.apollo.client("moderator", owner).resolve_dispute(
                        entry_id=entry, resolution=resolution
                    )
                )

        def all_entries(self):
            async def collect():
                async with self.store.unit_of_work() as uow:
                    found = []
                    for agent in AGENTS:
                        found.extend(await uow.entries.by_agent(agent))
                    evidence = await uow.evidence.for_entries([e.id for e in found])
                return found, evidence

            return self.run(collect())

        @invariant()
        def confidence_in_range_and_evidence_unique(self):
            found, evidence = self.all_entries()
            for entry in found:
                assert 0.0 <= entry.confidence <= 1.0
                sources = [
                    (e.source.agent_id, e.source.provider, e.source.channel)
                    for e in evidence.get(entry.id, [])
                ]
                assert len(sources) == len(set(sources)), "one source counted twice"

        @invariant()
        def private_entries_stay_private(self):
            found, _ = self.all_entries()
            for entry in found:
                if entry.access_scope.value == "private":
                    for who in PRINCIPALS:
                        viewer = self.run(resolve_viewer(self.apollo.directory, who))
                        assert is_visible(entry, viewer) == (who.id == entry.owner_id)

    KnowledgeMachine.TestCase.settings = settings(
        max_examples=MAX_EXAMPLES[kind],
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    KnowledgeMachine.TestCase().runTest()


def test_knowledge_state_machine(store_kind: str, request: pytest.FixtureRequest) -> None:
    run_machine(store_kind, request)
