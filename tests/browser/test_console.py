"""The console in a real browser against a real ``apollo serve``: search, an entry's page,
the disputes queue as an admin and as a reader, expertise and activity — and entry content
that looks like HTML stays text.

Screenshots of each view go to the test's ``tmp_path``; with ``APOLLO_CONSOLE_SCREENSHOT``
set (``scripts/console-screenshot``), the entry page's also goes there (docs/console.png).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ADMIN_TOKEN, READER_TOKEN, Service
from tests.browser.pixels import filled_fraction

pytestmark = [pytest.mark.browser, pytest.mark.postgres]

RA_ENABLED = "IPv6 router advertisements are enabled by default on Cisco interfaces"
RA_DISABLED = "IPv6 router advertisements are disabled by default on Cisco interfaces"
BACKUP_ON = "Nightly backups of the billing database are enabled on the staging cluster"
BACKUP_OFF = "Nightly backups of the billing database are disabled on the staging cluster"
HOSTILE = (
    'Harmless looking tip <img src=x onerror="window.apolloPwned=1">'
    "<script>window.apolloPwned=2</script> about quokka markup"
)
#: The colour of a bar's unfilled track (style.css ``progress.bar``).
TRACK = (0xEE, 0xF2, 0xF6)
BACKGROUND = [
    ("BGP route reflectors reduce full-mesh IBGP complexity", "claude-net-1", "networking"),
    (
        "OSPF hello packets are sent every 10 seconds on broadcast links",
        "openai-net-2",
        "networking",
    ),
    ("PostgreSQL vacuum reclaims storage held by dead tuples", "openai-db-2", "databases"),
    ("A B-tree index speeds up range scans on sorted keys", "claude-db-5", "databases"),
    ("Kubernetes liveness probes restart containers that hang", "gemini-ops-3", "operations"),
]


@pytest.fixture(scope="module")
def seeded(service: Service) -> dict[str, str]:
    """Background knowledge in three domains, two contradicting pairs (each side disputed
    once the service's contradiction scan ran) and an entry whose content is HTML."""
    ids = {}
    for content, agent, domain in BACKGROUND:
        ids[content] = service.ingest(content, agent, knowledge_domain=domain)
    pairs = [
        ("ra-on", RA_ENABLED, "gemini-ops-3"),
        ("ra-off", RA_DISABLED, "claude-net-1"),
        ("backup-on", BACKUP_ON, "openai-db-2"),
        ("backup-off", BACKUP_OFF, "claude-db-5"),
    ]
    for name, content, agent in pairs:
        ids[name] = service.ingest(content, agent, knowledge_domain="operations")
    ids["hostile"] = service.ingest(HOSTILE, "human-eve", knowledge_domain="tips")
    for name in ("ra-on", "ra-off", "backup-on", "backup-off"):
        service.wait_for_status(ids[name], "disputed")
    return ids


def open_console(page: Any, service: Service, token: str | None, route: str = "") -> None:
    page.goto(f"{service.url}/{route}")
    if token is not None:
        page.fill("#token", token)
        page.click("#token-form button[type=submit]")
        page.wait_for_selector("#token-state:has-text('token in use')")


def search(page: Any, text: str, *, statuses: tuple[str, ...] = ("candidate", "confirmed")) -> None:
    form = page.locator("#search-form")
    form.locator("input[name=q]").fill(text)
    for box in form.locator("input[name=status]").all():
        box.set_checked(box.get_attribute("value") in statuses)
    form.locator("input[name=min]").fill("0")
    form.locator("button[type=submit]").click()
    page.locator("#results").and_(page.locator(f"[data-query='{text}']")).wait_for()


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    target = tmp_path / f"{name}.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 0
    return target


def test_search_finds_entries_with_their_signals_and_opens_an_entry(
    page: Any, service: Service, seeded: dict[str, str], tmp_path: Path
) -> None:
    """A search shows each result's confidence, status, scope and the signals that found
    it; its link opens the entry's page with lifecycle, evidence and the relation graph."""
    open_console(page, service, ADMIN_TOKEN)
    newest = page.locator("#results[data-query=''] li.result")  # the landing page browses
    newest.first.wait_for()
    assert newest.count() >= len(BACKGROUND)
    search(page, "router advertisements Cisco", statuses=("candidate", "confirmed", "disputed"))
    results = page.locator("#results li.result")
    texts = results.all_inner_texts()
    assert any(RA_DISABLED in t for t in texts), texts
    hit = results.filter(has_text=RA_DISABLED)
    meta = hit.locator(".meta").inner_text()
    assert "disputed" in meta and "global" in meta
    assert re.search(r"\b0\.\d\d\b", meta), meta  # the confidence
    assert re.search(r"(vector|lexical|graph) \d", meta), meta  # the signals
    shot(page, tmp_path, "search")

    hit.locator("a.entry-link").click()
    page.wait_for_selector("#entry-content")
    assert RA_DISABLED == page.locator("#entry-content").inner_text()
    lifecycle = page.locator("dl.facts").first.inner_text()
    assert "Created" in lifecycle and "claude-net-1" in lifecycle
    evidence = page.locator("table.evidence tbody tr")
    assert 1 == evidence.count()
    assert "claude-net-1" in evidence.first.inner_text() and "origin" in evidence.first.inner_text()
    graph = page.locator("svg.graph")
    assert "contradicts" in (graph.text_content() or "")
    assert graph.locator(f"a[href='#/entry/{seeded['ra-on']}']").count() == 1
    target = shot(page, tmp_path, "entry")
    if os.environ.get("APOLLO_CONSOLE_SCREENSHOT"):
        shutil.copyfile(target, os.environ["APOLLO_CONSOLE_SCREENSHOT"])
    assert [] == page.errors


def test_entry_content_that_looks_like_html_is_shown_as_text(
    page: Any, service: Service, seeded: dict[str, str], tmp_path: Path
) -> None:
    """Content is attacker-controlled: markup in it is shown literally, never parsed, in
    the results and on the entry page, and its handlers never run."""
    open_console(page, service, ADMIN_TOKEN)
    search(page, "quokka markup tip")
    result = page.locator("#results li.result").filter(has_text="quokka")
    assert '<img src=x onerror="window.apolloPwned=1">' in result.inner_text()
    assert 0 == page.locator("#results img, #results script").count()
    result.locator("a.entry-link").click()
    page.wait_for_selector("#entry-content")
    assert HOSTILE == page.locator("#entry-content").inner_text()
    assert 0 == page.locator("main img, main script").count()
    assert page.evaluate("window.apolloPwned") is None
    shot(page, tmp_path, "hostile")
    assert [] == page.errors


def test_a_reader_sees_the_admin_actions_refused(
    page: Any, service: Service, seeded: dict[str, str], tmp_path: Path
) -> None:
    """A reader's resolve is refused by the API (403), the message says so, the admin
    buttons are disabled, and the entry stays disputed."""
    open_console(page, service, READER_TOKEN, "#/disputes")
    side = page.locator(f".side[data-id='{seeded['backup-on']}']")
    side.locator("button[data-resolution=accept]").click()
    message = page.locator("#message.error")
    message.wait_for()
    assert "403" in message.inner_text() and "admin" in message.inner_text()
    buttons = page.locator("button.admin")
    assert buttons.count() >= 6
    for button in buttons.all():
        assert button.is_disabled()
    assert "disputed" == service.entry(seeded["backup-on"])["status"]
    shot(page, tmp_path, "reader-refused")

    page.goto(f"{service.url}/#/entry/{seeded['backup-off']}")
    page.wait_for_selector("#deprecate")
    assert page.locator("#deprecate").is_disabled()  # remembered for this tab's token


def test_an_admin_resolves_a_dispute_side_by_side(
    page: Any, service: Service, seeded: dict[str, str], tmp_path: Path
) -> None:
    """The queue shows each disputed entry beside the one it contradicts; accepting one
    side confirms it and archives the other (lost dispute), and the queue drops the pair."""
    open_console(page, service, ADMIN_TOKEN, "#/disputes")
    pair = page.locator(".dispute").filter(has_text=RA_ENABLED)
    assert RA_DISABLED in pair.inner_text()
    shot(page, tmp_path, "disputes")
    pair.locator(f".side[data-id='{seeded['ra-on']}'] button[data-resolution=accept]").click()
    page.locator("#message.ok").wait_for()
    assert "Resolved (accept)" in page.locator("#message").inner_text()
    page.wait_for_function(
        "text => !document.querySelector('#view').innerText.includes(text)", arg=RA_ENABLED
    )
    assert "confirmed" == service.entry(seeded["ra-on"])["status"]
    lost = service.entry(seeded["ra-off"])
    assert ("archived", "lost_dispute") == (
        lost["status"],
        lost["source_context"].get("archive_reason"),
    )
    page.goto(f"{service.url}/#/entry/{seeded['ra-off']}")
    page.wait_for_selector("#entry-content")
    assert "lost_dispute" in page.locator("dl.facts").first.inner_text()
    assert [] == page.errors


def test_expertise_and_activity_show_the_mesh(
    page: Any, service: Service, seeded: dict[str, str], tmp_path: Path
) -> None:
    """The heat map has a row per domain and a column per agent; domains with one agent
    are at risk; activity shows the store's counts and the service's counters."""
    open_console(page, service, ADMIN_TOKEN, "#/expertise")
    heatmap = page.locator("table.heatmap")
    heatmap.wait_for()
    agents = heatmap.locator("th.agent").all_inner_texts()
    assert {"claude-net-1", "openai-db-2", "gemini-ops-3"} <= set(agents)
    rows = heatmap.locator("tbody th").all_inner_texts()
    assert {"networking", "databases", "operations", "tips"} <= set(rows)
    assert heatmap.locator("td.heat:not(.empty)").count() >= len(BACKGROUND)
    assert "tips" in page.locator("ul.at-risk").inner_text()
    shot(page, tmp_path, "expertise")

    page.click("#nav a[data-view=activity]")
    facts = page.locator("dl.facts")
    facts.nth(1).wait_for()
    store, counters = facts.nth(0).inner_text(), facts.nth(1).inner_text()
    assert re.search(r"Entries\s+\d+", store), store
    assert re.search(r"Ingests created\s+(\d+)", counters), counters
    assert int(re.search(r"Ingests created\s+(\d+)", counters).group(1)) >= len(BACKGROUND) + 5
    assert "Outbox backlog" in counters
    shot(page, tmp_path, "activity")
    assert [] == page.errors


def test_activity_bars_fill_in_proportion_to_their_counts(
    page: Any, service: Service, seeded: dict[str, str]
) -> None:
    """Each status and content-type bar is filled, on screen, in proportion to its count:
    measured on the pixels of the rendered bar, not on its attributes."""
    open_console(page, service, ADMIN_TOKEN, "#/activity")
    bars = page.locator("table.bars progress.bar")
    bars.first.wait_for()
    measured = []
    for bar in bars.all():
        value, most = float(bar.get_attribute("value")), float(bar.get_attribute("max"))
        fill = filled_fraction(bar.screenshot(), TRACK)
        measured.append((round(value / most, 2), round(fill, 2)))
    assert len(measured) >= 4, measured
    assert any(share == 1 for share, _ in measured), measured
    for share, fill in measured:
        assert abs(share - fill) <= 0.05, measured


def test_without_a_token_the_console_says_one_is_needed(
    page: Any, service: Service, seeded: dict[str, str]
) -> None:
    """Tokens are configured, so the API answers an anonymous console with 401: shown, and
    the token field asks for one instead of offering loopback; the search did not run, so
    it does not claim "No results."."""
    open_console(page, service, None, "#/search?q=router")
    message = page.locator("#message.error")
    message.wait_for()
    assert "401" in message.inner_text() and "token" in message.inner_text()
    page.locator("#results[data-query='router']").wait_for()
    assert "No results" not in page.locator("#results").inner_text()
    assert "required: paste a bearer token" == page.locator("#token").get_attribute("placeholder")
    assert "a token is required" == page.locator("#token-state").inner_text()
