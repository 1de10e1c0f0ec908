"""The fair page's rules (apollo_domain.fairness) on hand-made rankings: the share cap and
its fill, evidence weighing, folding, and its definitions of a near-duplicate."""

from __future__ import annotations

import math
from uuid import UUID

from attrs import evolve

from apollo_domain.fairness import (
    FAMILY_MIN_WORDS,
    candidate_depth,
    content_family,
    evidence_weight,
    fair_page,
    foldable,
    near_duplicates,
    share_cap,
    source_depth,
)
from apollo_domain.model import SourceRef, Status
from apollo_domain.retrieval import Fused
from apollo_domain.testing import make_entry

FOLD = 0.9


def _entry(n: int, agent: str, content: str | None = None, *, principal=None, **changes):
    word = "".join(chr(ord("a") + int(digit)) for digit in str(n))  # no digit: a family
    entry = make_entry(content or f"distinct fact {word} about topic {agent}")
    return evolve(
        entry,
        id=UUID(int=n),
        source=SourceRef(agent, submitted_by=principal),
        owner_id=principal,
        **changes,
    )


def _page(entries, scores, limit=10, credibility=None):
    ranked = [Fused(e.id, s, {"vector": s}) for e, s in zip(entries, scores, strict=True)]
    by_id = {e.id: e for e in entries}
    return fair_page(ranked, by_id, credibility or {}, limit, FOLD)


def test_the_share_cap_is_a_third_of_the_page_rounded_up():
    assert [1, 1, 1, 2, 4, 34] == [share_cap(n) for n in (1, 2, 3, 4, 10, 100)]
    assert 50 == candidate_depth(10, 50) and 300 == candidate_depth(100, 50)
    assert 20 == source_depth(10)


def test_one_source_holds_a_third_while_others_remain_then_fills_after_them():
    """Eve's 8 entries outrank the 3 others: the page shows 4 of hers, the 3 others, then
    fills with hers (after the others, since none remains)."""
    eve = [_entry(i, "eve") for i in range(1, 9)]
    others = [_entry(20 + i, f"writer-{i}") for i in range(3)]
    page = _page(eve + others, [1.0 - i / 100 for i in range(8)] + [0.5, 0.4, 0.3])

    agents = [p.entry_id.int for p in page]
    assert [1, 2, 3, 4, 20, 21, 22, 5, 6, 7] == agents


def test_a_principal_is_capped_across_its_agents():
    """Ten agents of one principal count as one source."""
    flood = [_entry(i, f"eve-{i}", principal="eve") for i in range(1, 11)]
    others = [_entry(20 + i, f"writer-{i}", principal=f"p{i}") for i in range(6)]
    page = _page(flood + others, [1.0] * 10 + [0.1] * 6)

    assert 4 == sum(p.entry_id.int < 20 for p in page)


def test_a_single_source_fills_the_whole_page():
    entries = [_entry(i, "alice") for i in range(1, 13)]
    page = _page(entries, [1.0 - i / 100 for i in range(12)])
    assert list(range(1, 11)) == [p.entry_id.int for p in page]


def test_at_equal_relevance_a_confirmed_entry_outranks_a_candidate():
    candidate = _entry(1, "alice")
    confirmed = _entry(2, "bob", status=Status.CONFIRMED)
    page = _page([candidate, confirmed], [1.0, 1.0], credibility={"alice": 1.0})
    assert [2, 1] == [p.entry_id.int for p in page]


def test_credibility_scales_a_candidates_rank():
    """Same relevance: the credible source's candidate first; a troll's (0.05) keeps a bit
    over half its score."""
    troll = _entry(1, "troll")
    trusted = _entry(2, "trusted")
    page = _page([troll, trusted], [1.0, 1.0], credibility={"troll": 0.05, "trusted": 0.9})
    assert [2, 1] == [p.entry_id.int for p in page]
    assert [0.95, 0.525] == [p.score for p in page]
    assert 0.5 <= evidence_weight(troll, 0.0) <= evidence_weight(troll, 1.0) == 1.0


def test_a_tie_is_spread_over_its_sources():
    tied = [_entry(i, "eve") for i in range(1, 5)] + [_entry(9, "alice")]
    page = _page(tied, [1.0] * 5)
    assert [1, 9, 2, 3, 4] == [p.entry_id.int for p in page]


def test_near_duplicates_of_one_source_fold_into_the_best_and_count():
    """A template with changing numbers and word order folds; the same text from another
    source does not; a short text whose number is the fact does not."""
    template = "kafka static membership keeps partitions stable offer {}"
    eve = [_entry(i, "eve", template.format(i)) for i in range(1, 6)]
    bob = _entry(10, "bob", template.format(99))
    page = _page([*eve, bob], [1.0, 0.9, 0.8, 0.7, 0.6, 0.5])

    assert [(1, 4), (10, 0)] == [(p.entry_id.int, p.folded) for p in page]
    short_a, short_b = _entry(1, "a", "the timeout is 30 s"), _entry(2, "a", "the timeout is 60 s")
    assert len(content_family(short_a.content)) < FAMILY_MIN_WORDS
    assert not near_duplicates(short_a, short_b, FOLD)


def test_embeddings_at_the_fold_similarity_fold():
    a = _entry(1, "eve", "first wording of a claim", embedding=(1.0, 0.0))
    close = (FOLD, math.sqrt(1 - FOLD**2))
    b = _entry(2, "eve", "second phrasing entirely", embedding=close)
    far = _entry(3, "eve", "third unrelated sentence", embedding=(0.0, 1.0))
    assert near_duplicates(a, b, FOLD - 1e-9) and not near_duplicates(a, far, FOLD)
    page = _page([a, b, far], [1.0, 0.9, 0.8])
    assert [(1, 1), (3, 0)] == [(p.entry_id.int, p.folded) for p in page]


def test_only_entries_that_share_a_source_are_foldable():
    """The near pairs a page needs are among entries of one agent or one principal: a
    lone source's entry is never compared."""
    eve_1, eve_2 = _entry(1, "eve"), _entry(2, "eve")
    bob = _entry(3, "bob", principal="acme")
    carol = _entry(4, "carol", principal="acme")  # another agent of bob's principal
    dave = _entry(5, "dave")
    assert [1, 3, 2, 4] == [i.int for i in foldable([eve_1, bob, dave, eve_2, carol])]
    assert [] == foldable([dave, eve_1])
