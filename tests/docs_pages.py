"""The project's documentation as the tests read it: README.md, and the pages of the
MkDocs site under docs/ (mkdocs.yml lists them) where the rest of it lives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"


def page_path(name: str) -> Path:
    """The docs page ``name`` (``"concepts"`` is docs/concepts.md); it must exist."""
    path = DOCS / f"{name}.md"
    assert path.is_file(), f"docs/{name}.md is missing"
    return path


def page(name: str) -> str:
    """The text of the docs page ``name``."""
    return page_path(name).read_text(encoding="utf-8")


def site_pages() -> list[Path]:
    """The pages of the site, in the order of mkdocs.yml's nav."""
    listed = re.findall(r"^\s*-\s[^:\n]+:\s*(\S+\.md)\s*$", MKDOCS.read_text(), flags=re.M)
    return [DOCS / name for name in listed]


def documentation() -> list[Path]:
    """README.md, then every page of the site in nav order."""
    return [README, *site_pages()]
