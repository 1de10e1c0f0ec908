"""An in-memory agent mesh: many agents publishing noisy knowledge into one Apollo.

Each agent has a few home domains. Every domain has a set of true facts ("the databases
ledger keeps 3 replicas of every shard"); agents phrase them in their own style ("Note:
...", "Seen: ..."), so two agents' versions of one fact are near-paraphrases that can
corroborate each other, and with probability ``noise`` an agent gets the number wrong,
which the heuristic contradiction judge catches. A manual clock moves one hour per tick;
every few ticks a moderator reviews the disputes raised so far, then the periodic work
runs (corroboration, contradiction scan, decay, expertise). Deterministic for a given seed.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta
from uuid import UUID

import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from apollo_domain.errors import ValidationError
from apollo_domain.expertise import DomainCoverage
from apollo_domain.model import Outcome, Principal, Role, Status
from apollo_domain.policy import ConfidencePolicy

from .bootstrap import hashing_embedder, manual_clock
from .facade import Apollo
from .tick import knowledge_retrieval

#: How an agent prefixes what it publishes; one style per agent (cycled).
STYLES = ("Note:", "Fact:", "Seen:", "Tip:", "Info:", "Log:")
#: Providers the agents' ids start with; past the fifth agent ids have no known provider.
PROVIDERS = ("claude", "openai", "gemini", "human", "system")
DOMAIN_NAMES = (
    "networking",
    "databases",
    "security",
    "storage",
    "observability",
    "compilers",
    "scheduling",
    "messaging",
)
SUBJECTS = (
    "ledger",
    "scheduler",
    "gateway",
    "indexer",
    "resolver",
    "collector",
    "broker",
    "mailer",
    "renderer",
    "crawler",
    "archiver",
    "notifier",
    "tracer",
    "planner",
    "uploader",
    "mirror",
    "keystore",
    "bouncer",
    "poller",
    "sampler",
    "balancer",
    "watcher",
    "compactor",
    "exporter",
    "importer",
    "signer",
    "verifier",
    "deduper",
    "throttler",
    "allocator",
    "janitor",
    "registrar",
)
#: (attribute with a number, lowest and highest value of the number); each fact of a run
#: gets its own attribute, so two distinct facts share hardly any words.
ATTRIBUTES = (
    ("listens on port {n} by default", 1024, 9999),
    ("retries a failed request {n} times before giving up", 2, 9),
    ("keeps {n} replicas of every shard", 2, 7),
    ("rotates its log files every {n} hours", 2, 48),
    ("closes idle connections after {n} seconds", 5, 300),
    ("caps each batch at {n} records", 100, 5000),
    ("stores nightly snapshots for {n} days", 3, 90),
    ("runs {n} worker threads per node", 2, 64),
    ("compresses payloads larger than {n} kilobytes", 4, 512),
    ("expires cached tokens after {n} minutes", 5, 120),
    ("reserves {n} gigabytes of memory at startup", 1, 64),
    ("samples one trace in {n} requests", 10, 1000),
    ("pings its peers every {n} milliseconds", 50, 900),
    ("accepts at most {n} concurrent uploads", 2, 200),
    ("schedules compaction at {n} percent disk usage", 50, 95),
    ("waits {n} seconds between health probes", 2, 60),
    ("shards incoming streams into {n} partitions", 2, 128),
    ("tolerates {n} unreachable zones during elections", 1, 5),
    ("limits each tenant to {n} queries per second", 10, 900),
    ("pins TLS certificates valid for {n} weeks", 2, 52),
    ("buffers up to {n} megabytes before flushing", 8, 512),
    ("drains queues with {n} parallel consumers", 2, 48),
    ("alerts when latency exceeds {n} milliseconds", 20, 2000),
    ("upgrades nodes in waves of {n} machines", 2, 40),
)
MAX_FACTS_PER_DOMAIN = 4
MAX_DOMAINS = len(ATTRIBUTES)
HOME_DOMAINS = 2
QUERY_LIMIT = 3
#: Two distinct facts stay below this similarity (under the contradiction scan's 0.7).
DISTINCT_FACT_CEILING = 0.65
NEW_SOURCE_CREDIBILITY = 0.5
#: A mesh whose agents get one fact in twenty wrong.
DEFAULT_NOISE = 0.05
#: The reviewer who resolves disputes (an admin who knows the true facts).
MODERATOR = "moderator"
_SUBJECT_ATTEMPTS = 12


@frozen
class Fact:
    """One true fact of a domain: ``the {domain} {subject} {attribute}`` with ``value``."""

    domain: str
    subject: str
    attribute: str
    low: int
    high: int
    value: int

    def text(self, style: str, value: int | None = None) -> str:
        number = self.value if value is None else value
        return f"{style} the {self.domain} {self.subject} service {self.attribute.format(n=number)}"

    def query(self) -> str:
        """What an agent asks to find this fact: its words without the number."""
        return f"{self.domain} {self.subject} {self.attribute.replace('{n} ', '')}"

    def wrong_value(self, rng: random.Random) -> int:
        while True:
            value = rng.randint(self.low, self.high)
            if value != self.value:
                return value


@frozen
class Agent:
    agent_id: str
    style: str
    home_domains: tuple[str, ...]


@frozen
class SimulationResult:
    """What a run produced. ``by_status`` counts every entry of the store by status."""

    agents: int
    ticks: int
    domains: tuple[str, ...]
    seed: int
    noise: float
    published: int
    wrong_published: int
    outcomes: Mapping[str, int]
    by_status: Mapping[str, int]
    promoted: int
    bootstrapped: int
    contradictions: int
    #: Entries created from wrong facts, and how many of them are still active at the end.
    wrong_entries: int
    wrong_active: int
    #: Disputed entries the moderator accepted (true) and rejected (wrong).
    accepted: int
    rejected: int
    queries: int
    query_hits: int
    expertise: Mapping[str, tuple[tuple[str, float], ...]]
    at_risk: tuple[DomainCoverage, ...]
    wall_seconds: float = field(eq=False)

    @property
    def confirmations(self) -> int:
        return self.promoted + self.bootstrapped


def _agents(count: int, domains: Sequence[str], rng: random.Random) -> list[Agent]:
    homes = min(HOME_DOMAINS, len(domains))
    agents = []
    for i in range(count):
        provider = PROVIDERS[i] if i < len(PROVIDERS) else "mesh"
        agents.append(
            Agent(
                agent_id=f"{provider}-sim-{i + 1}",
                style=STYLES[i % len(STYLES)],
                home_domains=tuple(sorted(rng.sample(list(domains), homes))),
            )
        )
    return agents


def generate_facts(domains: Sequence[str], rng: random.Random) -> dict[str, list[Fact]]:
    """Up to :data:`MAX_FACTS_PER_DOMAIN` true facts per domain, drawn so that the hashing
    embedder sees each fact's styled versions as corroborating paraphrases (similarity in
    [0.9, 0.96)) and any two distinct facts as unrelated (below
    :data:`DISTINCT_FACT_CEILING`, so no contradiction scan ever compares them)."""
    embedder = hashing_embedder()
    policy = ConfidencePolicy()
    # a new source (credibility 0.5) is admitted only while 0.5 · (1 − similarity) ≥ threshold
    novelty_ceiling = 1.0 - policy.admission_novelty_threshold / NEW_SOURCE_CREDIBILITY
    subjects = list(SUBJECTS)
    chosen_vectors: list[npt.NDArray[np.float32]] = []
    unused = list(ATTRIBUTES)
    rng.shuffle(unused)
    per_domain = max(1, min(MAX_FACTS_PER_DOMAIN, len(ATTRIBUTES) // max(len(domains), 1)))
    facts: dict[str, list[Fact]] = {}

    def fits(vectors: npt.NDArray[np.float32]) -> bool:
        pairs = vectors @ vectors.T
        paraphrases = pairs[np.triu_indices(len(STYLES), k=1)]
        return (
            float(paraphrases.min()) >= policy.corroboration_similarity
            and float(paraphrases.max()) < novelty_ceiling
            and all(
                float(np.max(vectors @ other.T)) < DISTINCT_FACT_CEILING for other in chosen_vectors
            )
        )

    for domain in domains:
        found: list[Fact] = []
        for attribute, low, high in list(unused):
            if len(found) == per_domain:
                break
            for _ in range(_SUBJECT_ATTEMPTS):
                if not subjects:
                    subjects = [f"{s}{len(chosen_vectors)}" for s in SUBJECTS]
                subject = subjects[rng.randrange(len(subjects))]
                fact = Fact(domain, subject, attribute, low, high, rng.randint(low, high))
                vectors = embedder.embed_sync([fact.text(style) for style in STYLES])
                if fits(vectors):
                    subjects.remove(subject)
                    chosen_vectors.append(vectors)
                    unused.remove((attribute, low, high))
                    found.append(fact)
                    break
        if not found:
            raise ValidationError("domains", f"cannot draw distinct facts for {len(domains)}")
        facts[domain] = found
    return facts


def domain_names(count: int) -> tuple[str, ...]:
    return tuple(
        DOMAIN_NAMES[i] if i < len(DOMAIN_NAMES) else f"domain-{i + 1}" for i in range(count)
    )


async def simulate(
    agents: int,
    ticks: int,
    domains: int,
    *,
    seed: int = 0,
    noise: float = DEFAULT_NOISE,
    maintenance_every: int = 5,
    review: bool = True,
) -> SimulationResult:
    """Run the mesh: per tick each agent publishes one fact and runs one query (the
    ``knowledge_retrieval`` phase of its tick, :mod:`apollo_app.tick`); every
    ``maintenance_every`` ticks (and at the end) the periodic work runs. With ``review`` a
    moderator who knows the truth first resolves the disputes the previous round raised
    (accepting true entries, rejecting wrong ones), as a mesh's reviewers would."""
    if agents < 1:
        raise ValidationError("agents", f"must be at least 1, got {agents}")
    if ticks < 1:
        raise ValidationError("ticks", f"must be at least 1, got {ticks}")
    if not 1 <= domains <= MAX_DOMAINS:
        raise ValidationError("domains", f"must be between 1 and {MAX_DOMAINS}, got {domains}")
    if not 0.0 <= noise <= 1.0:
        raise ValidationError("noise", f"must be within [0, 1], got {noise}")
    if maintenance_every < 1:
        raise ValidationError("maintenance_every", f"must be at least 1, got {maintenance_every}")
    started = time.perf_counter()
    rng = random.Random(seed)
    names = domain_names(domains)
    facts = generate_facts(names, rng)
    mesh = _agents(agents, names, rng)
    clock = manual_clock()
    start = clock.now()
    outcomes: Counter[str] = Counter()
    published = wrong = queries = hits = 0
    promoted = bootstrapped = contradictions = 0
    created: list[UUID] = []
    wrong_entries: set[UUID] = set()
    reviewed: Counter[str] = Counter()

    async with Apollo.in_memory(clock=clock) as apollo:
        clients = {a.agent_id: apollo.client(a.agent_id) for a in mesh}
        moderator = apollo.client(MODERATOR, Principal(MODERATOR, role=Role.ADMIN))

        async def review_disputes() -> None:
            for entry_id in created:
                entry = await apollo.get_entry(entry_id)
                if entry.status is Status.DISPUTED:
                    verdict = "reject" if entry_id in wrong_entries else "accept"
                    await moderator.resolve_dispute(entry_id, verdict)
                    reviewed[verdict] += 1

        async def maintain() -> None:
            nonlocal promoted, bootstrapped, contradictions
            if review:
                await review_disputes()
            report = await apollo.check_corroboration()
            promoted += report.promoted
            bootstrapped += report.bootstrapped
            contradictions += (await apollo.process_outbox(limit=10_000)).contradictions
            await apollo.run_decay_cycle()
            await apollo.aggregate_expertise()

        for tick in range(ticks):
            order = list(mesh)
            rng.shuffle(order)
            for step, agent in enumerate(order):
                clock.set(start + timedelta(hours=tick, seconds=step))
                domain = rng.choice(agent.home_domains)
                fact = rng.choice(facts[domain])
                value = None
                if rng.random() < noise:
                    value = fact.wrong_value(rng)
                    wrong += 1
                client = clients[agent.agent_id]
                result = await client.store_knowledge(
                    content=fact.text(agent.style, value),
                    content_type="fact",
                    knowledge_domain=domain,
                    tags=[domain],
                )
                outcomes[result.outcome.value] += 1
                published += 1
                if result.outcome is Outcome.CREATED and result.entry_id is not None:
                    created.append(result.entry_id)
                    if value is not None:
                        wrong_entries.add(result.entry_id)
                asked = rng.choice(facts[rng.choice(agent.home_domains)])
                # phase 4 of the agent's tick: its local memory holds no match, so it
                # asks Apollo (the phase retrieves: no access log of its own)
                phase = await knowledge_retrieval(client, asked.query(), (), limit=QUERY_LIMIT)
                queries += 1
                hits += len(phase.entries)
            if (tick + 1) % maintenance_every == 0:
                await maintain()
        if ticks % maintenance_every:
            await maintain()

        stats = await apollo.stats()
        observer = apollo.client("simulation")
        expertise = {}
        for domain in names:
            records = await observer.get_expertise(domain)
            expertise[domain] = tuple((r.agent_id, r.proficiency) for r in records[:3])
        at_risk = tuple(await observer.domains_at_risk(min_agents=2))
        wrong_active = 0
        for entry_id in wrong_entries:
            wrong_active += (await apollo.get_entry(entry_id)).is_active

    return SimulationResult(
        agents=agents,
        ticks=ticks,
        domains=names,
        seed=seed,
        noise=noise,
        published=published,
        wrong_published=wrong,
        outcomes={o.value: outcomes.get(o.value, 0) for o in Outcome},
        by_status={s.value: int(stats.by_status.get(s.value, 0)) for s in Status},
        wrong_entries=len(wrong_entries),
        wrong_active=wrong_active,
        accepted=reviewed["accept"],
        rejected=reviewed["reject"],
        promoted=promoted,
        bootstrapped=bootstrapped,
        contradictions=contradictions,
        queries=queries,
        query_hits=hits,
        expertise=expertise,
        at_risk=at_risk,
        wall_seconds=time.perf_counter() - started,
    )


def format_result(result: SimulationResult) -> str:
    """A human-readable summary of a run."""
    lines = [
        f"simulated {result.agents} agents x {result.ticks} ticks over "
        f"{len(result.domains)} domains (seed {result.seed}, noise {result.noise:g})",
        f"published {result.published} facts ({result.wrong_published} wrong), "
        f"ran {result.queries} queries ({result.query_hits} results)",
        "ingest outcomes: "
        + ", ".join(f"{name} {count}" for name, count in result.outcomes.items()),
        "entries by status: "
        + ", ".join(f"{name} {count}" for name, count in result.by_status.items()),
        f"confirmations: {result.confirmations} "
        f"({result.bootstrapped} bootstrapped from candidate pairs, "
        f"{result.promoted} by a confirmed entry)",
        f"contradictions found: {result.contradictions}",
        "expertise (top agents per domain):",
    ]
    for domain in result.domains:
        top = result.expertise.get(domain, ())
        shown = ", ".join(f"{agent} {prof:.2f}" for agent, prof in top) or "nobody"
        lines.append(f"  {domain}: {shown}")
    if result.at_risk:
        risky = ", ".join(
            f"{c.knowledge_domain} ({c.agent_count} agent{'s' if c.agent_count != 1 else ''})"
            for c in result.at_risk
        )
        lines.append(f"domains at risk (fewer than 2 agents): {risky}")
    else:
        lines.append("domains at risk (fewer than 2 agents): none")
    lines.extend(interpret(result))
    lines.append(f"wall time: {result.wall_seconds:.2f} s")
    return "\n".join(lines)


def interpret(result: SimulationResult) -> list[str]:
    """What the numbers of a run mean, in a few lines."""
    outcomes, statuses = result.outcomes, result.by_status
    lines = [
        "what it means:",
        f"  {outcomes['created']} entries hold the {result.published} publications: agents "
        f"repeat what they know, so exact repeats were deduplicated "
        f"({outcomes['deduplicated']}) and independent paraphrases of confirmed entries "
        f"corroborated them ({outcomes['corroborated']})",
        f"  {statuses['confirmed']} entries are confirmed: independent agents agreed on them "
        f"({result.confirmations} confirmations by the periodic checker) or the moderator "
        "accepted them in a dispute",
    ]
    if result.wrong_entries:
        lines.append(
            f"  {result.wrong_entries} entries carry a wrong number; each contradicts every "
            f"stored phrasing of the fact it gets wrong, hence {result.contradictions} "
            "contradictions, and both sides of each are disputed until someone resolves it"
        )
    if result.accepted or result.rejected:
        lines.append(
            f"  the moderator accepted {result.accepted} disputed entries (true) and rejected "
            f"{result.rejected} (wrong, so archived); the {statuses['disputed']} still "
            "disputed were raised after the last review"
        )
    elif statuses["disputed"]:
        lines.append(
            f"  nobody resolved disputes, so all {statuses['disputed']} disputed entries "
            "stay disputed"
        )
    if result.wrong_entries:
        verb = "is" if result.wrong_active == 1 else "are"
        lines.append(
            f"  {result.wrong_active} of the {result.wrong_entries} wrong entries {verb} still "
            "active (not yet contradicted, or not yet reviewed)"
        )
    return lines


__all__ = [
    "DEFAULT_NOISE",
    "Fact",
    "SimulationResult",
    "format_result",
    "generate_facts",
    "interpret",
    "simulate",
]
