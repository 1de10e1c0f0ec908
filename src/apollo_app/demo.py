"""A scripted tour of Apollo: what happens to knowledge, and why.

Every step states what it expects and checks it against the store; a step that does not
turn out as narrated is reported (``MISMATCH``) and the tour ends with a failure, so the
narration can never drift from the behaviour. The wordings are chosen for the hashing
embedder (lexical): paraphrases land at cosine ≥ 0.9, contradicting statements above 0.7.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any, TextIO
from uuid import UUID

import numpy as np

from apollo_domain.commands import LabelSource
from apollo_domain.credibility import SourceCredibility
from apollo_domain.errors import NotFound
from apollo_domain.expertise import proficiency
from apollo_domain.model import Entry, Outcome, Principal, Role, Status
from apollo_domain.rules import AGREEING_KINDS
from apollo_domain.traversal import DECAY_PER_HOP

from .bootstrap import ManualClock, manual_clock, server_folder
from .facade import Apollo, Client

# -- what the agents say ---------------------------------------------------------------

BGP = "The BGP routing protocol exchanges routes between autonomous systems over TCP port 179"
BGP_AGAIN = (
    "the BGP routing protocol exchanges routes between  autonomous systems over TCP port 179"
)
BGP_WRONG = "BGP peers always talk over TCP port 80 and never need authentication"
OSPF_A = (
    "OSPF elects a designated router on each broadcast network segment "
    "to reduce the number of adjacencies between routers"
)
OSPF_B = (
    "OSPF elects a designated router on every broadcast network segment "
    "to reduce the number of adjacencies between routers"
)
OSPF_C = (
    "OSPF elects a designated router for each broadcast network segment "
    "to reduce the number of adjacencies between routers"
)
OSPF_HELLO = "OSPF routers send hello packets to the multicast address 224.0.0.5 every 10 seconds"
MULTICAST = "IP multicast delivers a single packet to every host that joined the group"
LAB_VLAN = "The out-of-band management network of the lab switches uses VLAN 999"
RA_ENABLED = "IPv6 router advertisements are enabled by default on Cisco interfaces"
RA_DISABLED = "IPv6 router advertisements are disabled by default on Cisco interfaces"

DECAY_WEEKS = 6


class TourFailed(Exception):
    """A step did not turn out as narrated."""


class Tour:
    """Narration plus checks. ``expect`` prints a confirmed claim or records a mismatch."""

    def __init__(self, apollo: Apollo, clock: ManualClock, out: TextIO) -> None:
        self.apollo = apollo
        self.clock = clock
        self.out = out
        self.mismatches: list[str] = []
        self.labels: dict[UUID, str] = {}
        self._step = 0

    # -- output ------------------------------------------------------------------------

    def step(self, title: str) -> None:
        self._step += 1
        self.clock.advance(minutes=1)
        print(f"\n[{self._step}] {title}", file=self.out)

    def say(self, text: str) -> None:
        print(f"    {text}", file=self.out)

    def why(self, text: str) -> None:
        print(f"      why: {text}", file=self.out)

    def expect(self, ok: bool, claim: str, actual: object = None) -> None:
        if ok:
            print(f"      ok: {claim}", file=self.out)
            return
        detail = f"{claim} (got {actual!r})" if actual is not None else claim
        self.mismatches.append(detail)
        print(f"      MISMATCH: expected {detail}", file=self.out)

    def require(self, ok: bool, claim: str, actual: object = None) -> None:
        """Like :meth:`expect`, but the rest of the tour depends on it."""
        self.expect(ok, claim, actual)
        if not ok:
            raise TourFailed(claim)

    # -- helpers -----------------------------------------------------------------------

    async def entry(self, entry_id: UUID) -> Entry:
        return await self.apollo.get_entry(entry_id)

    def name(self, entry_id: UUID | None) -> str:
        if entry_id is None:
            return "-"
        return self.labels.get(entry_id, str(entry_id)[:8])

    async def cosine(self, a: str, b: str) -> float:
        va, vb = await self.apollo.deps.embedder.embed([a, b])
        return float(np.dot(np.asarray(va), np.asarray(vb)))

    async def credibility(self, agent_id: str) -> float:
        async with self.apollo.store.unit_of_work() as uow:
            r = await uow.credibility.get(agent_id)
        return SourceCredibility(r.agent_id, r.alpha, r.beta, r.label).credibility


def _short(text: str, width: int = 72) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


async def run_tour(apollo: Apollo, clock: ManualClock, out: TextIO | None = None) -> bool:
    """Run every step on ``apollo`` (whose clock must be ``clock``); True when every claim
    held."""
    tour = Tour(apollo, clock, out or sys.stdout)
    policy = apollo.policy
    claude = apollo.client("claude-net-1", Principal("alice"))
    openai = apollo.client("openai-net-2", Principal("bob"))
    gemini = apollo.client("gemini-ops-3", Principal("carol"))
    human = apollo.client("human-ops-4", Principal("dana", role=Role.ADMIN))
    troll = apollo.client("troll-bot-9", Principal("mallory"))
    try:
        ids = await _publish(tour, claude, gemini, troll)
        await _deduplicate(tour, claude, ids)
        await _bootstrap(tour, openai, gemini, ids)
        await _agree(tour, openai, ids)
        await _corroborate_on_ingest(tour, human, ids)
        await _query(tour, human, ids)
        await _private(tour, claude, openai, ids)
        await _traverse(tour, claude, ids)
        await _contradict(tour, gemini, claude, ids)
        await _resolve(tour, human, ids)
        await _expertise(tour, human, ids, "before the decay")
        await _decay(tour, ids)
        await _expertise(tour, human, ids, "after the decay")
    except TourFailed:
        pass
    stats = await apollo.stats()
    tour.say("")
    tour.say(
        f"store, as an anonymous caller sees it (global entries only): {stats.total} of the "
        f"{len(tour.labels)} entries the tour created, by status "
        + ", ".join(f"{s.value} {stats.by_status.get(s.value, 0)}" for s in Status)
        + f"; {stats.total_relations} relations"
    )
    if tour.mismatches:
        tour.say(f"{len(tour.mismatches)} step(s) did not turn out as narrated:")
        for mismatch in tour.mismatches:
            tour.say(f"  - {mismatch}")
        return False
    tour.say(
        f"every claim of the tour held (policy: {policy.corroboration_similarity} to "
        f"corroborate, {policy.contradiction_similarity} to compare for contradictions)"
    )
    return True


async def _store(tour: Tour, client: Client, label: str, content: str, **fields: Any) -> Any:
    result = await client.store_knowledge(content=content, content_type="fact", **fields)
    confidence = "-" if result.confidence is None else f"{result.confidence:.2f}"
    status = result.status.value if result.status else "-"
    if result.outcome is Outcome.CREATED and result.entry_id is not None:
        tour.labels[result.entry_id] = label
    tour.say(
        f'{client.agent_id} stores {label} "{_short(content)}"\n'
        f"      -> {result.outcome.value} ({status}, confidence {confidence})"
        + (f", entry {tour.name(result.entry_id)}" if result.entry_id else "")
        + (f": {result.reason}" if result.outcome is Outcome.REJECTED else "")
    )
    return result


async def _publish(tour: Tour, claude: Client, gemini: Client, troll: Client) -> dict[str, UUID]:
    policy = tour.apollo.policy
    tour.step("Agents publish what they learned")
    ids: dict[str, UUID] = {}
    for label, client, text, domain in (
        ("BGP", claude, BGP, "networking"),
        ("HELLO", gemini, OSPF_HELLO, "routing"),
        ("MCAST", claude, MULTICAST, "networking"),
    ):
        result = await _store(tour, client, label, text, knowledge_domain=domain)
        tour.require(
            result.outcome is Outcome.CREATED
            and result.status is Status.CANDIDATE
            and result.confidence == policy.initial_confidence,
            f"a new candidate at the initial confidence {policy.initial_confidence}",
            (result.outcome.value, result.confidence),
        )
        ids[label] = result.entry_id
    tour.why("nothing similar was known: new knowledge starts as a candidate")

    await tour.apollo.run(LabelSource(target_agent_id=troll.agent_id, label="flagged"))
    credibility = await tour.credibility(troll.agent_id)
    tour.say(f"an admin flags {troll.agent_id}: its credibility is now {credibility:.2f}")
    result = await _store(tour, troll, "BOGUS", BGP_WRONG, knowledge_domain="networking")
    tour.why(
        f"admission rejects a source whose credibility {credibility:.2f} is at or below "
        f"the floor {policy.credibility_floor}, before anything is embedded or stored"
    )
    tour.expect(
        result.outcome is Outcome.REJECTED and (result.reason or "").startswith("low_credibility"),
        "the flagged agent's claim is rejected for low credibility",
        (result.outcome.value, result.reason),
    )
    return ids


async def _deduplicate(tour: Tour, claude: Client, ids: dict[str, UUID]) -> None:
    tour.step("An exact duplicate is recorded against the existing entry")
    result = await _store(tour, claude, "BGP (again)", BGP_AGAIN, knowledge_domain="networking")
    tour.why(
        "same content hash (case and runs of whitespace are ignored) in the same scope; the "
        "entry is only a candidate, so the repeat is recorded but boosts nothing"
    )
    tour.expect(
        result.outcome is Outcome.DEDUPLICATED
        and result.entry_id == ids["BGP"]
        and result.confidence == tour.apollo.policy.initial_confidence,
        "deduplicated onto BGP, confidence unchanged",
        (result.outcome.value, tour.name(result.entry_id), result.confidence),
    )


async def _bootstrap(tour: Tour, openai: Client, gemini: Client, ids: dict[str, UUID]) -> None:
    policy = tour.apollo.policy
    tour.step("Two independent sources bootstrap a confirmation")
    a = await _store(tour, openai, "OSPF-A", OSPF_A, knowledge_domain="routing")
    tour.clock.advance(minutes=1)
    b = await _store(tour, gemini, "OSPF-B", OSPF_B, knowledge_domain="routing")
    tour.require(
        a.outcome is Outcome.CREATED and b.outcome is Outcome.CREATED,
        "both paraphrases stored as candidates",
        (a.outcome.value, b.outcome.value),
    )
    ids["OSPF-A"], ids["OSPF-B"] = a.entry_id, b.entry_id
    similarity = await tour.cosine(OSPF_A, OSPF_B)
    tour.why(
        f"OSPF-B is {similarity:.3f} similar to OSPF-A, but a candidate is never boosted on "
        "ingest: OSPF-B becomes its own candidate and the periodic checker pairs them"
    )
    tour.expect(
        similarity >= policy.corroboration_similarity,
        f"cosine >= {policy.corroboration_similarity}",
        round(similarity, 3),
    )

    report = await tour.apollo.check_corroboration()
    entry_a = await tour.entry(a.entry_id)
    entry_b = await tour.entry(b.entry_id)
    expected = policy.after_corroboration(policy.initial_confidence, 0.5)
    tour.say(
        f"corroboration checker: scanned {report.scanned}, bootstrapped {report.bootstrapped}, "
        f"promoted {report.promoted}"
    )
    tour.say(
        f"OSPF-A: candidate -> {entry_a.status.value}, confidence "
        f"{policy.initial_confidence:.2f} -> {entry_a.confidence:.2f}; "
        f"OSPF-B stays {entry_b.status.value}"
    )
    tour.why(
        "a pair of candidates that corroborate each other (cosine >= "
        f"{policy.corroboration_similarity}, same domain and type, independent sources: "
        "openai vs gemini) confirms ONE entry, the older; boost +"
        f"{policy.corroboration_boost} x min(1, 2 x credibility 0.5)"
    )
    paired = entry_a.source_context.get("bootstrap", {})
    tour.expect(
        report.bootstrapped == 1
        and entry_a.status is Status.CONFIRMED
        and math.isclose(entry_a.confidence, expected)
        and entry_b.status is Status.CANDIDATE
        and paired.get("paired_with") == str(b.entry_id),
        f"OSPF-A confirmed at {expected:.2f}, paired with OSPF-B, which stays a candidate",
        (report.bootstrapped, entry_a.status.value, entry_a.confidence, entry_b.status.value),
    )
    again = await tour.apollo.check_corroboration()
    entry_b = await tour.entry(b.entry_id)
    tour.say(f"checker again: promoted {again.promoted}, bootstrapped {again.bootstrapped}")
    tour.why("a bootstrap-derived entry never confirms the partner it was paired with")
    tour.expect(
        again.promoted == 0 and entry_b.status is Status.CANDIDATE,
        "OSPF-B is still a candidate",
        entry_b.status.value,
    )


async def _agree(tour: Tour, openai: Client, ids: dict[str, UUID]) -> None:
    policy = tour.apollo.policy
    tour.step("Independent sources agreeing word for word confirm a fact")
    result = await _store(
        tour, openai, "MCAST (agreeing)", MULTICAST, knowledge_domain="networking"
    )
    tour.why(
        f"{openai.agent_id} is independent of claude-net-1 (another provider), so the exact "
        "repeat of a candidate is recorded as agreement instead of a plain duplicate"
    )
    tour.expect(
        result.outcome is Outcome.DEDUPLICATED
        and result.entry_id == ids["MCAST"]
        and result.reason == "agreement recorded",
        "deduplicated onto MCAST: agreement recorded",
        (result.outcome.value, tour.name(result.entry_id), result.reason),
    )
    report = await tour.apollo.check_corroboration()
    entry = await tour.entry(ids["MCAST"])
    agreed = entry.source_context.get("bootstrap", {}).get("agreement", [])
    tour.say(
        f"corroboration checker: bootstrapped {report.bootstrapped}; MCAST is now "
        f"{entry.status.value} at {entry.confidence:.2f}, agreed by {', '.join(agreed)}"
    )
    tour.why(
        "a candidate whose evidence holds two mutually independent sources is a bootstrap "
        "pair on its own: no second entry is needed"
    )
    tour.expect(
        entry.status is Status.CONFIRMED and entry.confidence > policy.initial_confidence,
        "MCAST confirmed by agreement",
        (entry.status.value, entry.confidence),
    )


async def _corroborate_on_ingest(tour: Tour, human: Client, ids: dict[str, UUID]) -> None:
    policy = tour.apollo.policy
    tour.step("A third independent source corroborates the confirmed entry on ingest")
    before = (await tour.entry(ids["OSPF-A"])).confidence
    result = await _store(tour, human, "OSPF-C", OSPF_C, knowledge_domain="routing")
    similarity = await tour.cosine(OSPF_C, OSPF_A)
    evidence = await tour.apollo.get_evidence(ids["OSPF-A"])
    expected = policy.after_corroboration(before, 0.5)
    tour.say(
        f"OSPF-A confidence {before:.2f} -> {result.confidence:.2f}; evidence from "
        + ", ".join(e.source.agent_id for e in evidence)
    )
    tour.why(
        f"cosine {similarity:.3f} >= {policy.corroboration_similarity} to a CONFIRMED entry and "
        "a source (provider human) independent of every source already on it: no new entry, "
        "the confirmed one is boosted (capped at 1.0)"
    )
    tour.expect(
        result.outcome is Outcome.CORROBORATED
        and result.entry_id == ids["OSPF-A"]
        and math.isclose(result.confidence or 0.0, expected)
        and len(evidence) == 3,
        f"corroborated OSPF-A up to {expected:.2f} with 3 independent sources",
        (result.outcome.value, result.confidence, len(evidence)),
    )


async def _confidences(tour: Tour, ids: Mapping[str, UUID]) -> dict[UUID, float]:
    return {entry_id: (await tour.entry(entry_id)).confidence for entry_id in ids.values()}


async def _query(tour: Tour, human: Client, ids: dict[str, UUID]) -> None:
    policy = tour.apollo.policy
    tour.step("A query ranks by similarity and boosts what it returns")
    before = await _confidences(tour, ids)
    question = "OSPF designated router on a broadcast network segment"
    found = await human.query_knowledge(question, limit=3)
    tour.say(f'{human.agent_id} asks "{question}"')
    for rank, view in enumerate(found.entries, 1):
        old = before.get(view.id, float("nan"))
        tour.say(
            f"  {rank}. {tour.name(view.id):7} similarity {view.similarity or 0.0:.3f}  "
            f"{view.status.value:9} confidence {old:.2f} -> {view.confidence:.2f}"
        )
    tour.why(
        f"each returned entry gains the retrieval boost +{policy.retrieval_boost} "
        "(capped at 1.0): knowledge that is used stays alive"
    )
    top = found.entries[0].id if found.entries else None
    tour.expect(
        top in (ids["OSPF-A"], ids["OSPF-B"]),
        "an OSPF paraphrase ranks first",
        tour.name(top),
    )
    boosted = all(
        math.isclose(v.confidence, min(before[v.id] + policy.retrieval_boost, 1.0))
        for v in found.entries
    )
    tour.expect(boosted and len(found) > 0, "every returned entry got the retrieval boost")


async def _private(tour: Tour, claude: Client, openai: Client, ids: dict[str, UUID]) -> None:
    tour.step("Private knowledge stays with its owner")
    result = await _store(
        tour, claude, "LAB", LAB_VLAN, knowledge_domain="lab", access_scope="private"
    )
    tour.require(result.outcome is Outcome.CREATED, "the private entry is stored")
    ids["LAB"] = result.entry_id
    question = "lab switches out-of-band management VLAN"
    theirs = await openai.query_knowledge(question, min_confidence=0.0)
    mine = await claude.query_knowledge(question, min_confidence=0.0)
    try:
        await tour.apollo.get_entry(result.entry_id, principal=openai.principal)
        hidden = False
    except NotFound:
        hidden = True
    tour.say(
        f"bob ({openai.agent_id}) gets {len(theirs)} results, none of them LAB; "
        f"alice ({claude.agent_id}) finds {tour.name(mine.entries[0].id if mine.entries else None)}"
        " first"
    )
    tour.why("a private entry is visible only to the principal that wrote it (alice)")
    tour.expect(
        result.entry_id not in {v.id for v in theirs.entries}
        and hidden
        and bool(mine.entries)
        and mine.entries[0].id == result.entry_id,
        "invisible to bob (query and direct read), first for alice",
    )


async def _traverse(tour: Tour, claude: Client, ids: dict[str, UUID]) -> None:
    tour.step("Typed relations and spreading activation")
    await claude.link_entries(ids["OSPF-A"], ids["HELLO"], "depends_on", 1.0)
    await claude.link_entries(ids["HELLO"], ids["MCAST"], "depends_on", 0.9)
    tour.say("linked OSPF-A -depends_on(1.0)-> HELLO -depends_on(0.9)-> MCAST")
    tour.say("(the checker already linked OSPF-A -similar_to(cosine)-> OSPF-B)")
    related = await claude.related_entries(ids["OSPF-A"], depth=2)
    for item in related:
        tour.say(
            f"  {tour.name(item.id):7} via {item.relation_type.value:10} depth {item.depth} "
            f"activation {item.activation:.3f} (from {tour.name(item.via)})"
        )
    tour.why(
        f"activation = parent x {DECAY_PER_HOP} x relation weight, keeping the best path to "
        "each entry, while depth < 2 and activation > 0.1"
    )
    similarity = await tour.cosine(OSPF_A, OSPF_B)
    expected = {
        ids["HELLO"]: DECAY_PER_HOP * 1.0,
        ids["OSPF-B"]: DECAY_PER_HOP * similarity,
        ids["MCAST"]: DECAY_PER_HOP * 1.0 * DECAY_PER_HOP * 0.9,
    }
    got = {item.id: item.activation for item in related}
    tour.expect(
        got.keys() == expected.keys()
        and all(math.isclose(got[k], v, abs_tol=1e-3) for k, v in expected.items())
        and [item.id for item in related] == sorted(expected, key=lambda k: -expected[k]),
        "HELLO 0.600, OSPF-B 0.6 x cosine, MCAST 0.324, in that order",
        {tour.name(k): round(v, 3) for k, v in got.items()},
    )


async def _contradict(tour: Tour, gemini: Client, claude: Client, ids: dict[str, UUID]) -> None:
    policy = tour.apollo.policy
    tour.step("A contradiction is found and disputes both sides")
    enabled = await _store(tour, gemini, "RA-ON", RA_ENABLED, knowledge_domain="operations")
    tour.clock.advance(minutes=1)
    disabled = await _store(tour, claude, "RA-OFF", RA_DISABLED, knowledge_domain="operations")
    tour.require(
        enabled.outcome is Outcome.CREATED and disabled.outcome is Outcome.CREATED,
        "both claims stored",
        (enabled.outcome.value, disabled.outcome.value),
    )
    ids["RA-ON"], ids["RA-OFF"] = enabled.entry_id, disabled.entry_id
    report = await tour.apollo.process_outbox()
    on = await tour.entry(enabled.entry_id)
    off = await tour.entry(disabled.entry_id)
    similarity = await tour.cosine(RA_ENABLED, RA_DISABLED)
    tour.say(
        f"contradiction scan: {report.processed} queued scans, {report.contradictions} "
        f"contradiction(s); RA-ON is {on.status.value}, RA-OFF is {off.status.value}"
    )
    tour.why(
        f"cosine {similarity:.3f} > {policy.contradiction_similarity} and the heuristic judge "
        "sees the antonyms enabled/disabled over the same entities; neither side is well "
        "established (confidence >= 0.8 with 2 independent sources), so both are disputed"
    )
    edges = await claude.related_entries(disabled.entry_id, depth=1, relation_types=["contradicts"])
    tour.expect(
        report.contradictions == 1
        and on.status is Status.DISPUTED
        and off.status is Status.DISPUTED
        and [e.id for e in edges] == [enabled.entry_id],
        "exactly one contradiction (RA-OFF -contradicts-> RA-ON), both disputed",
        (report.contradictions, on.status.value, off.status.value),
    )


async def _resolve(tour: Tour, human: Client, ids: dict[str, UUID]) -> None:
    tour.step("A reviewer settles the dispute")
    cred_on = await tour.credibility("gemini-ops-3")
    cred_off = await tour.credibility("claude-net-1")
    accepted = await human.resolve_dispute(ids["RA-ON"], "accept")
    rejected = await tour.entry(ids["RA-OFF"])
    new_on = await tour.credibility("gemini-ops-3")
    new_off = await tour.credibility("claude-net-1")
    reason = rejected.source_context.get("archive_reason")
    tour.say(f"accept RA-ON -> {accepted.status.value}; RA-OFF -> {rejected.status.value}")
    tour.say(
        f"credibility gemini-ops-3 {cred_on:.2f} -> {new_on:.2f}, "
        f"claude-net-1 {cred_off:.2f} -> {new_off:.2f}"
    )
    tour.why(
        "accepting one side settles both (confidence unchanged): RA-ON is confirmed and "
        "RA-OFF, which it contradicts, is archived as lost_dispute; the accepted source's "
        "Beta(a, b) gains a validation (a + 1), the other side's a refutation (b + 1)"
    )
    tour.expect(
        accepted.status is Status.CONFIRMED
        and rejected.status is Status.ARCHIVED
        and reason == "lost_dispute"
        and math.isclose(new_on, 2 / 3)
        and math.isclose(new_off, 1 / 3),
        "confirmed / archived (lost_dispute); credibility 0.67 and 0.33",
        (accepted.status.value, rejected.status.value, round(new_on, 3), round(new_off, 3)),
    )


async def _active_by_agent_domain(
    tour: Tour, ids: Mapping[str, UUID], viewer: Principal
) -> tuple[dict[tuple[str, str], list[Entry]], dict[tuple[str, str], int]]:
    """The viewer's visible active entries by (agent, domain), and the corroborations and
    agreements each agent earned on them by domain: what its expertise views are computed
    from."""
    groups: dict[tuple[str, str], list[Entry]] = {}
    earned: dict[tuple[str, str], int] = {}
    for entry_id in dict.fromkeys(ids.values()):
        try:
            entry = await tour.apollo.get_entry(entry_id, principal=viewer)
        except NotFound:
            continue
        if entry.is_active:
            key = (entry.source.agent_id, entry.knowledge_domain)
            groups.setdefault(key, []).append(entry)
            for item in await tour.apollo.get_evidence(entry_id):
                if item.kind in AGREEING_KINDS:
                    mine = (item.source.agent_id, entry.knowledge_domain)
                    earned[mine] = earned.get(mine, 0) + 1
    return groups, earned


async def _expertise(tour: Tour, human: Client, ids: dict[str, UUID], when: str) -> None:
    tour.step(f"Expertise and domains at risk, {when}")
    await tour.apollo.aggregate_expertise()
    groups, earned = await _active_by_agent_domain(tour, ids, human.principal)
    domains = sorted({domain for _, domain in groups})
    mismatched = []
    for domain in domains:
        records = await human.get_expertise(domain)
        shown = ", ".join(f"{r.agent_id} {r.proficiency:.2f} ({r.entry_count})" for r in records)
        tour.say(f"{domain:11} {shown}")
        for r in records:
            entries = groups.get((r.agent_id, domain), [])
            expected = proficiency(
                sum(e.confidence for e in entries) / len(entries) if entries else 0.0,
                len(entries),
                sum(e.status is Status.CONFIRMED for e in entries),
                earned.get((r.agent_id, domain), 0),
            )
            if not math.isclose(r.proficiency, expected, abs_tol=1e-6):
                mismatched.append((r.agent_id, domain, r.proficiency, expected))
    tour.why(
        "proficiency = min(average confidence of the agent's active entries x log2(n + 1), 1), "
        "n = its confirmed entries + the corroborations it earned + 0.25 per other entry "
        f"(at most 0.5), over the entries {human.principal.id} may see (alice's private lab "
        "note is not among them)"
    )
    tour.expect(not mismatched, "every proficiency follows the formula", mismatched or None)
    at_risk = await human.domains_at_risk(min_agents=2)
    agents_per_domain: dict[str, set[str]] = {}
    for agent, domain in groups:
        agents_per_domain.setdefault(domain, set()).add(agent)
    expected_risk = sorted(d for d, agents in agents_per_domain.items() if len(agents) < 2)
    tour.say(
        f"domains at risk (fewer than 2 agents with active knowledge {human.principal.id} "
        "may see): "
        + (", ".join(f"{c.knowledge_domain} ({', '.join(c.agents)})" for c in at_risk) or "none")
    )
    tour.expect(
        sorted(c.knowledge_domain for c in at_risk) == expected_risk,
        f"at risk: {', '.join(expected_risk) or 'none'}",
        [c.knowledge_domain for c in at_risk],
    )


async def _decay(tour: Tour, ids: dict[str, UUID]) -> None:
    policy = tour.apollo.policy
    tour.step(f"{DECAY_WEEKS} weeks pass: decay archives what faded")
    tour.clock.advance(weeks=DECAY_WEEKS)
    now = tour.clock.now()
    before = {}
    for label, entry_id in ids.items():
        entry = await tour.entry(entry_id)
        if entry.is_active:
            before[label] = entry
    result = await tour.apollo.run_decay_cycle()
    tour.say(f"decay cycle: {result.affected} decayed, {result.archived} archived")
    wrong = []
    survivors = []
    for label, entry in before.items():
        hours = (now - (entry.decayed_at or entry.created_at)).total_seconds() / 3600
        expected = policy.decayed(entry.confidence, hours)
        archived = policy.should_archive(expected)
        if not archived:
            survivors.append(label)
        after = await tour.entry(entry.id)
        tour.say(
            f"  {label:7} {entry.status.value:9} {entry.confidence:.2f} -> {after.confidence:.3f}"
            f"  {'archived' if after.status is Status.ARCHIVED else 'kept'}"
        )
        if (after.status is Status.ARCHIVED) != archived or not math.isclose(
            after.confidence, expected, rel_tol=1e-4
        ):
            wrong.append((label, after.status.value, after.confidence, expected))
    factor = policy.decay_multiplier(DECAY_WEEKS * 7 * 24)
    tour.why(
        f"confidence x {policy.decay_factor_per_hour}^hours ({factor:.3f} over {DECAY_WEEKS} "
        f"weeks), then active entries below {policy.archive_below} are archived: only "
        "knowledge that was corroborated well enough survives unused"
    )
    tour.expect(
        not wrong and "OSPF-A" in survivors and result.archived == len(before) - len(survivors),
        "every entry decayed as computed; what survives was corroborated by several "
        f"sources: {', '.join(survivors)}",
        wrong or survivors,
    )


async def run_demo(*, in_memory: bool, out: TextIO | None = None) -> bool:
    """The tour on the in-memory store, or on an embedded PostgreSQL in a temporary folder
    (removed afterwards): never on the user's data."""
    import shutil

    from .settings import Settings

    stream = out or sys.stdout
    clock = manual_clock()
    if in_memory:
        print("Apollo tour on the in-memory store", file=stream)
        async with Apollo.in_memory(clock=clock) as apollo:
            return await run_tour(apollo, clock, stream)
    folder = server_folder("apollo-demo-")
    try:
        print(f"Apollo tour on an embedded PostgreSQL + pgvector in {folder}", file=stream)
        # The hashing embedder, as in memory: the tour says the same on both stores.
        settings = Settings(data_dir=folder, embedder="hashing")
        async with Apollo.open(settings, clock=clock) as apollo:
            return await run_tour(apollo, clock, stream)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["Tour", "run_demo", "run_tour"]
