"""Fixtures shared by every suite, and the hypothesis profiles.

One PostgreSQL + pgvector server serves the whole test session. ``APOLLO_EMBEDDER`` is
``hashing`` unless set (tests of the sentence model ask for it). Under CI (``CI`` set) the
property tests run derandomized, so a run is reproducible; elsewhere they explore freely.
"""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from apollo_adapters.postgres.embedded import temporary_folder
from tests.environ import SUITE_SETTINGS
from tests.fleet_cluster import fleet_cluster
from tests.pgbouncer_support import pgbouncer
from tests.postgres_support import postgres_server
from tests.replica_support import replica

# The suite runs with the hashing embedder (instant, deterministic vectors), as it always
# has; Apollo's default is the sentence model, which its own tests choose explicitly.
for _name, _value in SUITE_SETTINGS.items():
    os.environ.setdefault(_name, _value)

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rabbitmq-cluster",
        action="store_true",
        help="also run the drills on a three-node RabbitMQ cluster (marker "
        "'rabbitmq_cluster'; they start three extra broker nodes, about half a minute)",
    )


#: Markers of tests that start servers on fixed ports and names (the broker nodes of the
#: cluster drills, the fleet harness): under ``-n`` they all run on one worker, in turn.
ONE_AT_A_TIME = ("rabbitmq_cluster", "cluster")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The RabbitMQ cluster drills run with ``--rabbitmq-cluster`` only: listed as
    deselected otherwise. Tests of fixed ports share one xdist group."""
    grouping = bool(getattr(config.option, "loadgroup", False))  # set on xdist's workers
    for item in items:
        if any(item.get_closest_marker(name) is not None for name in ONE_AT_A_TIME):
            item.add_marker(pytest.mark.xdist_group("fixed-ports"))
        _name_each_generated_case(item)
        if grouping:
            _suffix_the_group(item)
    if config.getoption("--rabbitmq-cluster"):
        return
    marker = "rabbitmq_cluster"
    drills = [item for item in items if item.get_closest_marker(marker) is not None]
    if drills:
        config.hook.pytest_deselected(items=drills)
        items[:] = [item for item in items if item.get_closest_marker(marker) is None]


def _name_each_generated_case(item: pytest.Item) -> None:
    """schemathesis gives every operation's test the function's node id (``item.name``
    alone holds the operation); xdist's group scheduler keys its work by node id, so the
    27 operations would run as one. Each gets the id its name says."""
    last = item.nodeid.rpartition("::")[2]
    if item.parent is not None and item.name.startswith(f"{last}[") and last != item.name:
        item._id = item.parent.id.child(item.name)


def _suffix_the_group(item: pytest.Item) -> None:
    """``--dist loadgroup`` sends the tests whose node id ends in ``@<group>`` to one
    worker. pytest-xdist 3.8 writes that suffix to ``Item._nodeid``, which pytest 9 no
    longer reads (the id is ``Item._id``), so without this every group would be split."""
    groups = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
    if groups and item.parent is not None and "@" not in item.name:
        item._id = item.parent.id.child(f"{item.name}@{'_'.join(groups)}")


@pytest.fixture
def server_folder() -> Iterator[Path]:
    """A new folder to hold an embedded server's data. Not pytest's ``tmp_path``: that one
    is closed to other users (0700), so, as root, the server's system user could not enter
    it (and Apollo opens no folder it did not create)."""
    folder = temporary_folder("apollo-test-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the ONNX embedder's graphs for the whole session: the packaged model
    is exported (and quantized) once, by the first test that builds an ONNX embedder."""
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="session")
def minilm(onnx_cache: Path) -> Any:
    """The packaged all-MiniLM-L6-v2 model run by ONNX Runtime (fp32), loaded once for the
    whole session; it keeps no state between calls."""
    from apollo_adapters.embedders.onnx import OnnxEmbedder

    return OnnxEmbedder(cache_dir=onnx_cache)


__all__ = [
    "fleet_cluster",
    "minilm",
    "onnx_cache",
    "pgbouncer",
    "postgres_server",
    "replica",
    "server_folder",
]
