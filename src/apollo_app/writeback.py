"""Automatic writeback in client mode: publish a qualifying LLM response to the service.

:func:`apollo_domain.writeback.evaluate_writeback` decides whether a response qualifies (long
enough, backed by a research tool call); a qualifying response goes to the writeback-store
queue when it carries its embedding, else to writeback-vectorize, where the service embeds
it. Either way the service ingests it like any other knowledge.
"""

from __future__ import annotations

import math
from typing import Any
from uuid import uuid4

from apollo_domain import commands as c
from apollo_domain.errors import ValidationError
from apollo_domain.ports.messaging import Message, MessageBus
from apollo_domain.ports.topology import Topology
from apollo_domain.results import Dispatch
from apollo_domain.writeback import (
    MIN_CONTENT_CHARS,
    STORE_ROUTE,
    WRITEBACK_ARGUMENTS,
    evaluate_writeback,
    response_field,
)

from .wire.envelope import action_of, encode_command, payload_of

#: Response attributes copied into the writeback metadata when present.
RESPONSE_METADATA = ("provider", "model", "request_id", *WRITEBACK_ARGUMENTS)


async def publish_writeback(
    bus: MessageBus,
    response: Any,
    *,
    agent_id: str,
    topology: Topology,
    min_content_chars: int = MIN_CONTENT_CHARS,
    user_id: str | None = None,
) -> Dispatch | None:
    """Publish ``response`` for the service to keep, or return None when it does not
    qualify. ``user_id`` defaults to the bus's login (the identity the service acts as)."""
    decision = evaluate_writeback(response, min_content_chars=min_content_chars)
    if not decision.qualifies:
        return None
    content = str(response_field(response, "content")).strip()
    metadata: dict[str, Any] = {"research_tools": list(decision.research_tools)}
    for name in RESPONSE_METADATA:
        value = response_field(response, name)
        if value is not None:
            metadata[name] = list(value) if isinstance(value, tuple) else value
    command: c.WritebackStore | c.WritebackVectorize
    if decision.route == STORE_ROUTE:
        embedding = _vector(response_field(response, "embedding"))
        command = c.WritebackStore(
            content=content, embedding=embedding, agent_id=agent_id, metadata=metadata
        )
        queue = topology.writeback_store_queue
    else:
        command = c.WritebackVectorize(content=content, agent_id=agent_id, metadata=metadata)
        queue = topology.writeback_vectorize_queue
    message_id = uuid4().hex
    await bus.publish(
        Message(
            routing_key=queue,
            body=encode_command(command),
            message_id=message_id,
            user_id=user_id if user_id is not None else getattr(bus, "login", None),
        )
    )
    return Dispatch(action_of(command), payload_of(command), message_id)


def _vector(value: Any) -> tuple[float, ...]:
    try:
        vector = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        raise ValidationError("embedding", "must be a sequence of numbers") from None
    if not vector or not all(math.isfinite(x) for x in vector):
        raise ValidationError("embedding", "must be a non-empty sequence of finite numbers")
    return vector


__all__ = ["RESPONSE_METADATA", "publish_writeback"]
