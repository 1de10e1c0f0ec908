"""The environment of the processes the suites start: the user's ``APOLLO_*`` settings
left out, the suite's own in (:data:`SUITE_SETTINGS`)."""

from __future__ import annotations

import os

#: What every test process runs with unless a test says otherwise: the hashing embedder
#: (instant, deterministic vectors; the tests of the sentence model choose it).
SUITE_SETTINGS = {"APOLLO_EMBEDDER": "hashing"}


def without_apollo_settings() -> dict[str, str]:
    """``os.environ`` without its ``APOLLO_*`` variables, plus :data:`SUITE_SETTINGS`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("APOLLO_")}
    return environ | SUITE_SETTINGS
