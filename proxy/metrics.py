"""Every Prometheus collector toolshim exports, built on an injected registry.

Collectors are created per app (never at module level: that gives "Duplicated timeseries"
in tests). With several worker processes, ``PROMETHEUS_MULTIPROC_DIR`` must be set before
``prometheus_client`` is imported; ``render`` then aggregates all workers' files.
Label values are bounded: ``model`` is a rule's match pattern or ``other``.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
OTHER = "other"


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")


class Metrics:
    """The collectors, as attributes; one instance per app."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._multiprocess = multiprocess_dir() is not None
        if not self._multiprocess:
            self._add_process_collectors()
        reg = self.registry
        self.requests = Counter("toolshim_requests", "Client requests by outcome.",
                                ["model", "tool_mode", "stream", "status"], registry=reg)
        self.in_flight = Gauge("toolshim_requests_in_flight", "Requests being served now.", ["stream"],
                               registry=reg, multiprocess_mode="livesum")
        self.request_duration = Histogram("toolshim_request_duration_seconds", "Whole-request latency.",
                                          ["model", "tool_mode", "stream"], buckets=LATENCY_BUCKETS, registry=reg)
        self.ttft = Histogram("toolshim_time_to_first_token_seconds", "Streaming: time to the first content.",
                              ["model", "tool_mode"], buckets=LATENCY_BUCKETS, registry=reg)
        self.upstream_requests = Counter("toolshim_upstream_requests", "Upstream calls by outcome.",
                                         ["upstream", "outcome"], registry=reg)
        self.upstream_duration = Histogram("toolshim_upstream_request_duration_seconds", "Upstream call latency.",
                                           ["upstream", "outcome"], buckets=LATENCY_BUCKETS, registry=reg)
        self.upstream_errors = Counter("toolshim_upstream_errors", "Upstream HTTP errors by status.",
                                       ["upstream", "status"], registry=reg)
        self.prompt_tokens = Counter("toolshim_prompt_tokens", "Prompt tokens reported by upstreams.", ["model"],
                                     registry=reg)
        self.completion_tokens = Counter("toolshim_completion_tokens", "Completion tokens reported by upstreams.",
                                         ["model"], registry=reg)
        self.tokens_saved = Counter("toolshim_tokens_saved", "Tokens not generated thanks to the cut (when known).",
                                    ["model"], registry=reg)
        self.tool_calls = Counter("toolshim_tool_calls", "Tool calls returned to clients.", ["model", "format"],
                                  registry=reg)
        self.tool_parse = Counter("toolshim_tool_parse", "Emulated tool blocks by parse outcome.",
                                  ["model", "format", "outcome"], registry=reg)
        self.tool_repairs = Counter("toolshim_tool_repairs", "Repairs applied to tool blocks.",
                                    ["model", "format", "kind"], registry=reg)
        self.reasks = Counter("toolshim_reasks", "Follow-up requests to the model.", ["model", "reason"],
                              registry=reg)
        self.stream_cuts = Counter("toolshim_stream_cuts", "Streams cut at a tool block over the limit.",
                                   ["model", "format"], registry=reg)
        self.auto_fallbacks = Counter("toolshim_auto_fallbacks", "tool_mode auto: native rejected, emulating.",
                                      ["model"], registry=reg)
        self.markup_sanitized = Counter("toolshim_markup_sanitized", "Responses whose markup was kept from content.",
                                        ["model", "format"], registry=reg)
        self.policy_actions = Counter("toolshim_policy_actions", "Conversation policies that acted.",
                                      ["model", "policy"], registry=reg)
        self.rules_reloads = Counter("toolshim_rules_reloads", "Rules reloads by result.", ["result"], registry=reg)

    def _add_process_collectors(self) -> None:
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def observe_upstream(self, upstream: str, outcome: str, seconds: float, status: int | None) -> None:
        """The upstream clients' observer hook."""
        self.upstream_requests.labels(upstream, outcome).inc()
        self.upstream_duration.labels(upstream, outcome).observe(seconds)
        if status is not None:
            self.upstream_errors.labels(upstream, str(status)).inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text: this registry, or every worker's files in multiprocess mode."""
        if self._multiprocess:
            from prometheus_client import multiprocess, process_collector

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            process_collector.ProcessCollector(registry=registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
