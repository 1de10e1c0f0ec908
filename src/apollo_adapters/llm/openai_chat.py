"""An OpenAI-compatible chat model (``POST {base_url}/chat/completions``) with JSON output.

It serves three ports: :class:`~apollo_domain.ports.ContradictionJudge`,
:class:`~apollo_domain.ports.GasLanguageModel` and :class:`~apollo_domain.ports.TextSplitter`.
Answers are requested as JSON objects (``response_format={"type": "json_object"}``) and
then validated item by item: a malformed item is dropped, never passed on. Transport
failures (connection, timeout, non-2xx status, a reply that is not a chat completion)
raise :class:`TransportError`, and so does a split that cannot be used whole (a text too
long to send, an answer without statements, too many or oversized statements).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from apollo_domain import bounds as b
from apollo_domain.entities import (
    CO_OCCURS,
    MAX_NAME_CHARS,
    EntityMention,
    Extraction,
    TypedMention,
    normalize_entity_name,
    normalize_relation,
)
from apollo_domain.episodes import Statement, Turn
from apollo_domain.errors import TransportError
from apollo_domain.model import RelationType
from apollo_domain.normalize import is_visible
from apollo_domain.services.entities import MAX_ENTITIES_PER_ENTRY
from apollo_domain.validation import storable_text

from ..http_credentials import split_credentials

MAX_PROMPT_CHARS = 6_000
MAX_ITEMS = 20
#: The longest conversation :meth:`OpenAIChatModel.split` sends, as numbered: a longer one
#: is refused, never clipped (a clipped text would lose statements without saying so).
MAX_SPLIT_PROMPT_CHARS = 120_000
MAX_KIND_CHARS = 50

_CONTRADICTS = (
    "You compare two statements from a knowledge base. Two statements contradict when "
    "they cannot both be true about the same subject. A restatement that negates the "
    'other ("X is enabled" against "X is not enabled") or uses the opposite word '
    '("enabled" against "disabled") contradicts it, however similar the wording; '
    "it never confirms it. Answer with JSON only: "
    '{"contradicts": true} or {"contradicts": false}.'
)
_COMPREHEND = (
    "Extract the self-contained factual statements that the assistant response asserts. "
    "Each fact must make sense on its own, without the conversation. content_type is one "
    "of fact, concept, procedure, association, observation. Answer with JSON only: "
    '{"facts": [{"content": "...", "content_type": "fact"}]}; use an empty list when '
    "there is nothing worth keeping."
)
_RELATE = (
    "Say how the FACT relates to the CANDIDATE, if at all. relation_type is one of "
    + ", ".join(t.value for t in RelationType)
    + "; confidence is between 0 and 1. Answer with JSON only: "
    '{"relations": [{"relation_type": "depends_on", "confidence": 0.8}]}; use an empty '
    "list when they are unrelated."
)
_SYNTHESIZE = (
    "Combine the numbered facts into at most three new insights that none of them states "
    "alone. source_indices lists the numbers of the facts each insight uses. Answer with "
    'JSON only: {"syntheses": [{"content": "...", "content_type": "concept", '
    '"source_indices": [0, 1]}]}; use an empty list when there is no real insight.'
)
_ANTICIPATE = (
    "Given the numbered facts, list up to five short questions a colleague is likely to "
    'ask next. Answer with JSON only: {"questions": ["..."]}.'
)

_SPLIT = (
    "Split the numbered turns of a text or conversation into atomic, self-contained "
    "statements of fact, in order. Each statement says one thing and makes sense on its "
    "own: replace pronouns and other references (I, you, he, she, it, they, this, there) "
    "by the names they stand for, the speaker's name for I. Keep every fact the text "
    "states, add none, and leave out greetings and filler. turn is the number of the turn "
    "the statement comes from. entities lists the entities the statement names (people, "
    "places, organizations, products, dates, quantities, identifiers), each with its "
    "name as written and an optional kind. edges lists the typed relations the statement "
    "states between two of its entities: src and dst are names from its entities and "
    "relation is a short snake_case verb phrase (works_at, lives_in, uses). Answer with "
    'JSON only: {"statements": [{"text": "...", "turn": 0, "entities": [{"name": "...", '
    '"kind": "..."}], "edges": [{"src": "...", "relation": "...", "dst": "..."}]}]}; use '
    "an empty list when the text states nothing."
)

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_RELATION_TYPES = frozenset(t.value for t in RelationType)


class OpenAIChatModel:
    """Contradiction judge, GAS language model and text splitter over an OpenAI-compatible
    chat API.

    Pass ``client`` to share an ``httpx.AsyncClient``; one created here is closed by
    :meth:`aclose`. Credentials in ``base_url`` (``user:password@``) are sent as basic
    auth and, like ``api_key``, never appear in a URL httpx logs nor in an error message.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
        temperature: float = 0.0,
    ) -> None:
        self._credentials = split_credentials(base_url, api_key)
        self.base_url = self._credentials.url
        self.model = model
        self.temperature = temperature
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._owns_client = client is None
        self._client = client

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.base_url!r}, {self.model!r})"

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    # ------------------------------------------------------------------ ContradictionJudge

    async def contradicts(self, new: str, existing: str) -> bool:
        """Raises :class:`TransportError` when the model gives no usable verdict."""
        answer = await self._ask(
            _CONTRADICTS,
            f"EXISTING:\n{_clip(existing)}\n\nNEW:\n{_clip(new)}",
        )
        verdict = answer.get("contradicts") if isinstance(answer, Mapping) else None
        if isinstance(verdict, bool):
            return verdict
        if isinstance(verdict, str) and verdict.strip().lower() in {"true", "false"}:
            return verdict.strip().lower() == "true"
        raise TransportError(f"{self.model} gave no contradiction verdict: {answer!r:.200}")

    # ------------------------------------------------------------------ GasLanguageModel

    async def comprehend(
        self, messages: Sequence[Mapping[str, Any]], response: str
    ) -> list[Mapping[str, Any]]:
        conversation = "\n".join(
            f"{message.get('role', 'user')}: {message.get('content', '')}"
            for message in messages
            if isinstance(message, Mapping) and isinstance(message.get("content"), str)
        )
        answer = await self._ask(
            _COMPREHEND,
            f"CONVERSATION:\n{_clip(conversation)}\n\nRESPONSE:\n{_clip(response)}",
        )
        facts: list[Mapping[str, Any]] = []
        for item in _items(answer, "facts"):
            if isinstance(item, str):
                item = {"content": item}
            content = _text(item.get("content")) if isinstance(item, Mapping) else None
            if content is None:
                continue
            facts.append({"content": content, "content_type": _kind(item, "fact")})
        return facts[:MAX_ITEMS]

    async def relate(self, fact: str, candidate: str) -> list[Mapping[str, Any]]:
        answer = await self._ask(_RELATE, f"FACT:\n{_clip(fact)}\n\nCANDIDATE:\n{_clip(candidate)}")
        relations: list[Mapping[str, Any]] = []
        for item in _items(answer, "relations"):
            if not isinstance(item, Mapping):
                continue
            raw_type = item.get("relation_type", item.get("type"))
            if not isinstance(raw_type, str):
                continue
            relation_type = re.sub(r"[\s-]+", "_", raw_type.strip().lower())
            confidence = _number(item.get("confidence"))
            if relation_type in _RELATION_TYPES and confidence is not None:
                relations.append({"relation_type": relation_type, "confidence": confidence})
        return relations[:MAX_ITEMS]

    async def synthesize(self, facts: Sequence[str]) -> list[Mapping[str, Any]]:
        if not facts:
            return []
        answer = await self._ask(_SYNTHESIZE, _numbered(facts))
        syntheses: list[Mapping[str, Any]] = []
        for item in _items(answer, "syntheses"):
            if not isinstance(item, Mapping):
                continue
            content = _text(item.get("content"))
            if content is None:
                continue
            raw_indices = item.get("source_indices")
            indices = sorted(
                {
                    index
                    for index in (raw_indices if isinstance(raw_indices, list) else [])
                    if isinstance(index, int)
                    and not isinstance(index, bool)
                    and 0 <= index < len(facts)
                }
            )
            syntheses.append(
                {
                    "content": content,
                    "content_type": _kind(item, "concept"),
                    "source_indices": indices,
                }
            )
        return syntheses[:MAX_ITEMS]

    async def anticipate(self, facts: Sequence[str]) -> list[str]:
        if not facts:
            return []
        answer = await self._ask(_ANTICIPATE, _numbered(facts))
        questions = [text for text in map(_text, _items(answer, "questions")) if text]
        return questions[:MAX_ITEMS]

    # ------------------------------------------------------------------ TextSplitter

    async def split(self, turns: Sequence[Turn]) -> list[Statement]:
        """One call for the whole text. Malformed statements (no visible text, a turn that
        is not one of ``turns``), entities and edges are dropped; :class:`TransportError`
        for a text over :data:`MAX_SPLIT_PROMPT_CHARS` once numbered (before any request),
        an answer without a ``statements`` list, more than
        :data:`~apollo_domain.bounds.STATEMENTS` statements or one over
        :data:`~apollo_domain.bounds.STATEMENT`."""
        if not turns:
            return []
        conversation = "\n".join(_numbered_turn(i, turn) for i, turn in enumerate(turns))
        if len(conversation) > MAX_SPLIT_PROMPT_CHARS:
            raise TransportError(
                f"the text is too long for {self.model}: {len(conversation):,} characters "
                f"once its turns are numbered; at most {MAX_SPLIT_PROMPT_CHARS:,} are sent"
            )
        answer = await self._ask(_SPLIT, conversation)
        items = answer.get("statements") if isinstance(answer, Mapping) else None
        if not isinstance(items, list):
            raise TransportError(f"{self.model} gave no statements: {answer!r:.200}")
        statements = [
            statement
            for statement in (_statement(item, turns) for item in items)
            if statement is not None
        ]
        if len(statements) > b.STATEMENTS.limit:
            raise TransportError(
                f"{self.model} split the text into {len(statements):,} statements; at most "
                f"{b.STATEMENTS.limit:,} are allowed ({b.STATEMENTS.name})"
            )
        for position, statement in enumerate(statements):
            if len(statement.text) > b.STATEMENT.limit:
                raise TransportError(
                    f"{self.model} gave statement {position} of {len(statement.text):,} "
                    f"characters; at most {b.STATEMENT.limit:,} are allowed ({b.STATEMENT.name})"
                )
        return statements

    # ------------------------------------------------------------------ transport

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        return self._client

    async def _ask(self, system: str, user: str) -> Any:
        """The parsed JSON answer; None when the model's content is not JSON."""
        url = f"{self.base_url}/chat/completions"
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "response_format": {"type": "json_object"},
            "temperature": self.temperature,
        }
        try:
            response = await self._http().post(
                url,
                json=body,
                headers=self._headers,
                timeout=self._timeout,
                auth=self._credentials.request_auth,
            )
            response.raise_for_status()
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
        except httpx.HTTPStatusError as exc:
            raise TransportError(
                self._credentials.clean(
                    f"{url} answered {exc.response.status_code}: {exc.response.text[:200]}"
                )
            ) from exc
        except httpx.HTTPError as exc:
            raise TransportError(self._credentials.clean(f"{url} failed: {exc!r}")) from exc
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise TransportError(f"{url} returned no chat completion") from exc
        if not isinstance(content, str):
            raise TransportError(f"{url} returned a completion without text content")
        return _parse_json(content)


def _parse_json(content: str) -> Any:
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return json.loads(text)
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(text[start : end + 1])
        except ValueError:
            return None
    return None


def _items(answer: Any, key: str) -> list[Any]:
    """The list under ``key`` (or the answer itself when the model returned a bare list)."""
    if isinstance(answer, Mapping):
        answer = answer.get(key)
    return answer if isinstance(answer, list) else []


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    stripped = value.strip()
    return stripped or None


def _kind(item: Any, default: str) -> str:
    value = item.get("content_type") if isinstance(item, Mapping) else None
    return value.strip().lower() if isinstance(value, str) and value.strip() else default


def _number(value: Any) -> float | None:
    """A number as the model gave it, never clamped: a confidence outside [0, 1] or not
    finite says the answer is bad, and the GAS gate skips (and counts) it."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):
        return None


def _numbered_turn(index: int, turn: Turn) -> str:
    head = f"[{index}]"
    if turn.speaker is not None:
        head += f" {turn.speaker}"
    if turn.at is not None:
        head += f" ({turn.at.isoformat()})"
    return f"{head}: {turn.text}"


def _statement(item: Any, turns: Sequence[Turn]) -> Statement | None:
    """The statement ``item`` describes, or None when it has no visible text or no turn
    of ``turns``; its entities and edges are read by :func:`_extraction` when it lists
    entities (else the entity extractor reads its text)."""
    if not isinstance(item, Mapping):
        return None
    text = _visible(item.get("text"))
    index = item.get("turn")
    if text is None or not isinstance(index, int) or isinstance(index, bool):
        return None
    if not 0 <= index < len(turns):
        return None
    turn = turns[index]
    # the model's entities when it listed some (a list, maybe empty), else the extractor's
    read = _extraction(item) if isinstance(item.get("entities"), list) else None
    return Statement(text, index, turn.speaker, turn.at, read)


def _extraction(item: Mapping[str, Any]) -> Extraction:
    """The statement's entities (the first :data:`MAX_ENTITIES_PER_ENTRY` well-formed names,
    one per normalized name) and its edges between them (as many, relations normalized)."""
    named: dict[str, EntityMention] = {}
    for raw in _listed(item.get("entities")):
        name = _visible(raw.get("name"))
        if name is None or len(name) > MAX_NAME_CHARS or _key(name) in named:
            continue
        kind = _visible(raw.get("kind"))
        kind = kind.lower() if kind is not None and len(kind) <= MAX_KIND_CHARS else None
        named[_key(name)] = EntityMention(name, kind)
        if len(named) == MAX_ENTITIES_PER_ENTRY:
            break
    edges: dict[tuple[str, str, str], TypedMention] = {}
    for raw in _listed(item.get("edges")):
        src, dst = named.get(_key(raw.get("src"))), named.get(_key(raw.get("dst")))
        relation = raw.get("relation")
        relation = normalize_relation(relation) if isinstance(relation, str) else ""
        if src is None or dst is None or src.key == dst.key or relation in ("", CO_OCCURS):
            continue
        edges.setdefault((src.key, relation, dst.key), TypedMention(src.name, relation, dst.name))
        if len(edges) == MAX_ENTITIES_PER_ENTRY:
            break
    return Extraction(tuple(named.values()), tuple(edges.values()))


def _listed(value: Any) -> list[Mapping[str, Any]]:
    """The objects of ``value`` when it is a list; anything else in it is dropped."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _key(value: Any) -> str:
    """The normalized name ``value`` stands for ("" for none)."""
    name = _visible(value)
    return "" if name is None else normalize_entity_name(name)


def _visible(value: Any) -> str | None:
    """``value`` stripped and storable, when it is a string that shows something."""
    if not isinstance(value, str):
        return None
    text = storable_text(value).strip()
    return text if is_visible(text) else None


def _clip(text: str) -> str:
    return text if len(text) <= MAX_PROMPT_CHARS else text[:MAX_PROMPT_CHARS] + " …"


def _numbered(facts: Sequence[str]) -> str:
    return "\n".join(f"{i}. {_clip(fact)}" for i, fact in enumerate(facts))


__all__ = ["OpenAIChatModel"]
