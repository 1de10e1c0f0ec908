"""Texts and episodes (docs/texts.md): ``store_text`` and ``get_episode``."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from ..bounds import STATEMENT, STATEMENTS
from ..commands import GetEpisode, StoreKnowledge, StoreText
from ..episodes import EPISODE_CONTEXT, Episode, Statement, episode_id, read_turns
from ..errors import NotFound, ValidationError
from ..model import Status
from ..normalize import normalize_scope
from ..results import EntryView, EpisodeView, TextResult
from ..rules import scope_visible
from .bulk_ingest import ingest_chunk
from .context import Caller, Deps, resolve_viewer
from .graph import parse_id
from .ingest import IngestRequest, prepare
from .write_rate import charge_write


async def store_text(
    deps: Deps, caller: Caller, command: StoreText, idempotency_key: str | None = None
) -> TextResult:
    """The ``store_text`` use case, as the agent the command credits:

    1. the text read into turns (:func:`~apollo_domain.episodes.read_turns`) and the fields
       every statement shares checked as ``store_knowledge`` checks them, before anything
       else runs (:class:`ValidationError` naming the field);
    2. the turns split into statements by ``deps.splitter`` (a language model, or the
       deterministic split), at most :data:`~apollo_domain.bounds.STATEMENTS` of them;
    3. the episode and every statement stored in ONE unit of work (:func:`.bulk_ingest.
       ingest_chunk`): each statement through the ordinary write path (admission,
       deduplication, corroboration, contradiction, the entity graph), the entries it
       creates placed in the episode. A failure anywhere stores nothing.

    The same text from the same agent in the same partition is the same episode
    (:func:`~apollo_domain.episodes.episode_id`): giving it again stores nothing and reports
    each statement as a replayed ingest does (``deduplicated``, the entry holding it)."""
    acting = caller.acting_as(command.agent_id)
    turns, conversation = read_turns(command.text)
    shared = statement_command(command, "-")
    prepare(acting, shared)  # every field but the text, refused before any model runs
    await charge_write(deps, caller, 1)  # refused before the split when the bucket is empty
    statements = await deps.splitter.split(turns)
    STATEMENTS.check(len(statements), "text")
    for statement in statements:  # refused, never cut
        STATEMENT.check(len(statement.text), "text")
    await charge_write(deps, caller, len(statements) - 1, force=True)  # the rest, granted
    scope = normalize_scope(command.access_scope)
    owner = acting.principal.id
    episode = Episode(
        id=episode_id(acting.agent_id, scope, owner, turns),
        agent_id=acting.agent_id,
        access_scope=scope,
        owner_id=owner,
        created_at=deps.clock.now(),
        turns=turns,
        statements=len(statements),
        conversation=conversation,
    )
    requests = [
        _request(acting, command, episode, position, statement)
        for position, statement in enumerate(statements)
    ]
    results = await ingest_chunk(
        deps,
        acting,
        requests,
        idempotency_key=idempotency_key,
        kind="store_text",
        episode=episode,
        extractions=[statement.extraction for statement in statements],
    )
    return TextResult(episode.id, tuple(results))


def statement_command(command: StoreText, content: str) -> StoreKnowledge:
    """The ``store_knowledge`` command of one statement of ``command`` (the fields every
    statement shares, and its ``content``)."""
    return StoreKnowledge(
        content=content,
        content_type=command.content_type,
        tags=command.tags,
        context=command.context,
        knowledge_domain=command.knowledge_domain,
        access_scope=command.access_scope,
    )


def _request(
    caller: Caller, command: StoreText, episode: Episode, position: int, statement: Statement
) -> IngestRequest:
    place: dict[str, Any] = {"id": str(episode.id), "turn": statement.turn}
    if statement.speaker is not None:
        place["speaker"] = statement.speaker
    if statement.at is not None:
        place["at"] = statement.at.isoformat()
    try:
        request = prepare(
            caller,
            statement_command(command, statement.content),
            system_context={EPISODE_CONTEXT: place},
        )
    except ValidationError as exc:  # the text of one statement: say which one
        raise ValidationError(f"text (statement {position})", exc.message) from None
    return evolve(request, episode=(episode.id, position))


async def get_episode(deps: Deps, caller: Caller, command: GetEpisode) -> EpisodeView:
    """The episode, when the caller may see it (an entry's rule, on the episode's scope and
    owner; the embedding program, calling as itself, sees every one): its text as given
    and the unarchived statements stored from it that the caller may see, in order.
    Unknown and invisible ids are :class:`NotFound` alike."""
    target = parse_id("episode_id", command.episode_id)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        episode = await uow.episodes.get(target)
        if episode is None or not (
            caller.trusted or scope_visible(episode.access_scope, episode.owner_id, viewer)
        ):
            raise NotFound(f"episode {target} not found")
        entries = await uow.entries.in_episodes(
            [(target, 0, episode.statements)], None if caller.trusted else viewer
        )
    raw = episode.raw()
    return EpisodeView(
        id=episode.id,
        agent_id=episode.agent_id,
        access_scope=episode.access_scope,
        created_at=episode.created_at,
        text=raw if isinstance(raw, str) else tuple(raw),
        statements=tuple(EntryView.of(e) for e in entries if e.status is not Status.ARCHIVED),
    )
