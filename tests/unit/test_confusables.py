"""Texts as they read: look-alike letters that disguise Latin ones are folded (TR39)."""

from __future__ import annotations

import pytest
from hypothesis import event, given

from apollo_domain.confusables import reading
from tests.strategies import disguised_texts


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("Rеdis kееps thе wholе dаtаsеt in mеmory", "Redis keeps the whole dataset in memory"),
        ("the сор went home", "the cop went home"),  # a whole word of look-alikes
        ("Redis хранит Rеdis", "Redis хранит Redis"),  # a Russian text: mixed words only
        ("Ρython uses indentation", "Python uses indentation"),  # Greek capital rho
    ],
)
def test_disguised_latin_reads_as_latin(written: str, read: str) -> None:
    assert read == reading(written)


@pytest.mark.parametrize(
    "text",
    [
        "Redis хранит все данные в памяти",
        "Αθήνα είναι η πρωτεύουσα της Ελλάδας",
        "сор",  # no Latin letter: nothing is disguised
        "plain ASCII text, 42 ports",
    ],
)
def test_genuine_cyrillic_greek_and_ascii_texts_are_left_as_written(text: str) -> None:
    assert text == reading(text)


@given(disguised_texts())
def test_a_disguised_copy_reads_as_its_original(pair: tuple[str, str]) -> None:
    """Whatever letters are swapped for look-alikes, the copy reads as the ASCII original,
    and reading is idempotent."""
    original, disguised = pair
    event("disguised" if disguised != original else "plain")
    assert original == reading(disguised)
    assert reading(disguised) == reading(reading(disguised))
