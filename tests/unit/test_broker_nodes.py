"""Broker node lists in APOLLO_AMQP_URL: parsed strictly, never repeated with a password."""

from __future__ import annotations

import pytest

from apollo_adapters.rabbitmq.nodes import address, node_urls
from apollo_app import Apollo, ConfigurationError, Settings
from apollo_domain.errors import ValidationError

LIST = "amqp://apollo:first-secret@10.0.0.1:5672/mesh, amqps://apollo:second-secret@10.0.0.2/mesh"


def test_a_list_names_each_node_in_order() -> None:
    assert (
        "amqp://apollo:first-secret@10.0.0.1:5672/mesh",
        "amqps://apollo:second-secret@10.0.0.2/mesh",
    ) == node_urls(LIST)
    assert ("amqp://guest:guest@127.0.0.1/",) == node_urls("amqp://guest:guest@127.0.0.1/")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("amqp://apollo:first-secret@h1/,", "node 2 of 2 is empty"),
        ("amqp://apollo:first-secret@h1/,apollo:second-secret@h2", "node 2 of 2 is not an amqp"),
        ("http://apollo:first-secret@h1/", "node 1 of 1 is not an amqp"),
        ("amqp://apollo:first-secret@h1/,amqp://agent:second-secret@h2/", "same user"),
    ],
)
def test_a_bad_list_is_refused_without_repeating_it(url: str, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        node_urls(url)
    assert "url" == refused.value.field
    assert why in refused.value.message
    assert "secret" not in str(refused.value)


def test_an_address_has_no_login() -> None:
    assert ["amqp://10.0.0.1:5672/mesh", "amqps://10.0.0.2/mesh"] == [
        address(node) for node in node_urls(LIST)
    ]


def test_settings_mask_every_url_of_a_list() -> None:
    settings = Settings.from_env({"APOLLO_AMQP_URL": LIST})
    assert LIST == settings.amqp_url
    assert "secret" not in repr(settings)
    assert "10.0.0.2" in repr(settings)


async def test_client_mode_reads_the_queue_type_and_refuses_a_bad_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused before anything connects (the URL's port answers nothing)."""
    monkeypatch.setenv("APOLLO_QUEUE_TYPE", "stream")
    with pytest.raises(ConfigurationError) as refused:
        async with Apollo.client_mode("amqp://guest:guest@127.0.0.1:1/"):
            pass
    assert "APOLLO_QUEUE_TYPE" == refused.value.variable
