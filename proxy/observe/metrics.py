"""Every Prometheus collector toolshim exports, built on an injected registry.

Collectors are created per app (never at module level: that gives "Duplicated timeseries"
in tests). With several worker processes, ``PROMETHEUS_MULTIPROC_DIR`` must be set before
``prometheus_client`` is imported; ``render`` then aggregates all workers' files, so every
scrape gives the same view whichever worker answers it. The per-process collectors
(``process_*``, ``python_gc_*``) would describe only the worker that answered, and jump between
scrapes: in multiprocess mode they are replaced by ``WorkerGauges`` (every live worker's memory,
CPU and open files, summed, and the number of live workers), which each worker keeps current.
Label values are bounded: ``model`` is a rule's match pattern or ``other`` (``context.OTHER``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

if TYPE_CHECKING:
    from .context import RequestInfo

PROCESS_SAMPLE_SECONDS = 5.0  # how often a worker writes its process figures (multiprocess mode)


class EmulationFacts(Protocol):
    """What one emulated answer did (the builder's ``Tally``); metrics only read it."""

    @property
    def calls(self) -> int: ...

    @property
    def parse_outcomes(self) -> Sequence[str]: ...

    @property
    def repairs(self) -> Sequence[str]: ...

    @property
    def sanitized(self) -> int: ...


GRAMMAR_BUCKETS = (1e-5, 1e-4, 5e-4, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")


class WorkerGauges:
    """This worker's process figures, written to the multiprocess files and summed over the live
    workers at every scrape (a dead worker's share leaves with it)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        from prometheus_client.process_collector import ProcessCollector

        self._reader = ProcessCollector(registry=None)  # reads /proc/self; yields nothing where there is none
        self.workers = Gauge(
            "toolshim_workers", "Worker processes alive.", registry=registry, multiprocess_mode="livesum"
        )
        self.memory = Gauge(
            "toolshim_workers_resident_memory_bytes",
            "Resident memory of all live workers.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.largest = Gauge(
            "toolshim_worker_max_resident_memory_bytes",
            "Resident memory of the largest live worker.",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.cpu = Gauge(
            "toolshim_workers_cpu_seconds",
            "CPU time (user and system) of all live workers.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.fds = Gauge(
            "toolshim_workers_open_fds",
            "Open file descriptors of all live workers.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.workers.set(1)

    def sample(self) -> None:
        """Write this worker's current figures."""
        found = {s.name: s.value for family in self._reader.collect() for s in family.samples}
        if "process_resident_memory_bytes" in found:
            self.memory.set(found["process_resident_memory_bytes"])
            self.largest.set(found["process_resident_memory_bytes"])
        if "process_cpu_seconds_total" in found:
            self.cpu.set(found["process_cpu_seconds_total"])
        if "process_open_fds" in found:
            self.fds.set(found["process_open_fds"])


class Metrics:
    """The collectors, as attributes; one instance per app."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._multiprocess = multiprocess_dir() is not None
        self.worker_gauges = WorkerGauges(self.registry) if self._multiprocess else None
        if not self._multiprocess:
            self._add_process_collectors()
        reg = self.registry
        self.requests = Counter(
            "toolshim_requests", "Client requests by outcome.", ["model", "tool_mode", "stream", "status"], registry=reg
        )
        self.endpoint_requests = Counter(
            "toolshim_endpoint_requests",
            "Client requests by API (chat, responses, passthrough) and outcome.",
            ["endpoint", "status"],
            registry=reg,
        )
        self.in_flight = Gauge(
            "toolshim_requests_in_flight",
            "Requests being served now.",
            ["stream"],
            registry=reg,
            multiprocess_mode="livesum",
        )
        self.request_duration = Histogram(
            "toolshim_request_duration_seconds",
            "Whole-request latency.",
            ["model", "tool_mode", "stream"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.ttft = Histogram(
            "toolshim_time_to_first_token_seconds",
            "Streaming: time to the first content.",
            ["model", "tool_mode"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.upstream_requests = Counter(
            "toolshim_upstream_requests", "Upstream calls by outcome.", ["upstream", "outcome"], registry=reg
        )
        self.upstream_duration = Histogram(
            "toolshim_upstream_request_duration_seconds",
            "Upstream call latency.",
            ["upstream", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.upstream_errors = Counter(
            "toolshim_upstream_errors", "Upstream HTTP errors by status.", ["upstream", "status"], registry=reg
        )
        self.prompt_tokens = Counter(
            "toolshim_prompt_tokens", "Prompt tokens reported by upstreams.", ["model"], registry=reg
        )
        self.completion_tokens = Counter(
            "toolshim_completion_tokens", "Completion tokens reported by upstreams.", ["model"], registry=reg
        )
        self.usage_sources = Counter(
            "toolshim_usage_source",
            "Emulated answers with usage, by where the numbers came from (upstream, tokenizer, estimate).",
            ["model", "source"],
            registry=reg,
        )
        self.tokens_saved = Counter(
            "toolshim_tokens_saved",
            "Tokens not generated thanks to the cut or an enforced stop (when known).",
            ["model"],
            registry=reg,
        )
        self.tool_calls = Counter(
            "toolshim_tool_calls", "Tool calls returned to clients.", ["model", "format"], registry=reg
        )
        self.tool_parse = Counter(
            "toolshim_tool_parse",
            "Emulated tool blocks by parse outcome.",
            ["model", "format", "outcome"],
            registry=reg,
        )
        self.tool_repairs = Counter(
            "toolshim_tool_repairs", "Repairs applied to tool blocks.", ["model", "format", "kind"], registry=reg
        )
        self.reasks = Counter("toolshim_reasks", "Follow-up requests to the model.", ["model", "reason"], registry=reg)
        self.stream_cuts = Counter(
            "toolshim_stream_cuts", "Streams cut at a tool block over the limit.", ["model", "format"], registry=reg
        )
        self.stops_enforced = Counter(
            "toolshim_stops_enforced",
            "Emulated outputs ended by toolshim at a stop sequence the upstream did not honour.",
            ["model", "format"],
            registry=reg,
        )
        self.auto_fallbacks = Counter(
            "toolshim_auto_fallbacks", "tool_mode auto: native rejected, emulating.", ["model"], registry=reg
        )
        self.markup_sanitized = Counter(
            "toolshim_markup_sanitized",
            "Responses whose markup was kept from content.",
            ["model", "format"],
            registry=reg,
        )
        self.policy_actions = Counter(
            "toolshim_policy_actions", "Conversation policies that acted.", ["model", "policy"], registry=reg
        )
        self.rules_reloads = Counter("toolshim_rules_reloads", "Rules reloads by result.", ["result"], registry=reg)
        self.connections_open = Gauge(
            "toolshim_connections_open", "Client connections open now.", registry=reg, multiprocess_mode="livesum"
        )
        self.connection_drops = Counter(
            "toolshim_connection_drops",
            "Client connections closed by a bound: head_timeout, body_timeout, idle_evicted, refused, send_timeout.",
            ["reason"],
            registry=reg,
        )
        self.requests_shed = Counter(
            "toolshim_requests_shed",
            "Requests answered 503 + Retry-After at once: in_flight_limit, connection_limit.",
            ["reason"],
            registry=reg,
        )

        self.grammar_seconds = Histogram(
            "toolshim_constraint_grammar_seconds",
            "Time to get a request's decoding grammar: built (cached=false) or from the cache (cached=true).",
            ["format", "cached"],
            registry=reg,
            buckets=GRAMMAR_BUCKETS,
        )

    def _add_process_collectors(self) -> None:
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    # ---- recording: label tuples are built here and nowhere else ------------------------------

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: prometheus-client's lookup (locks, validation) was the
        proxy's most expensive call per request (bench/overhead.py --profile). Label values are bounded."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def request_started(self, info: RequestInfo) -> None:
        """A counted request is being served: raise the in-flight gauge (once)."""
        if info.in_flight is None:
            info.in_flight = _flag(info.stream)
            self._child(self.in_flight, info.in_flight).inc()

    def request_finished(self, info: RequestInfo, status: int, duration: float) -> None:
        """Lower the gauge; count the request, its latency, first token and tokens."""
        if info.in_flight is not None:
            self._child(self.in_flight, info.in_flight).dec()
            info.in_flight = None
        if not info.counted:
            return
        stream, outcome = _flag(info.stream), info.error_code or f"{status // 100}xx"
        self._child(self.requests, info.model, info.tool_mode, stream, outcome).inc()
        self._child(self.endpoint_requests, info.endpoint, outcome).inc()
        self._child(self.request_duration, info.model, info.tool_mode, stream).observe(duration)
        if info.stream and info.first_token is not None:
            self._child(self.ttft, info.model, info.tool_mode).observe(info.first_token - info.started)
        if info.prompt_tokens:
            self._child(self.prompt_tokens, info.model).inc(info.prompt_tokens)
        if info.completion_tokens:
            self._child(self.completion_tokens, info.model).inc(info.completion_tokens)

    def record_policies(self, model: str, actions: list[str]) -> None:
        for action in actions:
            self._child(self.policy_actions, model, action).inc()

    def record_usage_source(self, model: str, source: str) -> None:
        self._child(self.usage_sources, model, source).inc()

    def record_reask(self, model: str, reason: str) -> None:
        self._child(self.reasks, model, reason).inc()

    def record_fallback(self, model: str) -> None:
        self._child(self.auto_fallbacks, model).inc()

    def record_cut(self, model: str, fmt: str, tokens_saved: int) -> None:
        self._child(self.stream_cuts, model, fmt).inc()
        if tokens_saved > 0:
            self._child(self.tokens_saved, model).inc(tokens_saved)

    def record_stop_enforced(self, model: str, fmt: str, tokens_saved: int) -> None:
        self._child(self.stops_enforced, model, fmt).inc()
        if tokens_saved > 0:
            self._child(self.tokens_saved, model).inc(tokens_saved)

    def record_emulation(self, model: str, fmt: str, tally: EmulationFacts) -> None:
        """One emulated answer: its calls, each block's parse outcome, repairs, sanitized markup."""
        if tally.calls:
            self._child(self.tool_calls, model, fmt).inc(tally.calls)
        for outcome in tally.parse_outcomes:
            self._child(self.tool_parse, model, fmt, outcome).inc()
        for kind in tally.repairs:
            self._child(self.tool_repairs, model, fmt, kind).inc()
        if tally.sanitized:
            self._child(self.markup_sanitized, model, fmt).inc(tally.sanitized)

    def record_grammar(self, fmt: str, cached: bool, seconds: float) -> None:
        self._child(self.grammar_seconds, fmt, _flag(cached)).observe(seconds)

    def record_reload(self, ok: bool) -> None:
        self._child(self.rules_reloads, "ok" if ok else "error").inc()

    def connection_opened(self) -> None:
        self.connections_open.inc()

    def connection_closed(self) -> None:
        self.connections_open.dec()

    def record_connection_drop(self, reason: str) -> None:
        """``reason``: head_timeout, body_timeout, idle_evicted, refused, send_timeout (a client that
        stopped reading an answer, ``server.sending``)."""
        self._child(self.connection_drops, reason).inc()

    def record_shed(self, reason: str) -> None:
        """``reason``: in_flight_limit, connection_limit."""
        self._child(self.requests_shed, reason).inc()

    def observe_upstream(self, upstream: str, outcome: str, seconds: float, status: int | None) -> None:
        """The upstream clients' observer hook."""
        self._child(self.upstream_requests, upstream, outcome).inc()
        self._child(self.upstream_duration, upstream, outcome).observe(seconds)
        if status is not None:
            self._child(self.upstream_errors, upstream, str(status)).inc()

    def sample_process(self) -> None:
        """Multiprocess mode: write this worker's process figures (periodically, and before a scrape)."""
        if self.worker_gauges is not None:
            self.worker_gauges.sample()

    def render(self) -> tuple[bytes, str]:
        """The exposition text: this registry, or every worker's files in multiprocess mode (with
        ``python_info``, the same in every worker, and no figure of the answering worker alone)."""
        if self._multiprocess:
            from prometheus_client import multiprocess
            from prometheus_client.platform_collector import PlatformCollector

            self.sample_process()
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            PlatformCollector(registry=registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _flag(value: bool) -> str:
    return "true" if value else "false"
