"""Run pytest in a subprocess on a folder of test files, with Apollo's pytest plugin.

The child imports Apollo from the same source tree as this test session, whether or not
the installed distribution already registers the plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from attrs import frozen

import apollo_app

SOURCE_ROOT = Path(apollo_app.__file__).resolve().parents[1]

PYTEST_INI = """\
[pytest]
asyncio_default_fixture_loop_scope = function
"""


@frozen
class PytestRun:
    returncode: int
    output: str

    @property
    def summary(self) -> str:
        """pytest's closing line, e.g. ``3 passed in 1.20s``."""
        lines = [line for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def run_pytest(
    folder: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    only_plugins: Sequence[str] | None = None,
    timeout: float = 300.0,
    config: tuple[str, str] = ("pytest.ini", PYTEST_INI),
) -> PytestRun:
    """``python -m pytest -p apollo_app.pytest_plugin ARGS`` in ``folder`` (given its own
    configuration file, ``config`` = (name, text), so no configuration from the folders
    above leaks in).

    ``only_plugins`` (e.g. ``["asyncio"]``) turns off the autoloading of installed plugins
    and loads just those beside Apollo's, which starts pytest several times faster.
    """
    name, text = config
    (folder / name).write_text(text)
    environment = {**os.environ, **(env or {})}
    chosen: list[str] = []
    if only_plugins is not None:
        environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        for plugin in only_plugins:
            chosen += ["-p", plugin]
    inherited = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(SOURCE_ROOT), *([inherited] if inherited else [])]
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "apollo_app.pytest_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        *chosen,
        *args,
    ]
    completed = subprocess.run(
        command, cwd=folder, env=environment, capture_output=True, text=True, timeout=timeout
    )
    return PytestRun(completed.returncode, completed.stdout + completed.stderr)
