"""The limits and defaults that the commands document and the use cases enforce, in one
place: a command's field says what it allows (its JSON-schema metadata) with the same number
the use case refuses beyond. Size bounds of input (text lengths, list lengths) are
:mod:`apollo_domain.bounds`' table; the numbers here derive from it where they are one.
"""

from __future__ import annotations

from typing import Final

from . import bounds
from .model import Status

# -- search (query_knowledge, retrieve) ---------------------------------------------------

#: The most entries one search returns.
MAX_LIMIT: Final = bounds.QUERY_LIMIT.limit
#: The longest query text, in characters: a search is a question, not a document (and
#: embedding a long one costs time and memory in proportion).
MAX_QUERY_CHARS: Final = bounds.QUERY.limit
#: The statuses a search looks at unless told otherwise.
DEFAULT_STATUSES: Final = (Status.CONFIRMED, Status.CANDIDATE)
#: Retrieval modes: ``hybrid`` fuses every signal, the others use one alone.
QUERY_MODES: Final = ("hybrid", "vector", "lexical")
DEFAULT_MODE: Final = "hybrid"

# -- traversal (related_entries) ----------------------------------------------------------

#: The deepest walk over relations.
MAX_DEPTH: Final = 5
#: The most statements before and after a result a query returns as its episode neighbours.
MAX_CONTEXT_WINDOW: Final = 5
#: The most related entries one traversal returns (the highest activations win), and the
#: most relations of an entry listed each way.
MAX_RELATED: Final = 100

# -- the entity graph ---------------------------------------------------------------------

#: ``entities``: default and largest ``limit``.
DEFAULT_ENTITIES: Final = 20
MAX_ENTITIES: Final = bounds.ENTITY_LIMIT.limit
#: A name or prefix argument longer than this is refused (names are kept to 200 characters).
MAX_NAME_INPUT: Final = bounds.ENTITY_NAME.limit
#: ``related_entities``: the deepest walk.
MAX_ENTITY_DEPTH: Final = 3

# -- expertise and periodic work ----------------------------------------------------------

#: ``domains_at_risk``: the largest coverage threshold.
MAX_MIN_AGENTS: Final = 1_000_000
#: ``check_corroboration`` and ``process_outbox``: the most candidates or items one run takes.
MAX_CORROBORATION_BATCH: Final = 100_000
MAX_OUTBOX_BATCH: Final = 10_000
#: ``archive_stale`` and ``trim_access_log``: a century; a cutoff further back than that
#: archives or deletes nothing new.
MAX_DAYS: Final = 36_500

__all__ = [
    "DEFAULT_ENTITIES",
    "DEFAULT_MODE",
    "DEFAULT_STATUSES",
    "MAX_CONTEXT_WINDOW",
    "MAX_CORROBORATION_BATCH",
    "MAX_DAYS",
    "MAX_DEPTH",
    "MAX_ENTITIES",
    "MAX_ENTITY_DEPTH",
    "MAX_LIMIT",
    "MAX_MIN_AGENTS",
    "MAX_NAME_INPUT",
    "MAX_OUTBOX_BATCH",
    "MAX_QUERY_CHARS",
    "MAX_RELATED",
    "QUERY_MODES",
]
