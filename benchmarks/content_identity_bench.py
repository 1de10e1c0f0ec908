"""Content identity and the visible-text check: their cost per text, beside a baseline.

The content hash folds every default-ignorable code point and content must show
something; both are linear scans. This measures ``clean_content`` + ``content_hash`` (what
step 1 of an ingest does to a text) against the baseline of the same run: the hash that
folded only the five zero-width characters, without the visible-text check.

Inputs: typical notes (80-150 characters), a text at the content bound (100,000
characters), and the same bound filled with default-ignorable code points and one visible
character at its very end (the visible-text check's worst case).

    PYTHONPATH=src python -m benchmarks.content_identity_bench [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import time
import unicodedata
from collections.abc import Callable, Sequence

from apollo_domain.bounds import CONTENT
from apollo_domain.normalize import clean_content, content_hash

from ._common import TextGenerator

_ZERO_WIDTH = re.compile("[\u200b-\u200d\u2060\ufeff]")
_WHITESPACE = re.compile(r"\s+")


def baseline(text: str) -> str:
    """Cleaning and identity before the fold of every default-ignorable code point and
    the visible-text check."""
    cleaned = text.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8").strip()
    if not cleaned or len(cleaned) > CONTENT.limit:
        raise ValueError("content")
    folded = unicodedata.normalize("NFKC", _ZERO_WIDTH.sub("", cleaned))
    folded = unicodedata.normalize("NFKC", folded.lower())
    canonical = _WHITESPACE.sub(" ", folded).strip()
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def current(text: str) -> str:
    return content_hash(clean_content(text))


def per_text(function: Callable[[str], str], texts: Sequence[str], repeat: int) -> float:
    """The best of ``repeat`` runs over ``texts``, in microseconds per text."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for text in texts:
            function(text)
        best = min(best, time.perf_counter() - started)
    return best / len(texts) * 1e6


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """Print the table; return each input's baseline and current µs per text."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="few texts, one run")
    args = parser.parse_args(argv)
    repeat, copies = (1, 2) if args.quick else (args.repeat, 20)
    generator = TextGenerator(seed=7)
    notes = [generator.text() for _ in range(200 if args.quick else 2_000)]
    longest = (" ".join(notes) * 200)[: CONTENT.limit]
    hidden = "\u00ad\u034f\ufe0f\u200b" * (CONTENT.limit // 4 - 1) + "\u2064\u180ex"
    inputs = {
        "notes (80-150 chars)": notes,
        "100,000 chars": [longest] * copies,
        "100,000 ignorable + 1 visible": [hidden] * copies,
    }
    figures: dict[str, dict[str, float]] = {}
    print(f"{'input':<32}{'baseline µs':>14}{'current µs':>14}{'ratio':>8}")
    for name, texts in inputs.items():
        before = per_text(baseline, texts, repeat)
        after = per_text(current, texts, repeat)
        figures[name] = {"baseline_us": before, "current_us": after}
        print(f"{name:<32}{before:>14.1f}{after:>14.1f}{after / before:>8.2f}")
    return figures


if __name__ == "__main__":
    main()
