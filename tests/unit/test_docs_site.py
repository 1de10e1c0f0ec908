"""The documentation: a short README that holds both quick-start commands, and a MkDocs
site under docs/ whose pages stay readable and which builds with ``--strict`` (a broken
link, a page left out of the nav or a missing include fails it)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import DOCS, MKDOCS, README, ROOT, site_pages

README_LINES = 300
PAGE_LINES = 800


def test_the_readme_is_short_and_holds_both_quick_start_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/apollo demo" in text
    assert "```sh\nscripts/test\n```" in text


def test_the_readme_links_to_every_page_of_the_site() -> None:
    text = README.read_text(encoding="utf-8")
    for path in site_pages():
        if path.name != "changelog.md":
            assert f"(docs/{path.name}" in text, path.name
    assert "(CHANGELOG.md)" in text


def test_no_docs_page_is_longer_than_the_limit() -> None:
    pages = sorted(p for p in DOCS.rglob("*.md") if "_notes" not in p.parts)
    assert pages
    long = {
        str(p.relative_to(ROOT)): n
        for p in pages
        if (n := len(p.read_text().splitlines())) > PAGE_LINES
    }
    assert {} == long


def test_every_page_is_in_the_nav() -> None:
    pages = set(DOCS.glob("*.md"))
    assert pages == set(site_pages())


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed")
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(MKDOCS),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert 0 == run.returncode, run.stdout + run.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    assert "Keep a Changelog" in changelog  # CHANGELOG.md itself, included
