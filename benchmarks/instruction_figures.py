"""The work of one build's query and write calls, in machine instructions: what
``benchmarks/compare.py --instructions`` counts under valgrind's callgrind on each of two
commits, because a count of instructions is the same from run to run whatever else the
machine is doing (a shared machine's wall clock moved the same figures by up to 70 %).

Run from the repository root (``compare.py`` runs it under ``valgrind --tool=callgrind``,
with ``PYTHONPATH`` pointing at each commit's ``src``)::

    PYTHONPATH=src:. .venv/bin/python benchmarks/instruction_figures.py --figure none
    PYTHONPATH=src:. .venv/bin/python benchmarks/instruction_figures.py --figure vector

In memory, hashing embedder, one process: 300 texts stored, every query of the figures
asked once (its embedding cached, each code path's first-call costs paid), then ``--count``
calls of the one ``--figure`` (``none``: no call). The difference between a run of a
figure and a run of ``none``, divided by the count, is one call's instructions.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from apollo_app import Apollo
from benchmarks._common import TextGenerator

#: The calls counted, by figure name.
FIGURES = ("vector", "hybrid", "store_knowledge")
ENTRIES = 300
QUESTIONS = 60


async def run(figure: str, count: int) -> None:
    texts = TextGenerator(seed=31)
    corpus = texts.texts(ENTRIES)
    asked = [" ".join(text.split()[:4]) for text in corpus[:QUESTIONS]]
    singles = texts.texts(count + 1)
    async with Apollo.in_memory() as apollo:
        client = apollo.client("claude-figures")
        await client.store_many(items=[{"content": text} for text in corpus])
        await client.store_knowledge(content=singles[-1])
        for mode in ("vector", "hybrid"):
            for question in asked:
                await client.query_knowledge(query=question, mode=mode, min_confidence=0)
        for index in range(count if figure != "none" else 0):
            if figure == "store_knowledge":
                await client.store_knowledge(content=singles[index])
            else:
                await client.query_knowledge(
                    query=asked[index % QUESTIONS], mode=figure, min_confidence=0
                )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figure", choices=("none", *FIGURES), required=True)
    parser.add_argument("--count", type=int, default=100, help="calls of the figure")
    args = parser.parse_args(argv)
    asyncio.run(run(args.figure, args.count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
