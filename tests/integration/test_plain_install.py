"""``pip install apollo-knowledge`` with no extras: the CLI matches by meaning out of the box.

A fresh virtual environment gets this checkout installed with no extras (from the normal
index and pip's cache, so about half a minute once the wheels are cached). Torch is not
in it; the packaged sentence model is, and ``apollo ingest`` then ``apollo query`` find a
note from a paraphrase that shares none of its words.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apollo_adapters.postgres.embedded import temporary_folder
from tests.environ import without_apollo_settings

# One worker builds the plain venv and runs both tests (under -n the module fixture would
# otherwise be built once per worker, about 20 s each).
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.xdist_group("plain-install")]

REPOSITORY = Path(__file__).resolve().parents[2]
NOTES = [
    "The cat sat on the mat",
    "The invoice is due at the end of the month",
    "Raft elects a leader by majority vote",
    "PostgreSQL keeps old row versions until VACUUM removes them",
    "The train to Lyon leaves from platform nine",
]
#: A paraphrase of a note that shares none of its words → that note.
PARAPHRASES = {
    "feline resting place": "The cat sat on the mat",
    "when do we have to pay the bill": "The invoice is due at the end of the month",
}


@pytest.fixture(scope="module")
def plain_venv() -> Iterator[Path]:
    """A virtual environment holding this checkout installed with no extras (in a folder
    others may enter: as root, the embedded server's user runs its binaries)."""
    folder = temporary_folder("apollo-plain-")
    try:
        yield install_plainly(folder / "venv")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def install_plainly(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"),
            *("--disable-pip-version-check", str(REPOSITORY)),
        ],
        env=plain_environ(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert 0 == installed.returncode, installed.stderr[-4000:]
    return venv


def plain_environ(**settings: str) -> dict[str, str]:
    """The environment of a user's shell: no checkout on the path, no suite settings."""
    environ = without_apollo_settings()
    for name in ("PYTHONPATH", "APOLLO_EMBEDDER", "VIRTUAL_ENV"):
        environ.pop(name, None)
    return environ | settings


def test_the_plain_install_has_no_torch_and_ships_the_model(plain_venv: Path) -> None:
    """Neither torch nor sentence-transformers is installed; the model folder the default
    embedder uses is the one inside the installed package."""
    python = str(plain_venv / "bin" / "python")
    for module in ("torch", "sentence_transformers", "transformers"):
        probe = subprocess.run([python, "-c", f"import {module}"], env=plain_environ())
        assert 0 != probe.returncode, f"{module} is installed"
    script = (
        "from apollo_adapters.embedders.sentence import default_model_path, PACKAGED_MODEL;"
        "from apollo_app import Settings; print(default_model_path() == PACKAGED_MODEL,"
        " Settings.from_env().embedder)"
    )
    shown = subprocess.run(
        [python, "-c", script], env=plain_environ(), capture_output=True, text=True
    )
    assert "True onnx" == shown.stdout.strip(), shown.stderr


def test_the_cli_finds_a_note_from_a_paraphrase(plain_venv: Path, server_folder: Path) -> None:
    """``apollo ingest`` builds the graph once (said on stderr) and stores the notes;
    ``apollo query`` with a paraphrase ranks its note first, from the cached graph."""
    apollo = str(plain_venv / "bin" / "apollo")
    environ = plain_environ(APOLLO_DATA_DIR=str(server_folder / "store"))
    notes = "".join(f'{{"content": "{note}"}}\n' for note in NOTES)
    ingested = subprocess.run(
        [apollo, "ingest", "-"], input=notes, env=environ, capture_output=True, text=True
    )
    assert 0 == ingested.returncode, ingested.stderr
    assert f"created {len(NOTES)}" in ingested.stdout
    assert "building the ONNX graph" in ingested.stderr
    for question, note in PARAPHRASES.items():
        answered = subprocess.run(
            [apollo, "query", question, "--json"], env=environ, capture_output=True, text=True
        )
        assert 0 == answered.returncode, answered.stderr
        assert "building the ONNX graph" not in answered.stderr
        entries = json.loads(answered.stdout)["entries"]
        assert entries, f"nothing found for {question!r}"
        assert note == entries[0]["content"], [e["content"] for e in entries]
    assert os.listdir(server_folder / "store" / "onnx")
