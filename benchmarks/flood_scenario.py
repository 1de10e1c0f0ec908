"""The flood scenario of the fair-ranking tests and of ``flood_bench.py``: three writers'
facts about Kafka consumer groups, one of which answers ``QUERY`` exactly, and a fourth
writer's keyword-stuffed variants of the topic, each different enough to pass admission."""

from __future__ import annotations

import random

QUERY = "kafka static membership"
ANSWER = (
    "Kafka static membership sets group.instance.id so a restarted consumer keeps its partitions"
)
FACTS = {
    "alice": (
        ANSWER,
        "Kafka consumer groups rebalance partitions when a member joins or leaves",
        "The Kafka cooperative sticky assignor moves only the partitions that change owner",
        "Kafka session.timeout.ms bounds how long a silent consumer stays in its group",
    ),
    "bob": (
        "Kafka max.poll.interval.ms evicts a consumer that stops polling",
        "Kafka consumer lag is the distance from the committed offset to the log end",
        "Each Kafka partition is read by at most one consumer of a group",
    ),
    "carol": (
        "Committing Kafka offsets after processing gives at-least-once delivery",
        "Kafka heartbeat.interval.ms should be a third of the session timeout",
        "A Kafka group coordinator broker tracks the members of each consumer group",
    ),
}
PITCH = ["kafka", "partition", "rebalancing", "consumer", "group", "static", "membership"]
FILLER = [
    "fast", "now", "best", "cheap", "easy", "guaranteed",
    "today", "cloud", "managed", "zero", "downtime", "support",
]  # fmt: skip


def flood(count: int = 200, fillers: int = len(FILLER)) -> list[str]:
    """The pitch's words shuffled, three of the first ``fillers`` filler words, a number (a
    smaller filler vocabulary makes the variants closer to each other and to the query)."""
    texts = []
    for i in range(count):
        rng = random.Random(i)
        words = rng.sample(PITCH, len(PITCH)) + rng.sample(FILLER[:fillers], 3)
        texts.append(f"{' '.join(words)} EveCloud fixes it, offer {i}")
    return texts
