"""Settings come from APOLLO_* variables; a bad value names its variable."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from apollo_adapters.embedders import HashingEmbedder, OpenAIEmbedder
from apollo_adapters.memory import InMemoryStore
from apollo_app import ConfigurationError, Principal, Settings
from apollo_app.bootstrap import (
    Overrides,
    build_embedder,
    relevance_floor_of,
    relevance_rule_of,
    wire,
)
from apollo_domain.errors import Forbidden
from apollo_domain.retry import OutboxRetry


def test_defaults_run_everything_embedded():
    """The embedded server, the in-process bus and the packaged sentence model (run by ONNX
    Runtime, no torch); the hashing embedder only when asked for."""
    settings = Settings.from_env({})
    assert (None, None, Path(".apollo"), "onnx") == (
        settings.database_url,
        settings.amqp_url,
        settings.data_dir,
        settings.embedder,
    )
    assert "onnx" == Settings().embedder
    assert "hashing" == Settings.from_env({"APOLLO_EMBEDDER": "hashing"}).embedder
    assert (8765, "127.0.0.1", True) == (
        settings.http_port,
        settings.http_host,
        settings.http_enabled,
    )


def test_values_are_read_and_converted():
    settings = Settings.from_env(
        {
            "APOLLO_DATABASE_URL": "postgresql://db/apollo",
            "APOLLO_DATA_DIR": "/var/lib/apollo",
            "APOLLO_HTTP_PORT": "9000",
            "APOLLO_HTTP_ENABLED": "off",
            "APOLLO_API_TOKENS": "t1=alice, t2=bob",
            "APOLLO_POLICY_RETRIEVAL_BOOST": "0.05",
            "APOLLO_DECAY_INTERVAL": "60",
        }
    )
    assert "postgresql://db/apollo" == settings.database_url
    assert Path("/var/lib/apollo") == settings.data_dir
    assert (9000, False) == (settings.http_port, settings.http_enabled)
    assert {"t1": "alice", "t2": "bob"} == dict(settings.api_tokens)
    assert 0.05 == settings.policy.retrieval_boost
    assert 60.0 == settings.decay_interval


def test_outbox_backoff_is_read_and_reaches_the_use_cases():
    """The three retry variables and the lease become the use cases' OutboxRetry; unset,
    the defaults outlast an hour's outage (5 s doubling to 10 min, 20 attempts)."""
    assert OutboxRetry(5.0, 600.0, 20, 900.0) == Settings.from_env({}).outbox_retry
    settings = Settings.from_env(
        {
            "APOLLO_OUTBOX_RETRY_BASE_SECONDS": "2",
            "APOLLO_OUTBOX_RETRY_MAX_SECONDS": "120",
            "APOLLO_OUTBOX_MAX_ATTEMPTS": "7",
            "APOLLO_OUTBOX_LEASE_SECONDS": "60",
        }
    )
    assert OutboxRetry(2.0, 120.0, 7, 60.0) == settings.outbox_retry


def test_the_boost_window_is_read_and_defaults_to_the_decay_interval():
    assert timedelta(hours=1) == Settings.from_env({}).boost_window
    assert timedelta(hours=2) == Settings.from_env({"APOLLO_DECAY_INTERVAL": "7200"}).boost_window
    settings = Settings.from_env({"APOLLO_BOOST_WINDOW_SECONDS": "90"})
    assert timedelta(seconds=90) == settings.boost_window


def test_a_consumer_keeps_at_most_one_delivery_per_pooled_connection_in_flight():
    assert 10 == Settings.from_env({}).consumer_prefetch  # prefetch 16, pool of 10
    assert 4 == Settings.from_env({"APOLLO_PREFETCH": "4"}).consumer_prefetch
    assert (
        30
        == Settings.from_env({"APOLLO_PREFETCH": "64", "APOLLO_POOL_MAX": "30"}).consumer_prefetch
    )


def test_the_relevance_floor_overrides_the_embedders_and_reaches_the_use_cases():
    """Unset, the embedder's calibrated floor applies; ``APOLLO_RELEVANCE_FLOOR`` replaces
    it for every embedder (an OpenAI-compatible model Apollo has not calibrated)."""
    assert None is Settings.from_env({}).retrieval
    settings = Settings.from_env({"APOLLO_RELEVANCE_FLOOR": "0.3"})
    deps = wire(
        InMemoryStore(), Overrides(embedder=HashingEmbedder(), retrieval=settings.retrieval)
    )
    assert 0.3 == deps.retrieval.relevance_floor
    assert (
        0.15
        == wire(InMemoryStore(), Overrides(embedder=HashingEmbedder())).retrieval.relevance_floor
    )
    openai = build_embedder(
        settings.replace(embedder="openai", embedding_url="http://e", embedding_model="m")
    )
    assert 0.3 == relevance_floor_of(openai)


def test_a_sentence_models_rule_comes_with_it_unless_a_floor_is_set():
    """MiniLM (here as an OpenAI-compatible model name) brings its floor and its standout
    and small-store floor (benchmarks/relevance_rule_bench.py); ``APOLLO_RELEVANCE_FLOOR``
    set, that floor is the whole rule; the hashing embedder keeps its floor alone."""
    minilm = OpenAIEmbedder("http://e", "all-MiniLM-L6-v2", dimension=384)
    own = wire(InMemoryStore(), Overrides(embedder=minilm)).retrieval
    assert (0.39, 0.25, 10, 0.25, 0.17, 0.052) == (
        own.relevance_floor,
        own.relevance_margin,
        own.relevance_background,
        own.relevance_minimum,
        own.relevance_single,
        own.relevance_growth,
    )
    settings = Settings.from_env({"APOLLO_RELEVANCE_FLOOR": "0.3"})
    floored = wire(InMemoryStore(), Overrides(embedder=minilm, retrieval=settings.retrieval))
    assert (0.3, None, None) == (
        floored.retrieval.relevance_floor,
        floored.retrieval.relevance_margin,
        floored.retrieval.relevance_single,
    )
    assert {} == relevance_rule_of(HashingEmbedder())
    hashing = wire(InMemoryStore(), Overrides(embedder=HashingEmbedder())).retrieval
    assert (0.15, None) == (hashing.relevance_floor, hashing.relevance_margin)


def test_group_commit_is_read_with_defaults_that_batch():
    """Unset: batches of up to 16 ingests gathered for at most 10 ms; 1 turns it off."""
    defaults = Settings.from_env({})
    assert (16, 10.0) == (defaults.ingest_batch, defaults.ingest_batch_ms)
    settings = Settings.from_env({"APOLLO_INGEST_BATCH": "1", "APOLLO_INGEST_BATCH_MS": "2.5"})
    assert (1, 2.5) == (settings.ingest_batch, settings.ingest_batch_ms)


def test_search_breadths_are_read_with_a_narrower_one_for_ingest():
    """Unset: queries search the HNSW index at ef_search 100, an ingest's neighbour search
    at 64; each has its own variable."""
    defaults = Settings.from_env({})
    assert (100, 64) == (defaults.ef_search, defaults.ingest_ef_search)
    settings = Settings.from_env({"APOLLO_EF_SEARCH": "200", "APOLLO_INGEST_EF_SEARCH": "40"})
    assert (200, 40) == (settings.ef_search, settings.ingest_ef_search)


def test_the_request_time_budget_is_read_with_a_default_of_30_seconds():
    assert 30.0 == Settings.from_env({}).request_timeout
    assert 2.5 == Settings.from_env({"APOLLO_REQUEST_TIMEOUT": "2.5"}).request_timeout


def test_the_queue_type_is_read_and_defaults_to_quorum():
    assert "quorum" == Settings.from_env({}).queue_type
    assert "classic" == Settings.from_env({"APOLLO_QUEUE_TYPE": " Classic "}).queue_type
    assert "quorum" == Settings.from_env({"APOLLO_QUEUE_TYPE": "QUORUM"}).queue_type


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("APOLLO_REQUEST_TIMEOUT", "0"),
        ("APOLLO_REQUEST_TIMEOUT", "forever"),
        ("APOLLO_INGEST_BATCH", "0"),
        ("APOLLO_INGEST_BATCH", "many"),
        ("APOLLO_INGEST_BATCH_MS", "-1"),
        ("APOLLO_INGEST_BATCH_MS", "5000"),
        ("APOLLO_HTTP_PORT", "notaport"),
        ("APOLLO_HTTP_PORT", "70000"),
        ("APOLLO_HTTP_ENABLED", "maybe"),
        ("APOLLO_EMBEDDER", "word2vec"),
        ("APOLLO_ONNX_QUANTIZE", "int4"),
        ("APOLLO_ONNX_THREADS", "0"),
        ("APOLLO_ONNX_THREADS", "all"),
        ("APOLLO_API_TOKENS", "just-a-token"),
        ("APOLLO_POLICY_RETRIEVAL_BOOST", "2"),
        ("APOLLO_POLICY_NO_SUCH_KNOB", "0.1"),
        ("APOLLO_EF_SEARCH", "0"),
        ("APOLLO_INGEST_EF_SEARCH", "0"),
        ("APOLLO_INGEST_EF_SEARCH", "1001"),
        ("APOLLO_OUTBOX_RETRY_BASE_SECONDS", "0"),
        ("APOLLO_OUTBOX_RETRY_MAX_SECONDS", "1"),  # below the 5 s base
        ("APOLLO_OUTBOX_MAX_ATTEMPTS", "0"),
        ("APOLLO_OUTBOX_MAX_ATTEMPTS", "2.5"),
        ("APOLLO_OUTBOX_LEASE_SECONDS", "soon"),
        ("APOLLO_BOOST_WINDOW_SECONDS", "-1"),
        ("APOLLO_DATABASE_URL", "mysql://root@localhost/apollo"),
        ("APOLLO_DATABASE_URL", "apollo-db"),
        ("APOLLO_RELEVANCE_FLOOR", "1.5"),
        ("APOLLO_RELEVANCE_FLOOR", "high"),
        ("APOLLO_QUEUE_TYPE", "stream"),
        ("APOLLO_QUEUE_TYPE", "quorum,classic"),
    ],
)
def test_bad_values_name_their_variable(variable, value):
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env({variable: value})
    assert variable == err.value.variable


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://apollo@db:5432/apollo",
        "postgres://apollo@db/apollo",
        "POSTGRESQL://db/apollo",
        "host=db dbname=apollo user=apollo",
    ],
)
def test_postgresql_urls_and_connection_strings_are_accepted(url: str) -> None:
    assert url == Settings.from_env({"APOLLO_DATABASE_URL": url}).database_url


def test_another_database_is_refused_without_repeating_the_url() -> None:
    """A MySQL URL is a configuration error that names the variable and the scheme, and
    never echoes the URL (it may carry a password); so is one built in code."""
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env({"APOLLO_DATABASE_URL": "mysql://root:s3cret@localhost/apollo"})
    assert "APOLLO_DATABASE_URL" == err.value.variable
    assert "mysql://" in err.value.message
    assert "s3cret" not in err.value.message
    with pytest.raises(ConfigurationError) as built:
        Settings(database_url="mysql://root@localhost/apollo")
    assert "database_url" == built.value.variable


def test_a_message_without_user_id_is_refused_once_gateways_are_listed():
    """Every user a gateway (the default): anonymous is the one anonymous writer. Gateways
    listed: refused as unauthenticated, naming user_id, unless anonymous publishers are
    allowed (APOLLO_ALLOW_ANONYMOUS_PUBLISHERS)."""
    assert Principal(None) == Settings().bus_principal(None)
    restricted = Settings.from_env({"APOLLO_GATEWAY_USERS": "apollo-service"})
    with pytest.raises(Forbidden) as refused:
        restricted.bus_principal(None)
    assert ("user_id", True) == (refused.value.field, "unauthenticated" in str(refused.value))
    allowed = Settings.from_env(
        {"APOLLO_GATEWAY_USERS": "apollo-service", "APOLLO_ALLOW_ANONYMOUS_PUBLISHERS": "yes"}
    )
    assert Principal(None) == allowed.bus_principal(None)


@pytest.mark.parametrize("grant", ["http", "mesh:gateway:redacted", "ops:admin:Unknown"])
def test_a_token_may_not_act_as_an_agent_apollo_reserves(grant: str):
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env({"APOLLO_API_TOKENS": f"tok={grant}"})
    assert "APOLLO_API_TOKENS" in str(refused.value)


def test_a_transaction_mode_pooler_and_a_direct_migration_url_are_read():
    settings = Settings.from_env(
        {
            "APOLLO_DATABASE_URL": "postgresql://bouncer:6432/apollo",
            "APOLLO_DATABASE_POOLER": "Transaction",
            "APOLLO_MIGRATION_DATABASE_URL": "postgresql://primary:5432/apollo",
        }
    )
    assert settings.transaction_pooler
    assert settings.migration_database_url == "postgresql://primary:5432/apollo"
    replicated = Settings.from_env(
        {
            "APOLLO_DATABASE_URL": "postgresql://primary/apollo",
            "APOLLO_READ_DATABASE_URL": "postgresql://replica/apollo",
            "APOLLO_REPLICA_WAIT_SECONDS": "0.5",
        }
    )
    assert ("postgresql://replica/apollo", 0.5) == (
        replicated.read_database_url,
        replicated.replica_wait,
    )
    plain = Settings.from_env({"APOLLO_DATABASE_URL": "postgresql://primary/apollo"})
    assert not plain.transaction_pooler
    assert plain.migration_database_url is None


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("APOLLO_DATABASE_POOLER", "statement"),
        ("APOLLO_MIGRATION_DATABASE_URL", "mysql://primary/apollo"),
        ("APOLLO_MIGRATION_DATABASE_URL", "postgresql://primary/apollo"),
        ("APOLLO_READ_DATABASE_URL", "postgresql://replica/apollo"),
        ("APOLLO_REPLICA_WAIT_SECONDS", "-1"),
    ],
)
def test_bad_fleet_settings_name_their_variable(variable: str, value: str) -> None:
    """Bad values, and the primary's companions set without the primary."""
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env({variable: value})
    assert caught.value.variable == variable


def test_an_unknown_apollo_variable_is_warned_about_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="apollo_app.settings"):
        Settings.from_env(
            {
                "APOLLO_DATABASE_URLL": "postgresql://db/apollo",
                "APOLLO_TEST_DATABASE_URL": "postgresql://db/test",
                "APOLLO_SERVICE_USERS": "apollo",
                "APOLLO_POOL_MAX": "4",
            }
        )
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "APOLLO_DATABASE_URLL is not an Apollo setting and is ignored"
        " (did you mean APOLLO_DATABASE_URL?)"
    ]


def test_every_variable_the_settings_read_is_known() -> None:
    import re

    import apollo_app.settings as module

    source = Path(module.__file__).read_text(encoding="utf-8")
    read = set(re.findall(r'"(APOLLO_[A-Z0-9_]+)"', source))
    others = module.OTHER_VARIABLES | {n for n in read if n.startswith(module.OTHER_PREFIXES)}
    assert read - others == set(module.known_variables())
