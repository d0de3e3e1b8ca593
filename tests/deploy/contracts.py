"""Contracts the deploy tests hold files to: the metric names and labels, and what kubernetes-validate
cannot check (named with the reason) with the shape we check instead.

kubernetes-validate ships the JSON schemas of built-in Kubernetes kinds only. A CustomResourceDefinition's
schema lives in the cluster that installs it, so the ServiceMonitor is checked here against the fields of
monitoring.coreos.com/v1 that we rely on (from the Prometheus operator's CRD), strict about unknown keys in
the parts we write, so a typo fails.
"""

from __future__ import annotations

from typing import Any

# The metric contract (/work/briefs/metrics.md): sample name -> (type, labels). proxy/metrics.py is the source of
# truth for the dashboard check; this table pins it to the contract other teams' dashboards rely on.
CONTRACT: dict[str, tuple[str, frozenset[str]]] = {
    name: (kind, frozenset(labels.split()))
    for name, kind, labels in [
        ("toolshim_requests_total", "counter", "model tool_mode stream status"),
        ("toolshim_endpoint_requests_total", "counter", "endpoint status"),
        ("toolshim_requests_in_flight", "gauge", "stream"),
        ("toolshim_request_duration_seconds", "histogram", "model tool_mode stream"),
        ("toolshim_time_to_first_token_seconds", "histogram", "model tool_mode"),
        ("toolshim_upstream_requests_total", "counter", "upstream outcome"),
        ("toolshim_upstream_request_duration_seconds", "histogram", "upstream outcome"),
        ("toolshim_upstream_errors_total", "counter", "upstream status"),
        ("toolshim_prompt_tokens_total", "counter", "model"),
        ("toolshim_completion_tokens_total", "counter", "model"),
        ("toolshim_tokens_saved_total", "counter", "model"),
        ("toolshim_tool_calls_total", "counter", "model format"),
        ("toolshim_tool_parse_total", "counter", "model format outcome"),
        ("toolshim_tool_repairs_total", "counter", "model format kind"),
        ("toolshim_reasks_total", "counter", "model reason"),
        ("toolshim_usage_source_total", "counter", "model source"),
        ("toolshim_stream_cuts_total", "counter", "model format"),
        ("toolshim_stops_enforced_total", "counter", "model format"),
        ("toolshim_auto_fallbacks_total", "counter", "model"),
        ("toolshim_markup_sanitized_total", "counter", "model format"),
        ("toolshim_policy_actions_total", "counter", "model policy"),
        ("toolshim_rules_reloads_total", "counter", "result"),
        ("toolshim_connections_open", "gauge", ""),
        ("toolshim_connection_drops_total", "counter", "reason"),
        ("toolshim_requests_shed_total", "counter", "reason"),
        ("toolshim_constraint_grammar_seconds", "histogram", "format cached"),
    ]
}

NOT_IN_K8S_SCHEMAS: dict[tuple[str, str], str] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (
        "Prometheus-operator CRD, absent from the Kubernetes schemas; "
        "test_manifests.py checks it against SERVICEMONITOR_SCHEMA"
    ),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): (
        "kustomize's build file, not an API object; test_kustomization_lists_every_manifest checks it"
    ),
}

# The Prometheus operator's Duration type.
_DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
    r"(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array", "items": {"type": "object", "required": ["key", "operator"]}},
    },
}
_ENDPOINT = {
    "type": "object",
    "additionalProperties": False,
    "anyOf": [{"required": ["port"]}, {"required": ["targetPort"]}],
    "properties": {
        "port": {"type": "string"},
        "targetPort": {"type": ["integer", "string"]},
        "path": {"type": "string", "pattern": "^/"},
        "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
        "params": {"type": "object"},
        "interval": _DURATION,
        "scrapeTimeout": _DURATION,
        "honorLabels": {"type": "boolean"},
        "honorTimestamps": {"type": "boolean"},
        "trackTimestampsStaleness": {"type": "boolean"},
        "relabelings": {"type": "array"},
        "metricRelabelings": {"type": "array"},
        "tlsConfig": {"type": "object"},
        "authorization": {"type": "object"},
        "basicAuth": {"type": "object"},
        "oauth2": {"type": "object"},
        "bearerTokenSecret": {"type": "object"},
        "followRedirects": {"type": "boolean"},
        "enableHttp2": {"type": "boolean"},
        "filterRunning": {"type": "boolean"},
        "proxyUrl": {"type": "string"},
    },
}
SERVICEMONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": _LABEL_SELECTOR,
                "namespaceSelector": {"type": "object"},
                "endpoints": {"type": "array", "minItems": 1, "items": _ENDPOINT},
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "sampleLimit": {"type": "integer", "minimum": 0},
                "scrapeProtocols": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
