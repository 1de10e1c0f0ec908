"""The settings that bound the service's edges and its background work: HTTP timeouts and
connection cap, access-log retention, outbox workers."""

from __future__ import annotations

import pytest

from apollo_app import Settings
from apollo_domain.errors import ConfigurationError


def test_http_timeouts_and_the_connection_cap_are_read_with_their_defaults():
    """Unset: 10 s for headers, 30 s for a body, 512 connections; each has its variable."""
    defaults = Settings.from_env({})
    assert (10.0, 30.0, 512) == (
        defaults.http_header_timeout,
        defaults.http_body_timeout,
        defaults.http_max_connections,
    )
    settings = Settings.from_env(
        {
            "APOLLO_HTTP_HEADER_TIMEOUT": "2.5",
            "APOLLO_HTTP_BODY_TIMEOUT": "60",
            "APOLLO_HTTP_MAX_CONNECTIONS": "64",
        }
    )
    assert (2.5, 60.0, 64) == (
        settings.http_header_timeout,
        settings.http_body_timeout,
        settings.http_max_connections,
    )


def test_access_log_retention_defaults_to_30_days_and_0_keeps_everything():
    assert 30 == Settings.from_env({}).access_log_retention_days
    kept = Settings.from_env({"APOLLO_ACCESS_LOG_RETENTION_DAYS": "0"})
    assert 0 == kept.access_log_retention_days


def test_outbox_workers_default_to_two_and_0_leaves_the_scans_to_others():
    assert 2 == Settings.from_env({}).outbox_workers
    assert 0 == Settings.from_env({"APOLLO_OUTBOX_WORKERS": "0"}).outbox_workers


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("APOLLO_HTTP_HEADER_TIMEOUT", "0"),
        ("APOLLO_HTTP_HEADER_TIMEOUT", "soon"),
        ("APOLLO_HTTP_BODY_TIMEOUT", "-1"),
        ("APOLLO_HTTP_BODY_TIMEOUT", "7200"),
        ("APOLLO_HTTP_MAX_CONNECTIONS", "0"),
        ("APOLLO_HTTP_MAX_CONNECTIONS", "1.5"),
        ("APOLLO_ACCESS_LOG_RETENTION_DAYS", "-1"),
        ("APOLLO_ACCESS_LOG_RETENTION_DAYS", "7.5"),
        ("APOLLO_ACCESS_LOG_RETENTION_DAYS", "36501"),
        ("APOLLO_OUTBOX_WORKERS", "-1"),
        ("APOLLO_OUTBOX_WORKERS", "65"),
    ],
)
def test_bad_values_name_their_variable(variable, value):
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env({variable: value})
    assert variable == err.value.variable
