"""Fixtures shared by every suite, and the hypothesis profiles.

One PostgreSQL + pgvector server serves the whole test session. Under CI (``CI`` set) the
property tests run derandomized, so a run is reproducible; elsewhere they explore freely.
"""

import os

from hypothesis import settings

from tests.postgres_support import postgres_server

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

__all__ = ["postgres_server"]
