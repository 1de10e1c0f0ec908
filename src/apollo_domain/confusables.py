"""Texts as they read: Cyrillic and Greek letters that disguise Latin ones are folded back.

"Rеdis" with a Cyrillic ``е`` reads as "Redis" to every person and model, but its words
are new to an embedder, so a writer could store copies of its own text as new entries. A
small confusables map (the Latin look-alikes among Cyrillic and Greek letters, after the
single-letter mappings of Unicode TR39 ``confusables.txt``) gives a text's skeleton:

- a word that mixes Latin letters with look-alikes is folded (a real word never mixes
  scripts: TR39's mixed-script confusable);
- a text holding Latin letters whose every Cyrillic or Greek letter is a look-alike is
  folded whole (a whole word of look-alikes in an English sentence is a disguise too:
  TR39's whole-script confusable);
- a Russian or Greek text, which has letters without a Latin twin (``д``, ``и``, ``λ``),
  is left as written, save its mixed words.

What Apollo embeds is this reading, so a disguised copy lands on its original: from the
same source it is a near copy, from an independent source a restatement, exactly as the
plain text would be; a query reads through the disguise too. The stored content is the
text as written, and the duplicate identity (``content_hash``) is not touched. Pure and
linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

_LOOKALIKES = {
    # Cyrillic
    "а": "a",
    "с": "c",
    "ԁ": "d",
    "е": "e",
    "һ": "h",
    "і": "i",
    "ј": "j",
    "ӏ": "l",
    "о": "o",
    "р": "p",
    "ԛ": "q",
    "ѕ": "s",
    "у": "y",
    "ԝ": "w",
    "х": "x",
    "А": "A",
    "В": "B",
    "С": "C",
    "Е": "E",
    "Н": "H",
    "І": "I",
    "Ј": "J",
    "К": "K",
    "М": "M",
    "О": "O",
    "Р": "P",
    "Ѕ": "S",
    "Т": "T",
    "Х": "X",
    "У": "Y",
    "Ү": "Y",
    "Ԛ": "Q",
    "Ԝ": "W",
    # Greek
    "α": "a",
    "ϲ": "c",
    "ι": "i",
    "ν": "v",
    "ο": "o",
    "ρ": "p",
    "υ": "u",
    "χ": "x",
    "Α": "A",
    "Β": "B",
    "Ε": "E",
    "Ζ": "Z",
    "Η": "H",
    "Ι": "I",
    "Κ": "K",
    "Μ": "M",
    "Ν": "N",
    "Ο": "O",
    "Ρ": "P",
    "Τ": "T",
    "Υ": "Y",
    "Χ": "X",
    "Ϲ": "C",
}
CONFUSABLES: Final[Mapping[str, str]] = MappingProxyType(_LOOKALIKES)
"""Cyrillic or Greek letter → the Latin letter it passes for."""

_FOLD: Final = str.maketrans(_LOOKALIKES)
_LATIN: Final = re.compile(r"[A-Za-z]")
_CYRILLIC_OR_GREEK: Final = re.compile(r"[\u0370-\u03ff\u0400-\u052f\u1f00-\u1fff]")
_WORD: Final = re.compile(r"\w+")


def _only_lookalikes(text: str) -> bool:
    return all(letter in _LOOKALIKES for letter in _CYRILLIC_OR_GREEK.findall(text))


def _fold_mixed(match: re.Match[str]) -> str:
    word = match.group(0)
    if _LATIN.search(word) and any(letter in _LOOKALIKES for letter in word):
        return word.translate(_FOLD)
    return word


def reading(text: str) -> str:
    """``text`` with the Cyrillic and Greek look-alikes that disguise Latin letters folded
    to them (see the module docstring); a text without any is returned as it is."""
    if not _CYRILLIC_OR_GREEK.search(text):
        return text
    if _LATIN.search(text) and _only_lookalikes(text):
        return text.translate(_FOLD)
    return _WORD.sub(_fold_mixed, text)


__all__ = ["CONFUSABLES", "reading"]
