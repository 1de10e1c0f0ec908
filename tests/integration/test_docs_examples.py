"""Every code example of the docs pages runs in a test, or says why it does not.

A ``python``, ``sh`` or ``bash`` block of a page under docs/ is one of:

- marked ``<!-- runnable -->`` on the line above it: a shell block runs as pasted
  (tests/integration/test_readme_commands.py), a Python block runs here as a script, and
  each ``print(...)  # text`` line's text must be in what it prints;
- a test example of docs/testing.md ("Testing your code with Apollo"), which
  tests/integration/test_readme_examples.py runs under pytest;
- marked ``<!-- not-run: reason -->`` on the line above it, the reason saying why (a
  fragment, an outside service, a whole suite) and, where one exists, which test runs
  the same thing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import ROOT, site_pages
from tests.environ import without_apollo_settings
from tests.integration.test_readme_examples import section_examples

RUNNABLE = "<!-- runnable -->"
NOT_RUN = re.compile(r"<!-- not-run: (?P<reason>.{12,}?) -->")
#: A code block of a runnable language, with the line above it (empty at a page's start).
BLOCK = re.compile(
    r"(?:^(?P<above>[^\n]*)\n)?^```(?P<language>python|sh|bash)\n(?P<code>.*?)^```$",
    flags=re.DOTALL | re.M,
)
#: ``print(...)  # what it prints``
EXPECTED = re.compile(r"print\(.*\)\s+#\s*(?P<text>.+)$", flags=re.M)
DEADLINE = 120.0


def blocks() -> list[tuple[str, str, str, str]]:
    """(page, line above, language, code) of every runnable-language block of the site."""
    found = []
    for path in site_pages():
        for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
            found.append((path.name, match["above"] or "", match["language"], match["code"]))
    return found


def runnable_python() -> list[str]:
    return [
        code for _, above, language, code in blocks() if language == "python" and above == RUNNABLE
    ]


def test_every_example_is_run_or_says_why_not() -> None:
    run_by_pytest = set(section_examples().values())
    unmarked = [
        f"docs/{page}: ```{language} {code.splitlines()[0]!r}"
        for page, above, language, code in blocks()
        if above != RUNNABLE and not NOT_RUN.fullmatch(above) and code not in run_by_pytest
    ]
    assert [] == unmarked, (
        "mark each of these blocks on the line above it: <!-- runnable --> (it runs in a "
        "test) or <!-- not-run: why -->"
    )


def test_the_marks_are_used() -> None:
    """The marks are not a dead letter: the library examples run, and the reasons are
    given."""
    marks = [above for _, above, _, _ in blocks()]
    assert len(runnable_python()) >= 2
    assert sum(bool(NOT_RUN.fullmatch(above)) for above in marks) >= 5
    assert all("<!-- not-run" not in above or NOT_RUN.fullmatch(above) for above in marks), (
        "a not-run mark needs a reason of a few words: <!-- not-run: why -->"
    )


@pytest.mark.parametrize("code", runnable_python(), ids=lambda c: c.splitlines()[0][:40])
def test_a_runnable_python_example_runs_as_written(code: str, tmp_path: Path) -> None:
    environ = without_apollo_settings()
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert 0 == run.returncode, run.stdout + run.stderr
    for expected in EXPECTED.finditer(code):
        assert expected["text"].strip() in run.stdout, (expected["text"], run.stdout)
