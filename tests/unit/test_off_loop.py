"""CPU-heavy reading of long texts runs off the event loop (docs/concepts.md, "The rules in one
page"):
entity extraction, the contradiction heuristic, the hashing embedder and the in-memory
store's lexical index read a long text in a worker thread, so the loop keeps answering other
requests meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import pytest

from apollo_adapters.heuristics import (
    HeuristicContradictionJudge,
    HeuristicEntityExtractor,
    extract_entities,
    extraction,
)
from apollo_adapters.threads import OFF_LOOP_CHARS
from apollo_app import Apollo
from apollo_domain import lexical
from apollo_domain.contradiction import heuristic_contradicts
from apollo_domain.entities import Extraction
from apollo_domain.normalize import MAX_CONTENT_CHARS
from tests.strategies import repeated

#: 100,000 characters that exercise every extraction rule, mostly capitalized words and
#: runs of commas.
LONG_TEXT = repeated(
    "Alice Moreau paid $1,200 for 42 kg in Lisbon, 1,1,1,1,1,1. ", MAX_CONTENT_CHARS
)


P = ParamSpec("P")
R = TypeVar("R")


def recording(threads: set[int], function: Callable[P, R]) -> Callable[P, R]:
    """``function``, noting the thread each call runs in."""

    def recorded(*args: P.args, **kwargs: P.kwargs) -> R:
        threads.add(threading.get_ident())
        return function(*args, **kwargs)

    return recorded


@pytest.fixture
def reading_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, set[int]]]:
    """The threads in which the domain's extractor and lexical analysis read long texts
    (hooks inside the pure functions the default wiring calls)."""
    threads: dict[str, set[int]] = {"extraction": set(), "lexical": set()}
    monkeypatch.setattr(extraction, "_names", recording(threads["extraction"], extraction._names))
    real_terms = lexical.terms

    def terms(text: str) -> list[str]:
        if len(text) > OFF_LOOP_CHARS:
            threads["lexical"].add(threading.get_ident())
        return real_terms(text)

    monkeypatch.setattr(lexical, "terms", terms)
    yield threads


async def test_ingest_reads_a_long_text_in_a_worker_thread(
    reading_threads: dict[str, set[int]],
) -> None:
    """Through the facade on the in-memory store, with the default wiring."""
    async with Apollo.in_memory() as apollo:
        result = await apollo.client("alice").store_knowledge(content=LONG_TEXT)

    assert "created" == result.outcome
    loop_thread = threading.get_ident()
    for part, threads in reading_threads.items():
        assert threads, f"{part} never read the text"
        assert loop_thread not in threads, f"{part} read the text on the event loop"


async def test_the_event_loop_spends_a_small_part_of_the_reading_of_a_long_text() -> None:
    """The CPU time the loop's own thread spends on the ingest of 100,000 characters is a
    small part of what extracting their entities alone costs: the reading happens
    elsewhere, and the loop is free to answer meanwhile. (CPU time of one thread, not wall
    time, so a busy machine does not change the outcome.)"""
    started = time.process_time()
    extract_entities(LONG_TEXT)
    extraction_cpu = time.process_time() - started

    async with Apollo.in_memory() as apollo:
        client = apollo.client("alice")
        await client.store_knowledge(content="A short note warms every path up.")
        started = time.thread_time()
        result = await client.store_knowledge(content=LONG_TEXT)
        loop_cpu = time.thread_time() - started

    assert "created" == result.outcome
    assert loop_cpu < extraction_cpu / 2, (
        f"loop {loop_cpu:.3f} s, extraction {extraction_cpu:.3f} s"
    )


def test_the_default_wiring_reads_texts_off_the_loop() -> None:
    apollo = Apollo.in_memory()
    assert HeuristicEntityExtractor() == apollo.deps.extractor
    assert HeuristicContradictionJudge() == apollo.deps.judge


async def test_a_threaded_extractor_reads_long_texts_in_a_worker_thread_and_short_ones_inline() -> (
    None
):
    threads: set[int] = set()
    extractor = HeuristicEntityExtractor(recording(threads, extract_entities))

    assert Extraction() == await extractor.extract("a" * OFF_LOOP_CHARS)
    assert {threading.get_ident()} == threads
    threads.clear()
    assert extract_entities(LONG_TEXT) == await extractor.extract(LONG_TEXT)
    assert threads and threading.get_ident() not in threads


async def test_a_threaded_judge_reads_long_pairs_in_a_worker_thread_and_short_ones_inline() -> None:
    threads: set[int] = set()
    judge = HeuristicContradictionJudge(recording(threads, heuristic_contradicts))
    short = "Redis listens on port 6379", "Redis listens on port 6380"

    assert await judge.contradicts(*short)
    assert {threading.get_ident()} == threads
    threads.clear()
    long: Any = (short[0] + " " + "x" * OFF_LOOP_CHARS, short[1] + " " + "x" * OFF_LOOP_CHARS)
    assert heuristic_contradicts(*long) == await judge.contradicts(*long)
    assert threads and threading.get_ident() not in threads
