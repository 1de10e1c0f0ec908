"""The relevance floor of each embedder: how similar an unrelated query gets to a corpus.

Every text has some cosine with every other. A query about nothing the store holds still
has a best match, and without a floor that match is returned and boosted. This run embeds
a corpus (the labelled notes of ``retrieval_bench.py`` plus a set of technical facts of the
kind agents publish) and two sets of queries:

- unrelated: word salads of rare words ("xylophone quantum marmalade") and questions on
  topics the corpus never mentions; for each, its best cosine with the corpus;
- related: the retrieval benchmark's questions; for each, the cosine of its best answer.

It prints the distribution of both (percentiles), a sweep of floors (exact vector
recall@10 of the related questions, and the share of unrelated queries that still match
something) and the floor it proposes: the ``--percentile`` (99th by default) of the
unrelated maxima, rounded up to 0.01, lowered until the floor costs at most
``--max-recall-loss`` of vector recall@10 (half a point by default). Where the two sets of
cosines overlap (a hashing embedder), the recall bound decides and some unrelated queries
still match. The floors the embedders declare (``relevance_floor``) come from this run;
``retrieval_bench.py`` then checks recall with them::

    PYTHONPATH=src python benchmarks/relevance_floor_bench.py [--no-model] [--dimension 384]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders import HashingEmbedder
from apollo_domain.ports import Embedder
from benchmarks._common import machine, table, write_json
from benchmarks.retrieval_bench import corpus

TECHNICAL = (
    "Redis keeps the whole dataset in memory and persists it with RDB snapshots or an AOF.",
    "PostgreSQL uses MVCC, so readers never block writers.",
    "The metrics exporter is enabled on port 9187.",
    "BGP sessions use TCP port 179.",
    "Kafka retains messages for seven days by default.",
    "RabbitMQ quorum queues replicate messages with the Raft protocol.",
    "The HNSW index of pgvector trades recall for speed with ef_search.",
    "Kubernetes restarts a pod whose liveness probe fails three times.",
    "TLS 1.3 removed RSA key exchange in favour of ephemeral Diffie-Hellman.",
    "Python's GIL lets one thread execute bytecode at a time.",
    "Nginx buffers upstream responses unless proxy_buffering is off.",
    "The deploy pipeline runs database migrations before the new pods start.",
    "DNS TTLs of 300 seconds let a failover propagate within five minutes.",
    "Terraform keeps its state in an S3 bucket with DynamoDB locking.",
    "The search service times out after 800 milliseconds and returns partial results.",
    "Git rebase rewrites the commits of a branch on top of another base.",
    "A Bloom filter answers membership queries with false positives but no false negatives.",
    "The payment API retries idempotent requests with the same idempotency key.",
    "SQLite serializes writers with a database-level lock.",
    "Elasticsearch shards cannot be split without reindexing on older versions.",
    "The CDN caches static assets for one year with immutable cache headers.",
    "Prometheus scrapes targets every 15 seconds in the default configuration.",
    "OAuth refresh tokens are rotated on every use in the identity service.",
    "The batch job compacts event logs nightly at 02:00 UTC.",
)
RARE_WORDS = [
    "xylophone",
    "quantum",
    "marmalade",
    "walrus",
    "tapestry",
    "nebula",
    "origami",
    "saxophone",
    "kumquat",
    "glacier",
    "trombone",
    "meringue",
    "platypus",
    "lighthouse",
    "gondola",
    "zeppelin",
    "harmonica",
    "croissant",
    "flamingo",
    "volcano",
    "accordion",
    "pistachio",
    "narwhal",
    "carousel",
    "tambourine",
    "hieroglyph",
    "mandolin",
    "avalanche",
    "gazebo",
    "labyrinth",
    "chameleon",
    "papyrus",
    "telescope",
    "sombrero",
    "cauldron",
    "iceberg",
    "kaleidoscope",
    "pelican",
    "bagpipe",
    "macaroon",
    "obelisk",
    "quokka",
    "rhubarb",
    "sphinx",
    "toboggan",
    "ukulele",
    "vortex",
    "yodel",
]
OFF_TOPIC = (
    "How long should I boil an egg for a runny yolk?",
    "Which planet has the most moons?",
    "Who won the football world cup in 1998?",
    "What is the best way to prune a rose bush in autumn?",
    "How do dolphins sleep without drowning?",
    "What rhymes with orange?",
    "Recommend a novel about sailing around the world.",
    "Why is the sky blue at noon and red at sunset?",
    "How many strings does a classical harp have?",
    "What is the capital of Mongolia?",
    "How do I knit a scarf with a cable pattern?",
    "When do cherry blossoms bloom in Kyoto?",
    "What do giraffes eat in the wild?",
    "How tall is the Eiffel Tower?",
    "Which wine goes well with grilled salmon?",
    "How do bees make honey?",
)


def unrelated_queries(count: int, seed: int) -> list[str]:
    """``count`` word salads of two to four rare words, then the off-topic questions."""
    rng = random.Random(seed)
    salads = [" ".join(rng.sample(RARE_WORDS, rng.randint(2, 4))) for _ in range(count)]
    return ["xylophone quantum marmalade", *salads, *OFF_TOPIC]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    return {
        "min": float(array.min()),
        "p50": float(np.percentile(array, 50)),
        "p90": float(np.percentile(array, 90)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


async def calibrate(
    embedder: Embedder,
    texts: Sequence[str],
    unrelated: Sequence[str],
    related: Sequence[tuple[str, set[int]]],
    percentile: float,
    max_recall_loss: float,
) -> dict[str, Any]:
    async def matrix(batch: Sequence[str]) -> np.ndarray:
        rows = np.asarray(await embedder.embed(list(batch)), dtype=np.float64)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    docs = await matrix(texts)
    noise = (await matrix(unrelated)) @ docs.T
    unrelated_max = noise.max(axis=1)
    questions = await matrix([q for q, _ in related])
    scores = questions @ docs.T
    answer = [max(scores[i, j] for j in answers) for i, (_, answers) in enumerate(related)]
    noise_floor = math.ceil(float(np.percentile(unrelated_max, percentile)) * 100) / 100
    # Exact vector recall@10 at each floor: an answer counts when it ranks in the top ten
    # and clears the floor (what the vector signal of a query keeps).
    tenth = -np.sort(-scores, axis=1)[:, min(9, scores.shape[1] - 1)]
    sweep = []
    for step in range(0, 101):
        candidate = step / 100
        hits = [
            sum(scores[i, j] >= max(tenth[i], candidate) for j in answers) / len(answers)
            for i, (_, answers) in enumerate(related)
        ]
        sweep.append(
            {
                "floor": candidate,
                "vector_recall@10": sum(hits) / len(hits),
                "unrelated_with_a_match": float((unrelated_max >= candidate).mean()),
            }
        )
    unfloored = sweep[0]["vector_recall@10"]
    kept = [p["floor"] for p in sweep if unfloored - p["vector_recall@10"] <= max_recall_loss]
    floor = min(noise_floor, max(kept))
    below = sum(a < floor for a in answer) / len(answer)
    matched = float((unrelated_max >= floor).mean())
    return {
        "sweep": sweep,
        "noise_floor": noise_floor,
        "unrelated_still_matched": matched,
        "vector_recall@10": {"no floor": unfloored, "at floor": _recall_at(sweep, floor)},
        "corpus": len(texts),
        "unrelated_queries": len(unrelated),
        "unrelated_max": percentiles(unrelated_max.tolist()),
        "xylophone_quantum_marmalade": sorted(noise[0].tolist(), reverse=True)[:5],
        "related_answer": percentiles(answer),
        "floor": floor,
        "percentile": percentile,
        "related_below_floor": below,
    }


def _recall_at(sweep: Sequence[dict[str, float]], floor: float) -> float:
    return next(p["vector_recall@10"] for p in sweep if math.isclose(p["floor"], floor))


def embedders(use_model: bool, dimensions: Sequence[int]) -> list[tuple[str, Embedder]]:
    found: list[tuple[str, Embedder]] = [(f"hashing-{d}", HashingEmbedder(d)) for d in dimensions]
    if use_model:
        from apollo_adapters.embedders import SentenceTransformerEmbedder
        from apollo_adapters.embedders.sentence import default_model_path

        found.append(("all-MiniLM-L6-v2", SentenceTransformerEmbedder(default_model_path())))
    return found


def report(payload: dict[str, Any]) -> str:
    """The tables of a run's results (``payload`` as the JSON holds it)."""
    rows = []
    for label, found in payload["runs"].items():
        noise, answer = found["unrelated_max"], found["related_answer"]
        rows.append(
            [
                label,
                noise["p50"],
                noise["p99"],
                noise["max"],
                answer["min"],
                answer["p50"],
                found["noise_floor"],
                found["floor"],
                found["declared_floor"],
                found["vector_recall@10"]["no floor"],
                found["vector_recall@10"]["at floor"],
                found["unrelated_still_matched"],
            ]
        )
    percentile = next(iter(payload["runs"].values()))["percentile"]
    lines = [
        table(
            rows,
            [
                "embedder",
                "unrelated p50",
                "unrelated p99",
                "unrelated max",
                "answer min",
                "answer p50",
                f"p{percentile:g} floor",
                "floor",
                "declared",
                "recall@10",
                "at floor",
                "unrelated matched",
            ],
        ),
        "",
    ]
    for label, found in payload["runs"].items():
        top = ", ".join(f"{s:.3f}" for s in found["xylophone_quantum_marmalade"])
        lines.append(f"{label}: 'xylophone quantum marmalade' best five: {top}")
    sweep_rows = [
        [f"{point['floor']:.2f}"]
        + [
            f"{found['sweep'][i]['vector_recall@10']:.4f} / "
            f"{found['sweep'][i]['unrelated_with_a_match']:.2f}"
            for found in payload["runs"].values()
        ]
        for i, point in enumerate(next(iter(payload["runs"].values()))["sweep"])
        if i % 5 == 0
    ]
    lines += [
        "",
        "vector recall@10 / share of unrelated queries still matched, by floor:",
        "",
        table(sweep_rows, ["floor", *payload["runs"]]),
    ]
    return "\n".join(lines)


async def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unrelated", type=int, default=400, help="word salads to embed")
    parser.add_argument("--percentile", type=float, default=99.0)
    parser.add_argument(
        "--max-recall-loss",
        type=float,
        default=0.005,
        help="vector recall@10 the floor may cost (0.005: half a point)",
    )
    parser.add_argument("--dimension", type=int, action="append", help="hashing dimensions")
    parser.add_argument("--no-model", action="store_true", help="hashing embedder only")
    parser.add_argument("--output", type=Path, help="folder for the JSON (benchmarks/results)")
    args = parser.parse_args(argv)
    notes, questions = corpus(args.people, args.seed)
    texts = [*notes, *TECHNICAL]
    unrelated = unrelated_queries(args.unrelated, args.seed)
    related = [(q, answers) for _, q, answers in questions]
    payload: dict[str, Any] = {"machine": machine(), "runs": {}}
    for label, embedder in embedders(not args.no_model, args.dimension or [384]):
        found = await calibrate(
            embedder, texts, unrelated, related, args.percentile, args.max_recall_loss
        )
        found["declared_floor"] = getattr(embedder, "relevance_floor", None)
        payload["runs"][label] = found
    print(
        f"{len(texts)} texts, {len(unrelated)} unrelated queries, {len(related)} related "
        f"questions; floor = the p{args.percentile:g} of the unrelated maxima (rounded up),"
        f" lowered until vector recall@10 loses at most {args.max_recall_loss:g}"
    )
    print(report(payload))
    print(write_json("relevance_floor", payload, args.output))
    return payload


if __name__ == "__main__":
    asyncio.run(main())
