"""Shared helpers of the benchmarks: seeded texts, latency summaries, tables, JSON output."""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

_CONSONANTS = "bcdfghklmnprstvz"
_VOWELS = "aeiou"
_COMMON = tuple(
    " ".join(
        (
            "the a of to in and is for on with that by as at from uses when after before each",
            "every one its their this under over between into new old data agent service",
            "request cache index query store latency error retry timeout memory disk network",
            "queue worker node cluster shard replica token model vector batch stream event",
            "schema table",
        )
    ).split()
)


class TextGenerator:
    """Distinct, readable-looking texts of 80–150 characters from a seeded vocabulary.

    A quarter of the words come from a small common vocabulary (shared by many texts, as
    in real notes), the rest from ``vocabulary`` pseudo-words (topic words)."""

    def __init__(self, seed: int, vocabulary: int = 6000) -> None:
        self._random = random.Random(seed)
        words: set[str] = set()
        vocab_random = random.Random(1234)  # one vocabulary for every generator
        while len(words) < vocabulary:
            syllables = vocab_random.randint(2, 4)
            words.add(
                "".join(
                    vocab_random.choice(_CONSONANTS) + vocab_random.choice(_VOWELS)
                    for _ in range(syllables)
                )
            )
        self.words = sorted(words)

    def word(self) -> str:
        if self._random.random() < 0.25:
            return self._random.choice(_COMMON)
        return self._random.choice(self.words)

    def text(self, low: int = 80, high: int = 150) -> str:
        target = self._random.randint(low, high)
        parts: list[str] = []
        length = -1
        while True:
            word = self.word()
            if length + 1 + len(word) > target and length >= low:
                break
            parts.append(word)
            length += 1 + len(word)
        return (" ".join(parts)).capitalize() + "."

    def texts(self, count: int, low: int = 80, high: int = 150) -> list[str]:
        seen: set[str] = set()
        out: list[str] = []
        while len(out) < count:
            text = self.text(low, high)
            if text not in seen:
                seen.add(text)
                out.append(text)
        return out

    def choice(self, options: Sequence[str]) -> str:
        return self._random.choice(options)


DOMAINS = tuple(f"domain-{i:02d}" for i in range(20))


def summary_ms(seconds: Iterable[float]) -> dict[str, float]:
    """mean / p50 / p95 / max of latencies given in seconds, in milliseconds."""
    values = np.asarray(list(seconds), dtype=np.float64) * 1000.0
    return {
        "count": int(values.size),
        "mean_ms": float(values.mean()),
        "p50_ms": float(np.percentile(values, 50)),
        "p95_ms": float(np.percentile(values, 95)),
        "max_ms": float(values.max()),
    }


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


class Stopwatch:
    """``with Stopwatch() as sw: ...; sw.seconds``."""

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A markdown table."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines.extend("| " + " | ".join(fmt(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


COMPARISON_HEADER = ("measurement", "Apollo", "baseline", "ratio", "target", "met")


def comparison_row(
    name: str, value: float, baseline: float | None, target: str, met: bool | None
) -> list[Any]:
    ratio = None if baseline in (None, 0) else value / baseline  # type: ignore[operator]
    return [name, value, baseline, ratio, target, "" if met is None else ("yes" if met else "NO")]


@asynccontextmanager
async def embedded_database(prefix: str) -> AsyncIterator[str]:
    """A new embedded PostgreSQL + pgvector server with one empty database named after
    ``prefix``; yields its conninfo, then stops the server and removes its folder."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from apollo_adapters.postgres import EmbeddedPostgres
    from apollo_adapters.postgres.embedded import temporary_folder

    folder = temporary_folder(f"apollo-{prefix}-")
    server = EmbeddedPostgres(folder / "pgdata", database="postgres")
    try:
        await server.start()
        name = f"apollo_{prefix}_{uuid.uuid4().hex[:8]}"
        async with await psycopg.AsyncConnection.connect(
            server.admin_conninfo, autocommit=True
        ) as admin:
            await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        yield make_conninfo(server.admin_conninfo, dbname=name)
    finally:
        await server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@asynccontextmanager
async def kept_database(folder: Path, name: str) -> AsyncIterator[tuple[str, bool]]:
    """The embedded server of ``folder``/pgdata (initialized on first use) with a database
    ``name``: yields its conninfo and whether the database was just created (empty), then
    stops the server and keeps the folder, so that a later run can reuse what was loaded."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from apollo_adapters.postgres import EmbeddedPostgres

    server = EmbeddedPostgres(folder / "pgdata", database="postgres")
    try:
        await server.start()
        async with await psycopg.AsyncConnection.connect(
            server.admin_conninfo, autocommit=True
        ) as admin:
            cur = await admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            created = await cur.fetchone() is None
            if created:
                await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        yield make_conninfo(server.admin_conninfo, dbname=name), created
    finally:
        await server.stop()


def write_json(name: str, payload: Mapping[str, Any], directory: Path | None = None) -> Path:
    folder = directory or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    return path


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


class TopicalTextGenerator(TextGenerator):
    """Texts about ``topics`` recurring subjects, the way facts of a knowledge base are.

    Each topic is a template of key words drawn from the vocabulary; a text of a topic
    keeps a random part of them in a shuffled order, mixed with filler words (common and
    vocabulary words) and a number, so texts of one topic are related to different degrees
    while texts of different topics share little more than common words. The topics are
    the same for every generator (``topic_seed``), so queries from another seed are new
    variations of the loaded topics."""

    def __init__(
        self,
        seed: int,
        topics: int = 3000,
        vocabulary: int = 6000,
        topic_seed: int = 4321,
        key_words: tuple[int, int] = (10, 16),
    ) -> None:
        super().__init__(seed, vocabulary)
        topic_random = random.Random(topic_seed)
        self.topics = [
            topic_random.sample(self.words, topic_random.randint(*key_words)) for _ in range(topics)
        ]

    def topic_text(self, topic: int, low: int = 80, high: int = 150) -> str:
        rnd = self._random
        keys = self.topics[topic]
        kept = rnd.sample(keys, rnd.randint(max(2, 2 * len(keys) // 5), len(keys)))
        if rnd.random() < 0.7:  # mostly the template's order, sometimes shuffled
            kept.sort(key=keys.index)
        parts = list(kept)
        fillers = rnd.randint(0, 3)
        length = sum(len(w) + 1 for w in parts) - 1
        while fillers > 0 or length < low:
            word = str(rnd.randint(2, 9999)) if rnd.random() < 0.15 else self.word()
            if length + 1 + len(word) > high:
                break
            parts.insert(rnd.randint(0, len(parts)), word)
            length += 1 + len(word)
            fillers -= 1
        return (" ".join(parts)).capitalize() + "."

    def text(self, low: int = 80, high: int = 150) -> str:
        return self.topic_text(self._random.randrange(len(self.topics)), low, high)


#: Named adversarial units, one of each kind: repeated to a length, each makes a
#: backtracking pattern re-read its run from every character (the linear-text tests and
#: ``text_bench`` use them).
ADVERSARIAL_UNITS = {
    "commas": "1,",
    "dashes": "-",
    "dots": ".",
    "apostrophes": "'",
    "quotes": '"a',
    "letter-dash": "a-",
    "digit-dot": "1.",
    "capitalized words": "Alpha ",
    "stop words": "The ",
    "scheme characters": "k-",
    "local-part characters": "a.",
    "underscores": "a_",
    "sentence openers": "Soup. ",
    "openers after colons": "a:Foo ",
}
