"""The ``apollo`` command line's own parsing: JSONL lines and argument ranges."""

from __future__ import annotations

import pytest

from apollo_app.cli import parse_line
from apollo_domain.errors import ValidationError


def test_a_jsonl_line_may_name_its_agent_source_agent() -> None:
    """lex-apollo's ``source_agent`` is read as ``agent_id`` in a JSONL line too."""
    fields = parse_line('{"content": "Raft elects leaders", "source_agent": "claude-a-1"}')
    assert {"content": "Raft elects leaders", "agent_id": "claude-a-1"} == fields


def test_a_jsonl_line_naming_two_agents_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_line('{"content": "x", "source_agent": "a-1", "agent_id": "a-2"}')
    assert "source_agent" == caught.value.field
