"""Apollo beside its peer, Mem0, on the same labelled data, server and model family.

- **Mem0** (``mem0ai`` 2.2.1, the ``peer`` extra): ``add(infer=False)``, one message per
  call, its pgvector store, its default search (semantic plus keyword scores) with
  ``top_k=10``; the embedder is the packaged all-MiniLM-L6-v2 run by sentence-transformers
  (PyTorch). No LLM is called (``infer=False``).
- **Apollo** with its default settings: the packaged all-MiniLM-L6-v2 run by ONNX Runtime
  (the default embedder), the default hybrid query with ``limit=10``; ingest one
  ``store_knowledge`` per note (as Mem0 adds them) and, on a database of its own, bulk
  ``store_many`` (chunks of 256).

Both run on one embedded PostgreSQL + pgvector server, each round on fresh databases, the
order alternating between rounds (Mem0 first, then Apollo first, ...). Data: the generated
labelled corpus of ``retrieval_bench.py`` (notes of multi-session conversations about
people and their organisations, unrelated chatter, questions naming the notes that answer
them); the figures are the median over rounds of ingest notes/s, query p50/p95 (the
question's embedding included) and recall@10 (a question counts when one of its answering
notes is among the ten results). Printed with the ratios Apollo / Mem0.

The peer pins protobuf below 7, so it runs from a venv of its own::

    python3 -m venv .venv-peer
    .venv-peer/bin/pip install "torch==2.13.0"   # the CPU build, before sentence-transformers
    .venv-peer/bin/pip install -e ".[peer]"
    MEM0_TELEMETRY=false PYTHONPATH=src:. .venv-peer/bin/python benchmarks/peer_bench.py

Writes ``benchmarks/results/peer.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "false")  # no network calls from the peer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders.sentence import default_model_path
from apollo_app import Apollo, Settings
from benchmarks._common import machine, median, summary_ms, table, write_json
from benchmarks.retrieval_bench import corpus

LIMIT = 10
CHUNK = 256
DIMENSION = 384
Question = tuple[str, str, set[int]]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", type=int, default=60, help="corpus size (notes ~ 17 each)")
    parser.add_argument("--queries", type=int, default=300, help="questions asked per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, order alternating")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    return parser.parse_args(argv)


async def create_database(admin_conninfo: str, name: str) -> str:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    async with await psycopg.AsyncConnection.connect(admin_conninfo, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(admin_conninfo, dbname=name)


def recall(found: Sequence[set[int]], questions: Sequence[Question]) -> float:
    hits = sum(1 for got, (_, _, gold) in zip(found, questions, strict=True) if got & gold)
    return hits / len(questions)


# ------------------------------------------------------------------------------ the peer


class Mem0Side:
    def __init__(self, folder: Path) -> None:
        from mem0 import Memory  # the peer extra; imported only when measured

        self._memory_class = Memory
        self._folder = folder

    def open(self, conninfo: str, label: str) -> Any:
        config = {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": conninfo,
                    "collection_name": f"mem0_{label}",
                    "embedding_model_dims": DIMENSION,
                },
            },
            "embedder": {
                "provider": "huggingface",
                "config": {"model": str(default_model_path()), "embedding_dims": DIMENSION},
            },
            # Never called with infer=False; Mem0 builds its LLM client at start.
            "llm": {"provider": "openai", "config": {"api_key": "unused", "model": "unused"}},
            "history_db_path": str(self._folder / f"history-{label}.db"),
        }
        # Loads the model each round, before the clock starts: not an ingest cost.
        return self._memory_class.from_config(config)

    def ingest(self, memory: Any, notes: Sequence[str]) -> float:
        start = time.perf_counter()
        for index, note in enumerate(notes):
            memory.add(
                [{"role": "user", "content": note}],
                user_id="bench",
                metadata={"note": index},
                infer=False,
            )
        return time.perf_counter() - start

    def ask(self, memory: Any, questions: Sequence[Question]) -> tuple[list[float], list[set[int]]]:
        latencies: list[float] = []
        found: list[set[int]] = []
        for _, question, _ in questions:
            start = time.perf_counter()
            answer = memory.search(question, top_k=LIMIT, filters={"user_id": "bench"})
            latencies.append(time.perf_counter() - start)
            found.append({int(r["metadata"]["note"]) for r in answer["results"]})
        return latencies, found


# ------------------------------------------------------------------------------ Apollo


async def apollo_round(
    admin: str, notes: Sequence[str], questions: Sequence[Question], embedder: Any
) -> dict[str, Any]:
    index = {note: i for i, note in reversed(list(enumerate(notes)))}  # first one wins
    single = await create_database(admin, f"apollo_one_{uuid.uuid4().hex[:8]}")
    settings = Settings.from_env({"APOLLO_DATABASE_URL": single})
    async with Apollo.open(settings, embedder=embedder) as apollo:
        client = apollo.client("bench-agent")
        start = time.perf_counter()
        for note in notes:
            await client.store_knowledge(content=note)
        one_by_one = time.perf_counter() - start
        latencies: list[float] = []
        found: list[set[int]] = []
        for _, question, _ in questions:
            start = time.perf_counter()
            result = await client.query_knowledge(query=question, limit=LIMIT)
            latencies.append(time.perf_counter() - start)
            found.append({index[e.content] for e in result.entries if e.content in index})
    bulk = await create_database(admin, f"apollo_bulk_{uuid.uuid4().hex[:8]}")
    settings = Settings.from_env({"APOLLO_DATABASE_URL": bulk})
    async with Apollo.open(settings, embedder=embedder) as apollo:
        client = apollo.client("bench-agent")
        start = time.perf_counter()
        for at in range(0, len(notes), CHUNK):
            await client.store_many(items=[{"content": n} for n in notes[at : at + CHUNK]])
        in_bulk = time.perf_counter() - start
    return {
        "ingest_per_s": len(notes) / one_by_one,
        "bulk_ingest_per_s": len(notes) / in_bulk,
        "query": summary_ms(latencies),
        "recall@10": recall(found, questions),
    }


def mem0_round(
    side: Mem0Side, admin: str, notes: Sequence[str], questions: Sequence[Question]
) -> dict[str, Any]:
    label = uuid.uuid4().hex[:8]
    conninfo = asyncio.run(create_database(admin, f"mem0_{label}"))
    memory = side.open(conninfo, label)
    seconds = side.ingest(memory, notes)
    latencies, found = side.ask(memory, questions)
    pool = getattr(memory.vector_store, "connection_pool", None)
    if pool is not None:
        pool.close()
    return {
        "ingest_per_s": len(notes) / seconds,
        "query": summary_ms(latencies),
        "recall@10": recall(found, questions),
    }


# ------------------------------------------------------------------------------ the run


def report(result: dict[str, Any]) -> str:
    apollo, mem0 = result["apollo"], result["mem0"]
    rows = [
        ["ingest, one per call (notes/s)", mem0["ingest_per_s"], apollo["ingest_per_s"]],
        ["ingest, Apollo store_many (notes/s)", mem0["ingest_per_s"], apollo["bulk_ingest_per_s"]],
        ["query p50 (ms)", mem0["query_p50_ms"], apollo["query_p50_ms"]],
        ["query p95 (ms)", mem0["query_p95_ms"], apollo["query_p95_ms"]],
        ["recall@10", mem0["recall@10"], apollo["recall@10"]],
    ]
    for row in rows:
        row.append(row[2] / row[1] if row[1] else float("nan"))
    return table(rows, ["figure (median of rounds)", "Mem0 2.2.1", "Apollo", "Apollo / Mem0"])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    notes, questions = corpus(args.people, args.seed)
    asked = questions[: args.queries]
    print(f"{len(notes)} notes, {len(asked)} questions, {args.rounds} rounds", flush=True)

    from apollo_adapters.postgres import EmbeddedPostgres
    from apollo_adapters.postgres.embedded import temporary_folder
    from apollo_app.bootstrap import build_embedder

    # The default settings' embedder (no APOLLO_* variable read), loaded once, off the clock.
    embedder = build_embedder(Settings.from_env({}))
    folder = temporary_folder("apollo-peer-")
    server = EmbeddedPostgres(folder / "pgdata", database="postgres")
    asyncio.run(server.start())
    rounds: dict[str, list[dict[str, Any]]] = {"apollo": [], "mem0": []}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            side = Mem0Side(Path(scratch))
            for number in range(args.rounds):
                order = ("mem0", "apollo") if number % 2 == 0 else ("apollo", "mem0")
                for name in order:
                    if name == "mem0":
                        figures = mem0_round(side, server.admin_conninfo, notes, asked)
                    else:
                        figures = asyncio.run(
                            apollo_round(server.admin_conninfo, notes, asked, embedder)
                        )
                    rounds[name].append(figures)
                    print(
                        f"round {number + 1} {name}: {figures['ingest_per_s']:.1f} notes/s, "
                        f"query p50 {figures['query']['p50_ms']:.1f} ms, "
                        f"recall@10 {figures['recall@10']:.3f}",
                        flush=True,
                    )
    finally:
        asyncio.run(server.stop())

    def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
        out = {
            "ingest_per_s": median([r["ingest_per_s"] for r in runs]),
            "query_p50_ms": median([r["query"]["p50_ms"] for r in runs]),
            "query_p95_ms": median([r["query"]["p95_ms"] for r in runs]),
            "recall@10": median([r["recall@10"] for r in runs]),
        }
        if "bulk_ingest_per_s" in runs[0]:
            out["bulk_ingest_per_s"] = median([r["bulk_ingest_per_s"] for r in runs])
        return out

    import mem0

    result: dict[str, Any] = {
        "name": "peer",
        "command": "PYTHONPATH=src:. .venv-peer/bin/python benchmarks/peer_bench.py"
        + (f" --people {args.people}" if args.people != 60 else "")
        + (f" --queries {args.queries}" if args.queries != 300 else "")
        + (f" --rounds {args.rounds}" if args.rounds != 3 else ""),
        "machine": machine(),
        "peer": f"mem0ai {getattr(mem0, '__version__', '2.2.1')}",
        "notes": len(notes),
        "questions": len(asked),
        "apollo": medians(rounds["apollo"]),
        "mem0": medians(rounds["mem0"]),
        "rounds": rounds,
    }
    result["ratios"] = {
        "query_p50": result["apollo"]["query_p50_ms"] / result["mem0"]["query_p50_ms"],
        "ingest": result["apollo"]["ingest_per_s"] / result["mem0"]["ingest_per_s"],
        "bulk_ingest": result["apollo"]["bulk_ingest_per_s"] / result["mem0"]["ingest_per_s"],
    }
    print(report(result))
    path = write_json("peer", result, args.output)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
