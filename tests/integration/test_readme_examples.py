"""The examples of the README's "Testing your code with Apollo" section run as written."""

from __future__ import annotations

import re
from pathlib import Path

from apollo_domain.testing import POLICY_CASES
from tests.pytest_runs import run_pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Testing your code with Apollo"


def section_examples() -> dict[str, str]:
    """The section's Python blocks, by the file name each one's first line gives."""
    section = README.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    examples: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL):
        name = re.fullmatch(r"# (test_\w+\.py)", block.splitlines()[0])
        assert name is not None, f"a README test example must start with '# test_....py':\n{block}"
        examples[name.group(1)] = block
    return examples


def test_the_section_shows_a_policy_test_and_a_fixture_test() -> None:
    """The section holds exactly the two examples the test below runs."""
    assert ["test_my_policy.py", "test_my_agents.py"] == list(section_examples())


def test_the_examples_pass_and_the_checks_report_their_cases(tmp_path: Path) -> None:
    """Both examples pass as pytest files with the plugin and asyncio auto mode, and the
    hypothesis statistics show the invariant checks met each notable case."""
    for name, code in section_examples().items():
        (tmp_path / name).write_text(code)

    run = run_pytest(
        tmp_path,
        "-o",
        "asyncio_mode=auto",
        "--hypothesis-show-statistics",
        "--hypothesis-seed=0",
    )

    assert 0 == run.returncode, run.output
    assert run.summary.startswith("3 passed"), run.output
    missing = [case for case in POLICY_CASES if case not in run.output]
    assert [] == missing, run.output
