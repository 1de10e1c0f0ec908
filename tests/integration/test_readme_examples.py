"""The examples of the "Testing your code with Apollo" section (docs/testing.md) run as written."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from apollo_app.testing import StoreContract
from apollo_domain.testing import POLICY_CASES
from tests.docs_pages import ROOT, page_path
from tests.pytest_runs import run_pytest

TESTING = page_path("testing")
SECTION = "## Testing your code with Apollo"


def section_examples() -> dict[str, str]:
    """The section's Python blocks, by the file name each one's first line gives."""
    examples: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", section_text(), flags=re.DOTALL):
        name = re.fullmatch(r"# (test_\w+\.py)", block.splitlines()[0])
        assert name is not None, (
            f"a test example of docs/testing.md must start with '# test_....py':\n{block}"
        )
        examples[name.group(1)] = block
    return examples


def section_text() -> str:
    return TESTING.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]


def section_configuration() -> str:
    """The section's pytest configuration: its one ``toml`` block, a ``pyproject.toml``."""
    (block,) = re.findall(r"```toml\n(.*?)```", section_text(), flags=re.DOTALL)
    assert block.startswith("# pyproject.toml\n"), block
    return block


def section_install_commands() -> list[str]:
    return re.findall(r"`(pip install [^`]+)`", section_text())


def test_the_install_command_works_from_a_checkout() -> None:
    """Apollo is not published: the section installs it from the checkout, with the extra
    that pyproject.toml defines for testing."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    commands = section_install_commands()
    assert ['pip install ".[testing]"'] == commands
    assert {"hypothesis", "pytest", "pytest-asyncio"} <= {
        re.split(r"[<>=\[ ]", requirement)[0] for requirement in extras["testing"]
    }


def test_the_section_shows_a_policy_test_a_fixture_test_and_a_store_test() -> None:
    """The section holds exactly the three examples the tests below run."""
    assert ["test_my_policy.py", "test_my_agents.py", "test_my_store.py"] == list(
        section_examples()
    )


def store_contract_tests() -> int:
    """How many tests :class:`StoreContract` holds, each parametrization counted."""
    count = 0
    for name, member in vars(StoreContract).items():
        if name.startswith("test_"):
            cases = 1
            for mark in getattr(member, "pytestmark", []):
                if mark.name == "parametrize":
                    cases *= len(mark.args[1])
            count += cases
    return count


def test_the_examples_pass_and_the_checks_report_their_cases(tmp_path: Path) -> None:
    """The examples pass as pytest files with the plugin and the section's pytest
    configuration, without a warning (the store example: every test of the store contract
    suite), and the hypothesis statistics show the invariant checks met each notable
    case."""
    for name, code in section_examples().items():
        (tmp_path / name).write_text(code)

    run = run_pytest(
        tmp_path,
        "--hypothesis-show-statistics",
        "--hypothesis-seed=0",
        config=("pyproject.toml", section_configuration()),
    )

    assert 0 == run.returncode, run.output
    assert run.summary.startswith(f"{3 + store_contract_tests()} passed"), run.output
    assert "warning" not in run.summary, run.output
    missing = [case for case in POLICY_CASES if case not in run.output]
    assert [] == missing, run.output


def test_the_store_example_passes_in_strict_asyncio_mode_too(tmp_path: Path) -> None:
    """A project that leaves pytest-asyncio in its default strict mode runs the store
    contract suite all the same."""
    (tmp_path / "test_my_store.py").write_text(section_examples()["test_my_store.py"])

    run = run_pytest(tmp_path, "-o", "asyncio_mode=strict")

    assert 0 == run.returncode, run.output
    assert run.summary.startswith(f"{store_contract_tests()} passed"), run.output
    assert "warning" not in run.summary, run.output
