"""Retrieval quality: recall@5 and recall@10 of vector, lexical and hybrid queries, and
their latency per question (p50 and p95, the question's embedding included).

A generated, labelled corpus: multi-session notes about people (where they live, where
they work, what they lead, when they started, numbers about their teams), notes about the
organisations they work for, and unrelated chatter. Each question is a paraphrase of one
note and names the note(s) that answer it. Three kinds of question:

- ``direct``: a paraphrase of a note about a person ("Which city is Alice Moreau based in?");
- ``detail``: asks for a number, date or identifier the note states;
- ``hop``: asks about a person's employer's headquarters — the answering note names only the
  organisation, so only the entity graph (person → organisation) connects them.

Runs every mode against the in-memory store (and PostgreSQL with ``--postgres``) with the
hashing embedder and, unless ``--no-model``, the bundled all-MiniLM-L6-v2 model (with
``--onnx DIR`` also that model under ONNX Runtime, fp32 and int8)::

    PYTHONPATH=src python benchmarks/retrieval_bench.py [--people 60] [--postgres] [--onnx DIR]

Each embedder's relevance floor applies (``--no-floor``: none, to compare). Entry ids come
from a generator seeded with ``--seed``, so ties among equal scores rank the same way on
every run and two runs differ only by what changed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.clock import ManualClock
from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.memory import InMemoryStore
from apollo_app import Apollo
from apollo_domain.ports import Embedder, Store
from apollo_domain.retrieval import RetrievalSettings
from benchmarks._common import embedded_database, machine, summary_ms, table, write_json

KINDS = ("direct", "detail", "hop", "dialogue")
FIRST = [
    "Alice",
    "Bruno",
    "Carla",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kenji",
    "Lena",
    "Marco",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Stefan",
    "Tara",
    "Umar",
    "Vera",
    "Wesley",
    "Xenia",
    "Yusuf",
    "Zora",
]
LAST = [
    "Moreau",
    "Diaz",
    "Okafor",
    "Lindqvist",
    "Tanaka",
    "Novak",
    "Haddad",
    "Kowalski",
    "Ferreira",
    "Brennan",
    "Castillo",
    "Nakamura",
    "Petrov",
    "Schultz",
    "Varga",
    "Whitfield",
    "Abara",
    "Bianchi",
]
CITIES = [
    "Lisbon",
    "Porto",
    "Oslo",
    "Bergen",
    "Krakow",
    "Valencia",
    "Tallinn",
    "Ghent",
    "Lyon",
    "Turin",
    "Graz",
    "Bilbao",
    "Aarhus",
    "Leipzig",
    "Dublin",
    "Utrecht",
]
ORG_A = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Stark",
    "Wayne",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Vandelay",
]
ORG_B = ["Corp", "Labs", "Systems", "Works", "Dynamics", "Analytics"]
PROJECTS = [
    "Orion",
    "Vega",
    "Lyra",
    "Draco",
    "Cygnus",
    "Perseus",
    "Aquila",
    "Hydra",
    "Phoenix",
    "Carina",
]
HOBBIES = ("rock climbing", "sailing", "chess", "pottery", "cycling", "birdwatching")
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
]
CHATTER = (
    "The coffee machine on the third floor is broken again.",
    "Remember to water the plants before the long weekend.",
    "The quarterly all-hands moved to the big auditorium.",
    "Someone left an umbrella in meeting room four.",
    "Lunch on Friday will be tacos from the food truck.",
    "The parking garage closes early during the holidays.",
    "Please rotate your passwords before the end of the month.",
    "The printer queue was cleared after the paper jam.",
)

PETS = ("dog", "cat", "parrot", "rabbit", "tortoise")
PET_NAMES = ("Biscuit", "Pepper", "Mango", "Ziggy", "Noodle", "Waffles", "Clementine", "Rocket")
DISHES = ("ramen", "paella", "pierogi", "bibimbap", "moussaka", "ceviche")
INSTRUMENTS = ("cello", "ukulele", "trumpet", "banjo", "harp")
FILLER = (
    "Honestly the week flew by and I barely had time to think.",
    "We were both tired, so the call was shorter than usual.",
    "It rained the whole afternoon, which did not help anyone's mood.",
    "Anyway, we spent most of the time catching up on the usual stuff.",
    "I keep meaning to write these things down before I forget them.",
    "The connection kept dropping, so we switched to audio only.",
    "She laughed about it, but I could tell it mattered to her.",
    "Nothing dramatic, just the kind of update friends trade.",
)
SMALL_TALK = (
    "Caught up with {f} again today; mostly weather, traffic and weekend plans, nothing new.",
    "{f} and I chatted for a bit about work being busy and how tired everyone is lately.",
    "Quick message exchange with {f}: she is doing fine and says hi to everyone.",
    "Had coffee with {f} this morning, we mostly complained about the heat.",
    "{f} sent a funny video and we joked about it for a while, then went back to work.",
)


def dialogue(
    rng: random.Random, person: str, city: str, month: str
) -> tuple[list[str], list[tuple[str, str, int]]]:
    """Conversation turns about one person (one fact each, wrapped in chatter) and the
    questions that one turn answers."""
    first = person.split()[0]
    pet, pet_name = rng.choice(PETS), rng.choice(PET_NAMES)
    dish, instrument = rng.choice(DISHES), rng.choice(INSTRUMENTS)
    hours, minutes = rng.randint(3, 4), rng.randint(0, 59)
    sister = rng.choice(FIRST)
    day = rng.randint(1, 28)
    flat = rng.randint(40, 140)
    facts = [
        (
            f"{first} told me her {pet} {pet_name} finally recovered after the surgery;"
            " the vet bills were brutal.",
            f"What is the name of {person}'s {pet}?",
            "dialogue",
        ),
        (
            f"Big news from {first}: she ran the {city} marathon in {hours}:{minutes:02d},"
            " her best time yet.",
            f"How fast did {person} finish the marathon?",
            "dialogue",
        ),
        (
            f"{first} has been taking {instrument} lessons on Tuesday evenings and is"
            " already playing simple songs.",
            f"Which instrument is {person} learning?",
            "dialogue",
        ),
        (
            f"{first} said her sister {sister} is getting married on {month} {day}, and she"
            " is the maid of honour.",
            f"When is the wedding of {person}'s sister?",
            "dialogue",
        ),
        (
            f"{first} cooked {dish} for twelve friends last weekend and it apparently"
            " turned out great.",
            f"What did {person} cook for her friends?",
            "dialogue",
        ),
        (
            f"{first} signed the lease on a {flat} square metre flat near the old town,"
            " moving in next month.",
            f"How big is the flat {person} is renting?",
            "dialogue",
        ),
    ]
    turns: list[str] = []
    questions: list[tuple[str, str, int]] = []
    for fact, question, kind in facts:
        wrapped = " ".join([rng.choice(FILLER), fact, rng.choice(FILLER)])
        questions.append((kind, question, len(turns)))
        turns.append(wrapped)
    for template in rng.sample(SMALL_TALK, 3):
        turns.append(template.format(f=first))
    return turns, questions


def corpus(people: int, seed: int) -> tuple[list[str], list[tuple[str, str, set[int]]]]:
    """Notes and labelled questions ``(kind, question, indexes of answering notes)``."""
    rng = random.Random(seed)
    names = [f"{f} {ln}" for f in FIRST for ln in LAST]
    rng.shuffle(names)
    orgs = sorted({f"{a} {b}" for a in ORG_A for b in ORG_B})
    rng.shuffle(orgs)
    orgs = orgs[: max(4, people // 4)]
    notes: list[str] = []
    questions: list[tuple[str, str, set[int]]] = []
    org_note: dict[str, int] = {}
    for org in orgs:
        org_note[org] = len(notes)
        notes.append(f"{org} keeps its headquarters in {rng.choice(CITIES)}, near the harbour.")
    for person in names[:people]:
        first = person.split()[0]
        city, org = rng.choice(CITIES), rng.choice(orgs)
        project, hobby = rng.choice(PROJECTS), rng.choice(HOBBIES)
        year, month = rng.randint(2015, 2024), rng.choice(MONTHS)
        team, budget = rng.randint(3, 40), rng.randint(10, 900)
        version = f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        facts = [
            (
                f"{person} moved to {city} last spring and likes it there.",
                f"Which city is {person} based in these days?",
                "direct",
            ),
            (
                f"{person} works at {org} as a staff engineer.",
                f"Who is {first}'s employer? I mean {person}.",
                "direct",
            ),
            (
                f"Since {month} {year}, {person} leads Project {project}.",
                f"When did {person} take over Project {project}?",
                "detail",
            ),
            (
                f"{person} manages a team of {team} people with a budget of ${budget}k.",
                f"How many people report to {person}?",
                "detail",
            ),
            (
                f"In her spare time {person} enjoys {hobby} on weekends.",
                f"What does {person} do for fun?",
                "direct",
            ),
            (
                f"{person} shipped release {version} of the billing service.",
                f"Which billing release did {person} ship?",
                "detail",
            ),
        ]
        for note, question, kind in facts:
            questions.append((kind, question, {len(notes)}))
            notes.append(note)
        questions.append(
            ("hop", f"In which city are the headquarters of {person}'s employer?", {org_note[org]})
        )
        turns, asked = dialogue(rng, person, city, month)
        questions.extend((kind, q, {len(notes) + turn}) for kind, q, turn in asked)
        notes.extend(turns)
    notes.extend(rng.choice(CHATTER) + f" (note {i})" for i in range(people * 2))
    return notes, questions


#: (label, query mode, fusion of the hybrid ranking)
VARIANTS = (
    ("vector", "vector", "rrf"),
    ("lexical", "lexical", "rrf"),
    ("hybrid", "hybrid", "relative_score"),
    ("hybrid/rrf", "hybrid", "rrf"),
)


def seeded_uuid4(seed: int) -> Any:
    """A stand-in for :func:`uuid.uuid4` drawing from a generator seeded with ``seed``."""
    rng = random.Random(seed)
    return lambda: uuid.UUID(int=rng.getrandbits(128), version=4)


async def evaluate(
    store: Store,
    embedder: Embedder,
    notes: Sequence[str],
    questions: Sequence[tuple[str, str, set[int]]],
    floor: float | None = None,
) -> dict[str, Any]:
    """Recall and latency of each variant; ``floor`` replaces the embedder's relevance
    floor (-1: none)."""

    def over(fusion: str) -> Apollo:
        settings = RetrievalSettings(fusion=fusion, relevance_floor=floor)
        return Apollo.with_store(store, embedder=embedder, clock=ManualClock(), retrieval=settings)

    ids: list[uuid.UUID | None] = []
    async with over("rrf") as apollo:
        writer = apollo.client("bench-writer")
        for start in range(0, len(notes), 200):
            chunk = [{"content": n} for n in notes[start : start + 200]]
            results = await writer.store_many(chunk)
            ids.extend(getattr(r, "entry_id", None) for r in results)
    found: dict[str, Any] = {"stored": sum(i is not None for i in ids)}
    for label, mode, fusion in VARIANTS:
        kinds: dict[str, list[tuple[float, float]]] = {}
        async with over(fusion) as apollo:
            reader = apollo.client("bench-reader")
            latencies: list[float] = []
            for kind, question, answers in questions:
                wanted = {ids[i] for i in answers}
                started = time.perf_counter()
                result = await reader.retrieve(
                    query=question, limit=10, min_confidence=0.0, mode=mode
                )
                latencies.append(time.perf_counter() - started)
                ranked = [view.id for view in result.entries]
                kinds.setdefault(kind, []).append(
                    (
                        len(wanted & set(ranked[:5])) / len(wanted),
                        len(wanted & set(ranked[:10])) / len(wanted),
                    )
                )
        every = [pair for pairs in kinds.values() for pair in pairs]
        latency = summary_ms(latencies)
        found[label] = {
            "recall@5": sum(p[0] for p in every) / len(every),
            "recall@10": sum(p[1] for p in every) / len(every),
            "p50_ms": latency["p50_ms"],
            "p95_ms": latency["p95_ms"],
            "by_kind": {
                kind: {
                    "recall@5": sum(p[0] for p in pairs) / len(pairs),
                    "recall@10": sum(p[1] for p in pairs) / len(pairs),
                    "questions": len(pairs),
                }
                for kind, pairs in sorted(kinds.items())
            },
        }
    return found


async def run_memory(
    embedder: Embedder, notes: list[str], questions: Any, floor: float | None = None
) -> dict[str, Any]:
    store = InMemoryStore()
    try:
        return await evaluate(store, embedder, notes, questions, floor)
    finally:
        await store.close()


async def run_postgres(
    embedder: Embedder, notes: list[str], questions: Any, floor: float | None = None
) -> dict[str, Any]:
    from apollo_adapters.postgres import PostgresStore

    async with embedded_database("retrieval") as conninfo:
        store = await PostgresStore.open(
            conninfo, embedder_model_id=embedder.model_id, dimension=embedder.dimension
        )
        try:
            return await evaluate(store, embedder, notes, questions, floor)
        finally:
            await store.close()


def embedders(use_model: bool, onnx_cache: Path | None = None) -> list[tuple[str, Embedder]]:
    found: list[tuple[str, Embedder]] = [("hashing-384", HashingEmbedder(384))]
    if use_model:
        from apollo_adapters.embedders import SentenceTransformerEmbedder
        from apollo_adapters.embedders.sentence import default_model_path

        found.append(("all-MiniLM-L6-v2", SentenceTransformerEmbedder(default_model_path())))
    if use_model and onnx_cache is not None:
        from apollo_adapters.embedders import OnnxEmbedder

        found.append(("MiniLM onnx fp32", OnnxEmbedder(cache_dir=onnx_cache)))
        found.append(("MiniLM onnx int8", OnnxEmbedder(cache_dir=onnx_cache, quantize="int8")))
    return found


def report(payload: dict[str, Any]) -> str:
    """The table of a run's results (``payload`` as the JSON holds it)."""
    rows = []
    for run, found in payload["runs"].items():
        store, _, label = run.partition("/")
        for mode, numbers in found.items():
            if mode == "stored":
                continue
            kinds = numbers["by_kind"]
            rows.append(
                [
                    store,
                    label,
                    mode,
                    numbers["recall@5"],
                    numbers["recall@10"],
                    *(kinds[k]["recall@10"] for k in KINDS),
                    numbers["p50_ms"],
                    numbers["p95_ms"],
                ]
            )
    return table(
        rows,
        [
            "store",
            "embedder",
            "mode",
            "recall@5",
            "recall@10",
            *(f"{k}@10" for k in KINDS),
            "p50 ms",
            "p95 ms",
        ],
    )


async def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", action="store_true", help="also run on PostgreSQL")
    parser.add_argument("--no-model", action="store_true", help="hashing embedder only")
    parser.add_argument("--no-floor", action="store_true", help="no relevance floor")
    parser.add_argument(
        "--onnx",
        type=Path,
        metavar="DIR",
        help="also the model under ONNX Runtime, fp32 and int8 (graphs kept in DIR)",
    )
    parser.add_argument("--output", type=Path, help="folder for the JSON (benchmarks/results)")
    args = parser.parse_args(argv)
    notes, questions = corpus(args.people, args.seed)
    floor = -1.0 if args.no_floor else None
    payload: dict[str, Any] = {
        "machine": machine(),
        "notes": len(notes),
        "relevance_floor": "none" if args.no_floor else "the embedder's",
        "runs": {},
    }
    stores = ["memory", *(["postgres"] if args.postgres else [])]
    for label, embedder in embedders(not args.no_model, args.onnx):
        for store in stores:
            run = run_memory if store == "memory" else run_postgres
            with mock.patch("uuid.uuid4", seeded_uuid4(args.seed)):
                found = await run(embedder, notes, questions, floor)
            payload["runs"][f"{store}/{label}"] = found
    stored = {run: found["stored"] for run, found in payload["runs"].items()}
    print(
        f"{len(notes)} notes ({stored} stored), {len(questions)} questions, relevance floor: "
        f"{payload['relevance_floor']}"
    )
    print(report(payload))
    print(write_json("retrieval", payload, args.output))
    return payload


if __name__ == "__main__":
    asyncio.run(main())
