"""Settings come from APOLLO_* variables; a bad value names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from apollo_app import ConfigurationError, Settings


def test_defaults_run_everything_embedded():
    settings = Settings.from_env({})
    assert (None, None, Path(".apollo")) == (
        settings.database_url,
        settings.amqp_url,
        settings.data_dir,
    )
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


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("APOLLO_HTTP_PORT", "notaport"),
        ("APOLLO_HTTP_PORT", "70000"),
        ("APOLLO_HTTP_ENABLED", "maybe"),
        ("APOLLO_EMBEDDER", "word2vec"),
        ("APOLLO_API_TOKENS", "just-a-token"),
        ("APOLLO_POLICY_RETRIEVAL_BOOST", "2"),
        ("APOLLO_POLICY_NO_SUCH_KNOB", "0.1"),
        ("APOLLO_EF_SEARCH", "0"),
    ],
)
def test_bad_values_name_their_variable(variable, value):
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env({variable: value})
    assert variable == err.value.variable
